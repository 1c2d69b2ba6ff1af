"""MemoryBackend: the lock protocol against an in-memory store, for your tests.

The same request-building and lease code as production runs against an
in-memory emulation of DynamoDB's API, so contention, renewal, decorators,
contexts and transactions with ``check_in`` behave as they do on a table.
Capacity figures are zero.

Example::

    from dynalease.testing import MemoryBackend
    from dynalease.lock import SyncDistributedLock

    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        with SyncDistributedLock(client, table="locks", key="job") as lease:
            assert not lease.lost
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from ._memory import MemoryDynamoDB, MemoryDynamoDBError
from ._transport.boto import map_error_code
from .client import DynamoDBClient

__all__ = ["MemoryBackend"]

_LOCK_OPERATIONS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem"}


class _MemoryTransport:
    """Runs requests inline against the in-memory tables."""

    def __init__(self, db: MemoryDynamoDB, *, lock_requests: bool) -> None:
        self.db = db
        self._lock_requests = lock_requests

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._lock_requests and operation in _LOCK_OPERATIONS:
            # Real DynamoDB answers a schema mismatch with a terse ValidationException;
            # in tests we can say exactly what is wrong.
            self._check_lock_table(params["TableName"])
        try:
            response: dict[str, Any] = self.db.call(operation, params)
            return response
        except MemoryDynamoDBError as error:
            answer: dict[str, Any] = {}
            if error.item is not None:
                answer["Item"] = error.item
            if error.reasons is not None:
                answer["CancellationReasons"] = error.reasons
            raise map_error_code(error.code, error.message, operation, 400, answer) from None

    async def prepare(self) -> None:
        """Nothing to set up: the table is in memory."""

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self.call(operation, params)
        return response

    def _check_lock_table(self, table: str) -> None:
        description: dict[str, Any] = self.call("DescribeTable", {"TableName": table})["Table"]
        schema = [(k["AttributeName"], k["KeyType"]) for k in description["KeySchema"]]
        types = {
            d["AttributeName"]: d["AttributeType"] for d in description["AttributeDefinitions"]
        }
        if schema != [("key", "HASH")] or types.get("key") != "S":
            raise ValueError(
                f"table {table!r} cannot hold locks: it needs a partition key named 'key' of "
                f"type S and no sort key, but has {schema}; create a dedicated lock table with "
                "client.sync_create_table(name, partition_key=('key', 'S'))"
            )


class MemoryBackend:
    """An in-memory DynamoDB for tests; ``backend.client`` is a ready DynamoDBClient.

    Use it as a context manager (tables are dropped on exit) or call
    :meth:`clear` between tests. Each backend's tables are independent.
    """

    def __init__(self) -> None:
        self._db = MemoryDynamoDB()
        client = DynamoDBClient.__new__(DynamoDBClient)
        client._setup(
            _MemoryTransport(self._db, lock_requests=False),
            _MemoryTransport(self._db, lock_requests=True),
            region="memory",
            endpoint_url=None,
        )
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        """The client whose tables live in this backend."""
        return self._client

    def tables(self) -> dict[str, Any]:
        """A copy of every table's items (AttributeValue form), for assertions."""
        return self._db.tables()

    def clear(self) -> None:
        """Drop every table and item."""
        self._db.reset()

    def __enter__(self) -> MemoryBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.clear()
