"""A lock-row store in memory for the engine's unit tests: rows only, no expression language.

It answers exactly the requests :mod:`dynalease._engine.store` builds (read,
create, take over, renew, release, the ``check_in`` condition), the plain
GetItem/PutItem/DeleteItem that tests use to seed and read rows, CreateTable /
DescribeTable for single-key tables, and TransactWriteItems made of those.
Conditions are recognized by their exact text, not parsed; anything else
raises :class:`UnsupportedRequest`, so a new request shape in the engine shows
up here at once instead of being half-emulated. Users' tests (and tests of
expressions) use :class:`dynalease.testing.MemoryBackend`, which is moto.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dynalease._engine.store import LoopTransport, Request, bounded
from dynalease._transport.errors import map_error_code

__all__ = ["MemoryDynamoDB", "MemoryTransport", "UnsupportedRequest", "memory_lock_table"]

Item = dict[str, Any]


def _copied(value: Any) -> Any:
    """A deep copy of an AttributeValue (nested dicts and lists of str, bytes, bool, None).

    ``copy.deepcopy`` does the same with a memo for cycles and shared parts that such a
    value never has; the model tests read rows hundreds of thousands of times, and that
    memo was a sixth of their run.
    """
    if isinstance(value, dict):
        return {name: _copied(part) for name, part in value.items()}
    if isinstance(value, list):
        return [_copied(part) for part in value]
    return value


_CONDITION_FAILED = "The conditional request failed"
_WRITE = {
    "TableName",
    "ConditionExpression",
    "ExpressionAttributeNames",
    "ExpressionAttributeValues",
    "ReturnValuesOnConditionCheckFailure",
    "ReturnConsumedCapacity",
}
#: Fenced rows' writes (dynalease._engine.shapes), recognized by their exact text.
_FENCED_ACQUIRE = (
    "SET #o = :owner, #v = :version, #l = :lease, #p = :protocol, #h = :holder ADD #f :one"
)
_FENCED_RELEASE = "REMOVE #o, #v, #l, #h"
_FENCED_NAMES = {
    "#o": "owner",
    "#v": "version",
    "#l": "lease_ms",
    "#p": "protocol",
    "#f": "fence",
    "#h": "holder",
}
#: A renewal's update, and the one that also replaces the holder map (``set_metadata``).
_RENEW = "SET #v = :new"
_RENEW_HOLDER = "SET #v = :new, #h = :h"
_RENEW_NAMES = {"#o": "owner", "#v": "version"}
_PARAMS = {
    "GetItem": {"TableName", "Key", "ConsistentRead", "ReturnConsumedCapacity"},
    "PutItem": _WRITE | {"Item"},
    "DeleteItem": _WRITE | {"Key"},
    "UpdateItem": _WRITE | {"Key", "UpdateExpression", "ReturnValues"},
    "ConditionCheck": _WRITE | {"Key"},
    "TransactWriteItems": {"TransactItems", "ReturnConsumedCapacity"},
    "CreateTable": {"TableName", "KeySchema", "AttributeDefinitions", "BillingMode"},
    "DescribeTable": {"TableName"},
    "BatchGetItem": {"RequestItems", "ReturnConsumedCapacity"},
}
_LOCK_OPERATIONS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem"}
#: Transaction entries and the single-item operation each behaves like.
_TRANSACT = {"Put": "PutItem", "Delete": "DeleteItem", "Update": "UpdateItem"}


class UnsupportedRequest(AssertionError):
    """A request this store does not recognize (it is not one the engine builds)."""


class _Answer(Exception):
    """A DynamoDB error answer: code, message and the fields DynamoDB sends with it."""

    def __init__(self, code: str, message: str, response: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.response = response or {}


class _Failed(Exception):
    """A condition did not hold; ``row`` is the row it was checked against."""

    def __init__(self, row: Item | None) -> None:
        self.row = row


@dataclass
class _Table:
    name: str
    key: str
    key_type: str
    rows: dict[str, Item] = field(default_factory=dict)

    def key_of(self, item: Any) -> str:
        value = item.get(self.key) if isinstance(item, dict) else None
        if not isinstance(value, dict) or set(value) != {self.key_type}:
            raise _Answer(
                "ValidationException",
                f"The provided key element does not match the schema of table {self.name}",
            )
        return str(value[self.key_type])


@dataclass(frozen=True)
class _Write:
    """One write, checked: which row, under which condition, and what it leaves."""

    table: _Table
    row_key: str
    holds: Callable[[Item | None], bool]
    result: Callable[[Item | None], Item | None]
    return_old: bool


def _unsupported(what: str, params: Any) -> UnsupportedRequest:
    return UnsupportedRequest(
        f"the engine tests' lock-row store does not handle {what}: {params!r}; "
        "extend tests/support/memory.py, or use dynalease.testing.MemoryBackend"
    )


def _check_params(operation: str, params: Any) -> None:
    if not isinstance(params, dict) or not set(params) <= _PARAMS[operation]:
        raise _unsupported(f"these {operation} parameters", params)


def _condition(params: dict[str, Any], table: _Table) -> Callable[[Item | None], bool]:
    """The test for one of the store's conditions, recognized by its exact text."""
    text = params.get("ConditionExpression")
    names = params.get("ExpressionAttributeNames")
    values = params.get("ExpressionAttributeValues") or {}
    if text is None and names is None and not values:
        return lambda row: True
    if text == "attribute_not_exists(#k)" and names == {"#k": table.key} and not values:
        return lambda row: row is None
    if (
        text == "attribute_not_exists(#k) OR attribute_not_exists(#o)"
        and names == {**_FENCED_NAMES, "#k": table.key}
        and params.get("UpdateExpression") == _FENCED_ACQUIRE
    ):
        return lambda row: row is None or "owner" not in row
    if text == "#o = :o" and params.get("UpdateExpression") == _FENCED_RELEASE:
        return lambda row: row is not None and row.get("owner") == values[":o"]
    if text == "#o = :o AND #v = :v" and params.get("UpdateExpression") == _FENCED_ACQUIRE:
        return lambda row: (
            row is not None
            and row.get("owner") == values[":o"]
            and row.get("version") == values[":v"]
        )
    if text == "#o = :o" and names == {"#o": "owner"} and set(values) == {":o"}:
        return lambda row: row is not None and row.get("owner") == values[":o"]
    if (
        text == "#o = :o AND #v = :v"
        and names in ({"#o": "owner", "#v": "version"}, {**_RENEW_NAMES, "#h": "holder"})
        and set(values) <= {":o", ":v", ":new", ":h"}
        and {":o", ":v"} <= set(values)
    ):
        return lambda row: (
            row is not None
            and row.get("owner") == values[":o"]
            and row.get("version") == values[":v"]
        )
    raise _unsupported("this condition", params)


def _capacity(params: dict[str, Any], tables: list[str]) -> dict[str, Any]:
    if params.get("ReturnConsumedCapacity") in (None, "NONE"):
        return {}
    units = [{"TableName": name, "CapacityUnits": 0.0} for name in tables]
    return {"ConsumedCapacity": units if len(units) != 1 else units[0]}


class MemoryDynamoDB:
    """Lock tables in memory; one lock guards them, so calls may come from any thread.

    Example::

        db = memory_lock_table("locks")
        db.call("PutItem", {"TableName": "locks", "Item": {"key": {"S": "k"}}})
        assert db.tables() == {"locks": [{"key": {"S": "k"}}]}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, _Table] = {}
        #: Keys a BatchGetItem reads at most; the rest come back as UnprocessedKeys.
        self.batch_limit: int | None = None
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "CreateTable": self._create_table,
            "DescribeTable": self._describe_table,
            "GetItem": self._get_item,
            "BatchGetItem": self._batch_get_item,
            "PutItem": lambda params: self._single_write("PutItem", params),
            "DeleteItem": lambda params: self._single_write("DeleteItem", params),
            "UpdateItem": lambda params: self._single_write("UpdateItem", params),
            "TransactWriteItems": self._transact,
        }

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run one request; raise ``_Answer`` with DynamoDB's error code when it fails."""
        handler = self._handlers.get(operation)
        if handler is None:
            raise _unsupported(f"the operation {operation}", params)
        _check_params(operation, params)
        with self._lock:
            return handler(params)

    def tables(self) -> dict[str, list[Item]]:
        """A copy of every table's rows (AttributeValue form)."""
        with self._lock:
            return {
                name: [_copied(row) for row in table.rows.values()]
                for name, table in self._tables.items()
            }

    # --- tables -----------------------------------------------------------------

    def _table(self, name: Any) -> _Table:
        table = self._tables.get(name)
        if table is None:
            raise _Answer("ResourceNotFoundException", f"Requested resource not found: {name}")
        return table

    def _create_table(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["TableName"]
        schema = params.get("KeySchema")
        types = {d["AttributeName"]: d["AttributeType"] for d in params["AttributeDefinitions"]}
        if not (
            isinstance(schema, list)
            and len(schema) == 1
            and schema[0].get("KeyType") == "HASH"
            and schema[0].get("AttributeName") in types
        ):
            raise _unsupported("a table without exactly one partition key", params)
        if name in self._tables:
            raise _Answer("ResourceInUseException", f"Table already exists: {name}")
        key = schema[0]["AttributeName"]
        self._tables[name] = _Table(name, key, types[key])
        return {"TableDescription": self._description(self._tables[name])}

    def _describe_table(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"Table": self._description(self._table(params["TableName"]))}

    @staticmethod
    def _description(table: _Table) -> dict[str, Any]:
        return {
            "TableName": table.name,
            "TableStatus": "ACTIVE",
            "KeySchema": [{"AttributeName": table.key, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": table.key, "AttributeType": table.key_type}],
            "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
            "ItemCount": len(table.rows),
        }

    # --- items ------------------------------------------------------------------

    def _get_item(self, params: dict[str, Any]) -> dict[str, Any]:
        table = self._table(params["TableName"])
        row = table.rows.get(table.key_of(params["Key"]))
        answer = _capacity(params, [table.name])
        if row is not None:
            answer["Item"] = _copied(row)
        return answer

    def _batch_get_item(self, params: dict[str, Any]) -> dict[str, Any]:
        responses: dict[str, list[Item]] = {}
        unprocessed: dict[str, Any] = {}
        for name, request in params["RequestItems"].items():
            if set(request) != {"Keys", "ConsistentRead"} or request["ConsistentRead"] is not True:
                raise _unsupported("a BatchGetItem that is not strongly consistent", request)
            table = self._table(name)
            keys = request["Keys"]
            read = keys if self.batch_limit is None else keys[: self.batch_limit]
            rows = [table.rows.get(table.key_of(key)) for key in read]
            responses[name] = [_copied(row) for row in rows if row is not None]
            if len(read) < len(keys):
                unprocessed[name] = {"Keys": keys[len(read) :], "ConsistentRead": True}
        answer: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": unprocessed}
        if params.get("ReturnConsumedCapacity") not in (None, "NONE"):
            answer["ConsumedCapacity"] = [
                {"TableName": name, "CapacityUnits": 0.0} for name in responses
            ]
        return answer

    def _write(self, operation: str, params: dict[str, Any]) -> _Write:
        table = self._table(params.get("TableName"))
        holds = _condition(params, table)
        return_old = params.get("ReturnValuesOnConditionCheckFailure", "NONE") == "ALL_OLD"
        if operation == "PutItem":
            item = params["Item"]
            row_key = table.key_of(item)
            stored = _copied(item)
            return _Write(table, row_key, holds, lambda row: stored, return_old)
        row_key = table.key_of(params["Key"])
        if operation == "DeleteItem":
            return _Write(table, row_key, holds, lambda row: None, return_old)
        names, values = (
            params.get("ExpressionAttributeNames"),
            params.get("ExpressionAttributeValues"),
        )
        fenced = _fenced_update(params)
        if fenced is not None:
            return _Write(table, row_key, holds, fenced, return_old)
        expression = params.get("UpdateExpression")
        if (
            expression not in (_RENEW, _RENEW_HOLDER)
            or params.get("ConditionExpression") is None
            or (names or {}).get("#v") != "version"
            or ":new" not in (values or {})
        ):
            raise _unsupported("this update (only the renewal's is known)", params)
        changes = {"version": _copied(values[":new"])}  # type: ignore[index]
        if expression == _RENEW_HOLDER:
            changes["holder"] = _copied(values[":h"])  # type: ignore[index]
        return _Write(table, row_key, holds, lambda row: {**(row or {}), **changes}, return_old)

    def _single_write(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        write = self._write(operation, params)
        row = write.table.rows.get(write.row_key)
        if not write.holds(row):
            failed: dict[str, Any] = {}
            if write.return_old and row is not None:
                failed["Item"] = _copied(row)
            raise _Answer("ConditionalCheckFailedException", _CONDITION_FAILED, failed)
        self._commit(write, row)
        answer = _capacity(params, [write.table.name])
        if params.get("ReturnValues") == "UPDATED_NEW":
            stored = write.table.rows[write.row_key]
            changed = ("owner", "version", "lease_ms", "protocol", "fence")
            answer["Attributes"] = {name: _copied(stored[name]) for name in changed}
        return answer

    @staticmethod
    def _commit(write: _Write, row: Item | None) -> None:
        result = write.result(row)
        if result is None:
            write.table.rows.pop(write.row_key, None)
        else:
            write.table.rows[write.row_key] = result

    def _transact(self, params: dict[str, Any]) -> dict[str, Any]:
        writes: list[_Write] = []
        for entry in params.get("TransactItems", []):
            (kind, body), *others = entry.items()
            if others or kind not in {*_TRANSACT, "ConditionCheck"}:
                raise _unsupported("this transaction entry", entry)
            _check_params("ConditionCheck" if kind == "ConditionCheck" else _TRANSACT[kind], body)
            if kind == "ConditionCheck":
                table = self._table(body.get("TableName"))
                row_key = table.key_of(body["Key"])
                check = _condition(body, table)
                return_old = body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                writes.append(_Write(table, row_key, check, lambda row: row, return_old))
            else:
                writes.append(self._write(_TRANSACT[kind], body))
        reasons: list[dict[str, Any]] = []
        for write in writes:
            row = write.table.rows.get(write.row_key)
            if write.holds(row):
                reasons.append({"Code": "None"})
                continue
            reason: dict[str, Any] = {
                "Code": "ConditionalCheckFailed",
                "Message": _CONDITION_FAILED,
            }
            if write.return_old and row is not None:
                reason["Item"] = _copied(row)
            reasons.append(reason)
        if any(reason["Code"] != "None" for reason in reasons):
            codes = ", ".join(reason["Code"] for reason in reasons)
            raise _Answer(
                "TransactionCanceledException",
                f"Transaction cancelled, please refer cancellation reasons for specific "
                f"reasons [{codes}]",
                {"CancellationReasons": reasons},
            )
        for write in writes:
            self._commit(write, write.table.rows.get(write.row_key))
        return _capacity(params, sorted({write.table.name for write in writes}))


def _fenced_update(params: dict[str, Any]) -> Callable[[Item | None], Item | None] | None:
    """What a fenced acquire or release leaves, or None for any other update."""
    expression = params.get("UpdateExpression")
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    if expression == _FENCED_RELEASE and names == {
        key: _FENCED_NAMES[key] for key in ("#o", "#v", "#l", "#h")
    }:
        gone = {"owner", "version", "lease_ms", "holder"}
        return lambda row: {k: v for k, v in (row or {}).items() if k not in gone}
    if expression != _FENCED_ACQUIRE or not _FENCED_NAMES.items() <= names.items():
        return None
    if values.get(":one") != {"N": "1"} or params.get("ReturnValues") not in (None, "UPDATED_NEW"):
        raise _unsupported("this fenced update", params)
    key_name = next(name for name in params["Key"])

    def acquired(row: Item | None) -> Item:
        old = row or {key_name: _copied(params["Key"][key_name])}
        fence = int(old["fence"]["N"]) if "fence" in old else 0
        return {
            **old,
            "owner": _copied(values[":owner"]),
            "version": _copied(values[":version"]),
            "lease_ms": _copied(values[":lease"]),
            "protocol": _copied(values[":protocol"]),
            "holder": _copied(values[":holder"]),
            "fence": {"N": str(fence + 1)},
        }

    return acquired


class ScriptedTransport(LoopTransport):
    """A test transport written as ``call`` (from the calling thread) and ``send`` (on the
    loop, by default ``call`` inline); a request's ``timeout`` bounds ``send`` on the
    system clock (subclasses on a manual clock override :meth:`handle_async`)."""

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.call(operation, params)

    def handle(self, request: Request) -> dict[str, Any]:
        return self.call(request.operation, request.params)

    async def handle_async(self, request: Request) -> dict[str, Any]:
        answer = self.send(request.operation, request.params)
        return await bounded(answer, request.timeout, request.on_late)


class MemoryTransport(ScriptedTransport):
    """Runs requests inline on a :class:`MemoryDynamoDB`, failures mapped as on the wire.

    With ``lock_requests`` a lock request on a table whose key is not ``key`` (S)
    raises the same ValueError as :class:`dynalease.testing.MemoryBackend`.
    """

    def __init__(self, db: MemoryDynamoDB, *, lock_requests: bool) -> None:
        self.db = db
        self._lock_requests = lock_requests

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._lock_requests and operation in _LOCK_OPERATIONS:
            self._check_lock_table(params.get("TableName"))
        try:
            return self.db.call(operation, params)
        except _Answer as answer:
            raise map_error_code(
                answer.code, answer.message, operation, 400, answer.response
            ) from None

    def _check_lock_table(self, name: Any) -> None:
        table = self.db._tables.get(name)
        if table is not None and (table.key, table.key_type) != ("key", "S"):
            raise ValueError(
                f"table {name!r} cannot hold locks: it needs a partition key named 'key' of "
                f"type S and no sort key, but has {[(table.key, 'HASH')]}"
            )


def memory_lock_table(name: str = "locks") -> MemoryDynamoDB:
    """A fresh store holding one empty lock table (partition key ``key``, S)."""
    db = MemoryDynamoDB()
    db.call(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": [{"AttributeName": "key", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "key", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    return db
