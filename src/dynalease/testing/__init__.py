"""MemoryBackend: the lock protocol against DynamoDB in this process, for your tests.

The same request-building and lease code as production runs against moto's
DynamoDB, in this process and without HTTP (install ``dynalease[testing]``), so
contention, renewal, decorators, contexts, transactions with ``check_in`` and
the item helpers behave as they do against the local server: real expression
support, real error codes; no capacity figures (a lease's ``consumed_rcu`` and
``consumed_wcu`` stay 0: moto's are not DynamoDB's bill). Requests are answered one
at a time. moto is imported when the first backend is created, never by
``import dynalease``.

For example:

    from dynalease.testing import MemoryBackend
    from dynalease.lock import SyncDistributedLock

    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        with SyncDistributedLock(client, table="locks", key="job") as lease:
            assert not lease.lost
"""

from __future__ import annotations

from typing import Any

from .._values import from_item
from ..client import DynamoDBClient

__all__ = ["MemoryBackend"]


class MemoryBackend:
    """DynamoDB in this process for tests; ``backend.client`` is a ready DynamoDBClient.

    Use it as a context manager (tables are dropped on exit) or call
    `clear` between tests. Each backend's tables are its own: other
    backends, ``moto.mock_aws`` and your other boto3 clients neither see nor
    change them.

    For example:

        backend = MemoryBackend()
        backend.client.sync_create_table("jobs", partition_key=("id", "S"))
        backend.client.sync_put_item("jobs", {"id": "1"})
        assert backend.tables() == {"jobs": [{"id": "1"}]}
        backend.clear()
    """

    def __init__(self) -> None:
        try:
            from ._moto import InProcessDynamoDB
            from ._transport import MemoryTransport
        except ModuleNotFoundError as error:
            raise ImportError(
                f"MemoryBackend runs on moto's DynamoDB, but {error.name!r} is not installed: "
                "pip install 'dynalease[testing]'"
            ) from error
        self._db = InProcessDynamoDB()
        client = DynamoDBClient.__new__(DynamoDBClient)
        client._setup(
            MemoryTransport(self._db, lock_requests=False),
            MemoryTransport(self._db, lock_requests=True),
            region="memory",
            endpoint_url=None,
        )
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        """The client whose tables live in this backend."""
        return self._client

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """Every table's items as plain Python values (fresh copies), for assertions.

        Items read as `DynamoDBClient.sync_get_item` returns them. Example:

            {"locks": [{"key": "job", "owner": "...", "lease_ms": 30000, ...}]}
        """
        return {
            name: [from_item(item) for item in items] for name, items in self._db.tables().items()
        }

    def clear(self) -> None:
        """Drop every table and item."""
        self._db.reset()

    def __enter__(self) -> MemoryBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.clear()
