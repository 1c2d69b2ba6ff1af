"""The transport between a MemoryBackend's client and its in-process DynamoDB."""

from __future__ import annotations

from typing import Any

from .._engine.store import LoopTransport, Request
from ..exceptions import DynamoDBError
from ._moto import InProcessDynamoDB

_LOCK_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem"})


class MemoryTransport(LoopTransport):
    """Failures mapped as on the wire; no ``ConsumedCapacity`` (moto's is not DynamoDB's bill).

    With ``lock_requests`` it first checks that the table can hold locks: DynamoDB answers
    a schema mismatch with a terse ValidationException, and in tests we can say more.
    """

    def __init__(self, db: InProcessDynamoDB, *, lock_requests: bool) -> None:
        self.db = db
        self._lock_requests = lock_requests

    def handle(self, request: Request) -> dict[str, Any]:
        operation, params = request.operation, request.params
        if self._lock_requests and operation in _LOCK_OPERATIONS:
            self._check_lock_table(str(params.get("TableName", "")))
        elif self._lock_requests and operation == "BatchGetItem":  # a semaphore's permits
            for table in params.get("RequestItems") or {}:
                self._check_lock_table(str(table))
        response = self.db.call(operation, params)  # raises the error a lock raises
        response.pop("ConsumedCapacity", None)
        return response

    async def handle_async(self, request: Request) -> dict[str, Any]:
        # Inline: moto answers in this process, one request at a time.
        return self.handle(request)

    def _check_lock_table(self, table: str) -> None:
        if table in self.db.lock_tables:  # checked once per table definition
            return
        try:
            description: dict[str, Any] = self.db.call("DescribeTable", {"TableName": table})
        except DynamoDBError:
            return  # a missing table: the request itself reports it, under its own name
        schema = [(k["AttributeName"], k["KeyType"]) for k in description["Table"]["KeySchema"]]
        types = {
            d["AttributeName"]: d["AttributeType"]
            for d in description["Table"]["AttributeDefinitions"]
        }
        if schema != [("key", "HASH")] or types.get("key") != "S":
            raise ValueError(
                f"table {table!r} cannot hold locks: it needs a partition key named 'key' of "
                f"type S and no sort key, but has {schema}; create a dedicated lock table with "
                "client.sync_create_table(name, partition_key=('key', 'S'))"
            )
        self.db.lock_tables.add(table)
