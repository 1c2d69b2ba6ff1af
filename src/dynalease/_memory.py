"""A small, thread-safe, in-memory emulation of DynamoDB's low-level JSON API.

:class:`MemoryDynamoDB` takes requests and returns responses in exactly the
shape botocore's low-level client uses (AttributeValue dicts such as
``{"S": "x"}``), so ``dynalease.testing.MemoryBackend`` runs the same
request-building code as production. Errors carry the real DynamoDB error
codes. Capacity is always reported as zero.

Supported operations: CreateTable, DescribeTable, DeleteTable, ListTables,
DescribeTimeToLive, GetItem, PutItem, DeleteItem, UpdateItem and
TransactWriteItems, with condition, update and projection expressions.
Not emulated: Query/Scan/batch operations, secondary indexes, TTL expiry,
streams, legacy (non-expression) parameters and the reserved-word list.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from ._memory_expr import (
    ALL_TYPES,
    SET_TYPES,
    Env,
    ExpressionError,
    Item,
    ParsedCondition,
    ParsedProjection,
    ParsedUpdate,
    Path,
    Value,
    apply_update,
    canonical_number,
    check_condition,
    check_paths,
    check_update,
    copy_value,
    evaluate,
    parse_condition,
    parse_number,
    parse_projection,
    parse_update,
    project,
    resolve,
)

__all__ = ["MemoryDynamoDB", "MemoryDynamoDBError"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

_REGION = "memory"
_ACCOUNT = "000000000000"
_MAX_ITEM_BYTES = 400 * 1024
_MAX_HASH_KEY_BYTES = 2048
_MAX_RANGE_KEY_BYTES = 1024
_MAX_TRANSACT_ITEMS = 100
_KEY_TYPES = frozenset({"S", "N", "B"})
_CONDITION_FAILED = "The conditional request failed"
_COMMON = frozenset({"TableName", "ExpressionAttributeNames", "ExpressionAttributeValues"})
_WRITE = _COMMON | {"ConditionExpression", "ReturnValuesOnConditionCheckFailure"}
_SINGLE = frozenset({"ReturnConsumedCapacity", "ReturnItemCollectionMetrics", "ReturnValues"})
_LEGACY = frozenset({"Expected", "ConditionalOperator", "AttributeUpdates", "AttributesToGet"})
_ALLOWED: dict[str, frozenset[str]] = {
    "PutItem": _WRITE | _SINGLE | {"Item"},
    "DeleteItem": _WRITE | _SINGLE | {"Key"},
    "UpdateItem": _WRITE | _SINGLE | {"Key", "UpdateExpression"},
    "GetItem": _COMMON
    | {"Key", "ProjectionExpression", "ConsistentRead", "ReturnConsumedCapacity"},
    "Put": _WRITE | {"Item"},
    "Delete": _WRITE | {"Key"},
    "Update": _WRITE | {"Key", "UpdateExpression"},
    "ConditionCheck": _WRITE | {"Key"},
}
_RETURN_VALUES = {
    "PutItem": {"NONE", "ALL_OLD"},
    "DeleteItem": {"NONE", "ALL_OLD"},
    "UpdateItem": {"NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"},
}
_TABLE_PARAMS = frozenset(
    {
        "TableName",
        "KeySchema",
        "AttributeDefinitions",
        "BillingMode",
        "ProvisionedThroughput",
        "Tags",
        "SSESpecification",
        "StreamSpecification",
        "TableClass",
        "DeletionProtectionEnabled",
        "OnDemandThroughput",
        "WarmThroughput",
        "ResourcePolicy",
    }
)


class MemoryDynamoDBError(Exception):
    """A DynamoDB error answer from the in-memory backend.

    ``code`` is the real DynamoDB error code (``ConditionalCheckFailedException``,
    ``ValidationException``, ...). ``item`` is the current item when a condition
    failed with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``; ``reasons`` are
    the ``CancellationReasons`` of a cancelled transaction, one per item.
    """

    def __init__(
        self,
        code: str,
        message: str,
        item: dict[str, Any] | None = None,
        reasons: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.item = item
        self.reasons = reasons


def _invalid(message: str) -> MemoryDynamoDBError:
    return MemoryDynamoDBError("ValidationException", message)


@dataclass
class _Table:
    name: str
    key_names: tuple[str, ...]
    key_types: tuple[str, ...]
    key_schema: list[dict[str, str]]
    definitions: list[dict[str, str]]
    billing_mode: str
    throughput: tuple[int, int]
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    table_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    items: dict[tuple[tuple[str, Any], ...], Item] = field(default_factory=dict)

    def describe(self, status: str = "ACTIVE") -> dict[str, Any]:
        return {
            "TableName": self.name,
            "TableStatus": status,
            "KeySchema": [dict(k) for k in self.key_schema],
            "AttributeDefinitions": [dict(d) for d in self.definitions],
            "CreationDateTime": self.created,
            "ItemCount": len(self.items),
            "TableSizeBytes": sum(_item_size(i) for i in self.items.values()),
            "TableArn": f"arn:aws:dynamodb:{_REGION}:{_ACCOUNT}:table/{self.name}",
            "TableId": self.table_id,
            "BillingModeSummary": {"BillingMode": self.billing_mode},
            "ProvisionedThroughput": {
                "NumberOfDecreasesToday": 0,
                "ReadCapacityUnits": self.throughput[0],
                "WriteCapacityUnits": self.throughput[1],
            },
            "DeletionProtectionEnabled": False,
        }


@dataclass
class _Write:
    """One validated write (or condition check), ready to evaluate against the table."""

    kind: str  # Put, Update, Delete, ConditionCheck
    table: _Table
    key: tuple[tuple[str, Any], ...]
    key_item: Item
    item: Item | None
    condition: ParsedCondition | None
    update: ParsedUpdate | None
    update_paths: list[Path]
    env: Env
    old_on_failure: bool


class _ConditionFailed(Exception):
    def __init__(self, old: Item | None) -> None:
        super().__init__(_CONDITION_FAILED)
        self.old = old


# --- AttributeValues -------------------------------------------------------------


def _normalize(value: Any) -> Value:
    """A validated, canonical copy of an AttributeValue from a request."""
    if not isinstance(value, dict) or not value:
        raise _invalid(
            "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
        )
    if len(value) != 1:
        raise _invalid(
            "Supplied AttributeValue has more than one datatypes set, must contain exactly one "
            "of the supported datatypes"
        )
    ((kind, content),) = value.items()
    if kind not in ALL_TYPES:
        raise _invalid(f"Supplied AttributeValue has an unsupported datatype: {kind}")
    if kind == "S" and isinstance(content, str):
        return {"S": content}
    if kind == "N":
        return {"N": _number(content)}
    if kind == "B":
        return {"B": _binary(content)}
    if kind == "BOOL" and isinstance(content, bool):
        return {"BOOL": content}
    if kind == "NULL":
        if content is not True:
            raise _invalid(
                "One or more parameter values were invalid: Null attribute value types must "
                "have the value of true"
            )
        return {"NULL": True}
    if kind == "L" and isinstance(content, list | tuple):
        return {"L": [_normalize(v) for v in content]}
    if kind == "M" and isinstance(content, dict):
        if not all(isinstance(k, str) for k in content):
            raise _invalid("Map keys must be strings")
        return {"M": {k: _normalize(v) for k, v in content.items()}}
    if kind in SET_TYPES and isinstance(content, list | tuple | set | frozenset):
        return {kind: _set(kind, list(content))}
    raise _invalid(f"Invalid {kind} AttributeValue: {content!r}")


def _number(content: Any) -> str:
    try:
        return canonical_number(parse_number(content))
    except ExpressionError as error:
        raise _invalid(str(error)) from None


def _binary(content: Any) -> bytes:
    if isinstance(content, str):
        return content.encode("utf-8")
    if isinstance(content, bytes | bytearray | memoryview):
        return bytes(content)
    raise _invalid(f"Invalid B AttributeValue: {content!r}")


def _set(kind: str, members: list[Any]) -> list[Any]:
    if not members:
        raise _invalid(f"One or more parameter values were invalid: An {kind} may not be empty")
    if kind == "SS":
        if not all(isinstance(m, str) for m in members):
            raise _invalid("Invalid SS AttributeValue: members must be strings")
        result: list[Any] = list(members)
        probes: list[Any] = result
    elif kind == "NS":
        result = [_number(m) for m in members]
        probes = result
    else:
        result = [_binary(m) for m in members]
        probes = result
    if len(set(probes)) != len(probes):
        raise _invalid(f"Input collection {members!r} contains duplicates.")
    return result


def _value_size(value: Value) -> int:
    ((kind, content),) = value.items()
    if kind == "S":
        return len(content.encode("utf-8"))
    if kind == "B":
        return len(content)
    if kind == "N":
        return (len(content.replace("-", "").replace(".", "").strip("0")) + 1) // 2 + 1
    if kind in {"BOOL", "NULL"}:
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in content)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _value_size(v) for k, v in content.items())
    return sum(_value_size({kind[0]: m}) for m in content)


def _item_size(item: Item) -> int:
    return sum(len(name.encode("utf-8")) + _value_size(v) for name, v in item.items())


def _copy_item(item: Item) -> Item:
    return {name: copy_value(value) for name, value in item.items()}


# --- the backend ---------------------------------------------------------------


class MemoryDynamoDB:
    """DynamoDB tables in memory, answering low-level (botocore-shaped) requests.

    One lock guards all state, so calls may come from any number of threads.
    Items are copied in and out: callers never alias stored state.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, _Table] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "CreateTable": self._create_table,
            "DescribeTable": self._describe_table,
            "DeleteTable": self._delete_table,
            "ListTables": self._list_tables,
            "DescribeTimeToLive": self._describe_ttl,
            "GetItem": self._get_item,
            "PutItem": self._single_write("PutItem", "Put"),
            "DeleteItem": self._single_write("DeleteItem", "Delete"),
            "UpdateItem": self._single_write("UpdateItem", "Update"),
            "TransactWriteItems": self._transact_write,
        }

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run one DynamoDB operation (e.g. ``"PutItem"``) with low-level parameters.

        Raises :class:`MemoryDynamoDBError` with the DynamoDB error code on failure.
        """
        handler = self._handlers.get(operation)
        if handler is None:
            raise MemoryDynamoDBError(
                "UnknownOperationException", f"the memory backend does not support {operation}"
            )
        if not isinstance(params, dict):
            raise _invalid(f"{operation} parameters must be a dict")
        with self._lock:
            return handler(params)

    def reset(self) -> None:
        """Drop every table and item."""
        with self._lock:
            self._tables.clear()

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """A deep copy of every table's items (AttributeValue form), for debugging."""
        with self._lock:
            return {
                name: [_copy_item(item) for item in table.items.values()]
                for name, table in self._tables.items()
            }

    # --- tables -----------------------------------------------------------------

    def _table(self, params: dict[str, Any]) -> _Table:
        name = params.get("TableName")
        if not isinstance(name, str) or not name:
            raise _invalid("The parameter 'TableName' is required and must be a string")
        table = self._tables.get(name)
        if table is None:
            raise MemoryDynamoDBError(
                "ResourceNotFoundException",
                f"Requested resource not found: Table: {name} not found",
            )
        return table

    def _create_table(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params("CreateTable", params, _TABLE_PARAMS, required=("TableName", "KeySchema"))
        name = params["TableName"]
        if (
            not isinstance(name, str)
            or not 3 <= len(name) <= 255
            or not all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)
        ):
            raise _invalid(f"TableName must be 3-255 characters of [a-zA-Z0-9_.-], got {name!r}")
        schema = params["KeySchema"]
        roles = ["HASH", "RANGE"]
        if (
            not isinstance(schema, list)
            or not 1 <= len(schema) <= 2
            or not all(
                isinstance(k, dict) and isinstance(k.get("AttributeName"), str) for k in schema
            )
            or [k.get("KeyType") for k in schema] != roles[: len(schema)]
            or len({k["AttributeName"] for k in schema}) != len(schema)
        ):
            raise _invalid(
                "KeySchema must be one HASH key optionally followed by one RANGE key, with "
                f"distinct names; got {schema!r}"
            )
        key_names = tuple(k["AttributeName"] for k in schema)
        definitions = params.get("AttributeDefinitions") or []
        types: dict[str, str] = {}
        for definition in definitions:
            if (
                not isinstance(definition, dict)
                or not isinstance(definition.get("AttributeName"), str)
                or definition.get("AttributeType") not in _KEY_TYPES
            ):
                raise _invalid(
                    f"Invalid AttributeDefinition {definition!r}: type must be S, N or B"
                )
            types[definition["AttributeName"]] = definition["AttributeType"]
        if missing := [n for n in key_names if n not in types]:
            raise _invalid(
                "One or more parameter values were invalid: Some index key attributes are not "
                f"defined in AttributeDefinitions. Keys: {missing}, AttributeDefinitions: "
                f"{sorted(types)}"
            )
        if len(types) != len(key_names) or len(definitions) != len(types):
            raise _invalid(
                "One or more parameter values were invalid: Number of attributes in KeySchema "
                "does not exactly match number of attributes defined in AttributeDefinitions"
            )
        billing = params.get("BillingMode", "PROVISIONED")
        throughput = params.get("ProvisionedThroughput")
        if billing == "PAY_PER_REQUEST":
            if throughput is not None:
                raise _invalid(
                    "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
                    "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST"
                )
            units = (0, 0)
        elif billing == "PROVISIONED":
            read = throughput.get("ReadCapacityUnits") if isinstance(throughput, dict) else None
            write = throughput.get("WriteCapacityUnits") if isinstance(throughput, dict) else None
            if not (isinstance(read, int) and isinstance(write, int) and read >= 1 and write >= 1):
                raise _invalid(
                    "One or more parameter values were invalid: ReadCapacityUnits and "
                    "WriteCapacityUnits must both be specified when BillingMode is PROVISIONED"
                )
            units = (read, write)
        else:
            raise _invalid(f"BillingMode must be PROVISIONED or PAY_PER_REQUEST, got {billing!r}")
        if name in self._tables:
            raise MemoryDynamoDBError("ResourceInUseException", f"Table already exists: {name}")
        table = _Table(
            name=name,
            key_names=key_names,
            key_types=tuple(types[n] for n in key_names),
            key_schema=[
                {"AttributeName": n, "KeyType": r} for n, r in zip(key_names, roles, strict=False)
            ],
            definitions=[{"AttributeName": n, "AttributeType": types[n]} for n in key_names],
            billing_mode=billing,
            throughput=units,
        )
        self._tables[name] = table
        return {"TableDescription": table.describe()}

    def _describe_table(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params("DescribeTable", params, frozenset({"TableName"}))
        return {"Table": self._table(params).describe()}

    def _delete_table(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params("DeleteTable", params, frozenset({"TableName"}))
        table = self._table(params)
        del self._tables[table.name]
        return {"TableDescription": table.describe("DELETING")}

    def _list_tables(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params("ListTables", params, frozenset({"ExclusiveStartTableName", "Limit"}))
        limit = params.get("Limit", 100)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            raise _invalid("Limit must be between 1 and 100")
        start = params.get("ExclusiveStartTableName")
        names = sorted(n for n in self._tables if start is None or n > start)
        response: dict[str, Any] = {"TableNames": names[:limit]}
        if len(names) > limit:
            response["LastEvaluatedTableName"] = names[limit - 1]
        return response

    def _describe_ttl(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params("DescribeTimeToLive", params, frozenset({"TableName"}))
        self._table(params)
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}

    # --- keys -------------------------------------------------------------------

    def _key(
        self, table: _Table, item: Any, *, exact: bool
    ) -> tuple[tuple[tuple[str, Any], ...], Item]:
        """The storage key and normalized key attributes of a Key (``exact``) or an Item."""
        if not isinstance(item, dict):
            raise _invalid("The provided key element does not match the schema")
        if exact and set(item) != set(table.key_names):
            raise _invalid("The provided key element does not match the schema")
        parts: list[tuple[str, Any]] = []
        key_item: Item = {}
        for name, kind in zip(table.key_names, table.key_types, strict=True):
            if name not in item:
                raise _invalid(
                    f"One or more parameter values were invalid: Missing the key {name} in the item"
                )
            value = _normalize(item[name])
            actual = next(iter(value))
            if actual != kind:
                if exact:
                    raise _invalid("The provided key element does not match the schema")
                raise _invalid(
                    "One or more parameter values were invalid: Type mismatch for key "
                    f"{name} expected: {kind} actual: {actual}"
                )
            content = value[kind]
            if kind in {"S", "B"} and not content:
                raise _invalid(
                    "One or more parameter values are not valid. The AttributeValue for a key "
                    f"attribute cannot contain an empty {'string' if kind == 'S' else 'binary'} "
                    f"value. Key: {name}"
                )
            limit = _MAX_HASH_KEY_BYTES if not parts else _MAX_RANGE_KEY_BYTES
            if _value_size(value) > limit:
                raise _invalid(
                    f"One or more parameter values were invalid: Size of key {name} exceeds "
                    f"the limit of {limit} bytes"
                )
            parts.append((kind, content))
            key_item[name] = value
        return tuple(parts), key_item

    # --- items ------------------------------------------------------------------

    def _prepare(self, kind: str, params: Any, operation: str) -> _Write:
        """Validate one write's parameters: everything that does not depend on stored data."""
        if not isinstance(params, dict):
            raise _invalid(f"{operation}: each request must be a dict")
        allowed = _ALLOWED.get(operation, _ALLOWED[kind])
        _check_params(operation, params, allowed, required=("TableName",))
        table = self._table(params)
        item: Item | None = None
        if kind == "Put":
            raw = params.get("Item")
            if not isinstance(raw, dict):
                raise _invalid("The parameter 'Item' is required and must be a map")
            key, key_item = self._key(table, raw, exact=False)
            item = _normalize_item(raw)
            if _item_size(item) > _MAX_ITEM_BYTES:
                raise _invalid("Item size has exceeded the maximum allowed size")
        else:
            key, key_item = self._key(table, params.get("Key"), exact=True)
        condition_text = params.get("ConditionExpression")
        if kind == "ConditionCheck" and condition_text is None:
            raise _invalid("The parameter 'ConditionExpression' is required for ConditionCheck")
        update_text = params.get("UpdateExpression")
        expressions = _Expressions(params)
        condition = expressions.condition(condition_text)
        update = expressions.update(update_text)
        env = expressions.finish()
        if condition is not None:
            _validation(check_condition, condition, env)
        paths: list[Path] = []
        if update is not None:
            paths = _validation(check_update, update, env, table.key_names)
        on_failure = params.get("ReturnValuesOnConditionCheckFailure", "NONE")
        if on_failure not in {"NONE", "ALL_OLD"}:
            raise _invalid(
                f"ReturnValuesOnConditionCheckFailure must be NONE or ALL_OLD, got {on_failure!r}"
            )
        return _Write(
            kind, table, key, key_item, item, condition, update, paths, env, on_failure == "ALL_OLD"
        )

    def _evaluate(self, write: _Write) -> tuple[Item | None, Item | None]:
        """(old item, item after the write); raises _ConditionFailed or ExpressionError."""
        old = write.table.items.get(write.key)
        if write.condition is not None and not evaluate(write.condition, old, write.env):
            raise _ConditionFailed(old)
        if write.kind == "Put":
            return old, write.item
        if write.kind == "Delete":
            return old, None
        if write.kind == "ConditionCheck":
            return old, old
        base = old if old is not None else _copy_item(write.key_item)
        new = base
        if write.update is not None:
            new = apply_update(write.update, write.update_paths, base, write.env)
        if _item_size(new) > _MAX_ITEM_BYTES:
            raise ExpressionError("Item size to update has exceeded the maximum allowed size")
        return old, new

    @staticmethod
    def _commit(write: _Write, new: Item | None) -> None:
        if write.kind == "ConditionCheck":
            return
        if new is None:
            write.table.items.pop(write.key, None)
        else:
            write.table.items[write.key] = new

    def _single_write(
        self, operation: str, kind: str
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def handle(params: dict[str, Any]) -> dict[str, Any]:
            write = self._prepare(kind, params, operation)
            returns = params.get("ReturnValues", "NONE")
            if returns not in _RETURN_VALUES[operation]:
                raise _invalid(
                    f"ReturnValues {returns!r} is not valid for {operation}; use one of "
                    f"{sorted(_RETURN_VALUES[operation])}"
                )
            capacity = _capacity(params, [write.table.name], write=True)
            try:
                old, new = self._evaluate(write)
            except _ConditionFailed as failed:
                item = _copy_item(failed.old) if write.old_on_failure and failed.old else None
                raise MemoryDynamoDBError(
                    "ConditionalCheckFailedException", _CONDITION_FAILED, item=item
                ) from None
            except ExpressionError as error:
                raise _invalid(str(error)) from None
            self._commit(write, new)
            response: dict[str, Any] = {}
            attributes = _returned(returns, old, new, write.update_paths)
            if attributes:
                response["Attributes"] = attributes
            if capacity:
                response["ConsumedCapacity"] = capacity[0]
            return response

        return handle

    def _get_item(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params("GetItem", params, _ALLOWED["GetItem"], required=("TableName", "Key"))
        table = self._table(params)
        key, _ = self._key(table, params.get("Key"), exact=True)
        expressions = _Expressions(params)
        projection = expressions.projection(params.get("ProjectionExpression"))
        env = expressions.finish()
        capacity = _capacity(params, [table.name], write=False)
        paths = [resolve(p, env) for p in projection.paths] if projection else []
        _validation(check_paths, paths)
        response: dict[str, Any] = {}
        stored = table.items.get(key)
        if stored is not None:
            response["Item"] = project(stored, paths) if projection else _copy_item(stored)
        if capacity:
            response["ConsumedCapacity"] = capacity[0]
        return response

    def _transact_write(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_params(
            "TransactWriteItems",
            params,
            frozenset(
                {
                    "TransactItems",
                    "ReturnConsumedCapacity",
                    "ReturnItemCollectionMetrics",
                    "ClientRequestToken",
                }
            ),
            required=("TransactItems",),
        )
        entries = params["TransactItems"]
        if not isinstance(entries, list) or not 1 <= len(entries) <= _MAX_TRANSACT_ITEMS:
            count = len(entries) if isinstance(entries, list) else "?"
            raise _invalid(
                f"1 validation error detected: Value with {count} items at 'transactItems' "
                "failed to satisfy constraint: Member must have length between 1 and "
                f"{_MAX_TRANSACT_ITEMS}"
            )
        writes: list[_Write] = []
        seen: set[tuple[str, tuple[tuple[str, Any], ...]]] = set()
        for entry in entries:
            if (
                not isinstance(entry, dict)
                or len(entry) != 1
                or next(iter(entry))
                not in {
                    "Put",
                    "Update",
                    "Delete",
                    "ConditionCheck",
                }
            ):
                raise _invalid(
                    "Each TransactItems entry must have exactly one of Put, Update, Delete or "
                    f"ConditionCheck; got {entry!r}"
                )
            ((kind, body),) = entry.items()
            write = self._prepare(kind, body, f"TransactWriteItems {kind}")
            if (write.table.name, write.key) in seen:
                raise _invalid("Transaction request cannot include multiple operations on one item")
            seen.add((write.table.name, write.key))
            writes.append(write)
        tables = list(dict.fromkeys(w.table.name for w in writes))
        capacity = _capacity(params, tables, write=True)
        reasons: list[dict[str, Any]] = []
        outcomes: list[Item | None] = []
        for write in writes:
            try:
                _, new = self._evaluate(write)
            except _ConditionFailed as failed:
                reason: dict[str, Any] = {
                    "Code": "ConditionalCheckFailed",
                    "Message": _CONDITION_FAILED,
                }
                if write.old_on_failure and failed.old is not None:
                    reason["Item"] = _copy_item(failed.old)
                reasons.append(reason)
                outcomes.append(None)
            except ExpressionError as error:
                reasons.append({"Code": "ValidationError", "Message": str(error)})
                outcomes.append(None)
            else:
                reasons.append({"Code": "None"})
                outcomes.append(new)
        if any(r["Code"] != "None" for r in reasons):
            codes = ", ".join(r["Code"] for r in reasons)
            raise MemoryDynamoDBError(
                "TransactionCanceledException",
                "Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{codes}]",
                reasons=reasons,
            )
        for write, new in zip(writes, outcomes, strict=True):
            self._commit(write, new)
        response: dict[str, Any] = {}
        if capacity:
            response["ConsumedCapacity"] = capacity
        return response


# --- request helpers -------------------------------------------------------------


class _Expressions:
    """Parses a request's expressions and checks its placeholders are all defined and used."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.raw_names = params.get("ExpressionAttributeNames")
        self.raw_values = params.get("ExpressionAttributeValues")
        self.names: set[str] = set()
        self.values: set[str] = set()
        self.any = False

    def _text(self, text: Any, label: str) -> str | None:
        if text is None:
            return None
        if not isinstance(text, str):
            raise _invalid(f"{label} must be a string")
        self.any = True
        return text

    def condition(self, text: Any) -> ParsedCondition | None:
        source = self._text(text, "ConditionExpression")
        if source is None:
            return None
        parsed = _validation(parse_condition, source)
        self.names |= parsed.names
        self.values |= parsed.values
        return parsed

    def update(self, text: Any) -> ParsedUpdate | None:
        source = self._text(text, "UpdateExpression")
        if source is None:
            return None
        parsed = _validation(parse_update, source)
        self.names |= parsed.names
        self.values |= parsed.values
        return parsed

    def projection(self, text: Any) -> ParsedProjection | None:
        source = self._text(text, "ProjectionExpression")
        if source is None:
            return None
        parsed = _validation(parse_projection, source)
        self.names |= parsed.names
        return parsed

    def finish(self) -> Env:
        names = self._placeholders(self.raw_names, "ExpressionAttributeNames", "#", self.names)
        values = self._placeholders(self.raw_values, "ExpressionAttributeValues", ":", self.values)
        for name, target in names.items():
            if not isinstance(target, str) or not target:
                raise _invalid(
                    f"ExpressionAttributeNames contains invalid value: {target!r} for key {name}"
                )
        return Env(
            names={k: str(v) for k, v in names.items()},
            values={k: _normalize(v) for k, v in values.items()},
        )

    def _placeholders(self, given: Any, label: str, sigil: str, used: set[str]) -> dict[str, Any]:
        if given is None:
            given = {}
        elif not isinstance(given, dict):
            raise _invalid(f"{label} must be a map")
        elif not given:
            raise _invalid(f"{label} must not be empty")
        elif not self.any:
            raise _invalid(f"{label} can only be specified when using expressions")
        for placeholder in given:
            if (
                not isinstance(placeholder, str)
                or len(placeholder) < 2
                or not placeholder.startswith(sigil)
                or not all(c.isalnum() or c == "_" for c in placeholder[1:])
            ):
                raise _invalid(f'{label} contains invalid key: Syntax error; key: "{placeholder}"')
        kind = "name" if sigil == "#" else "value"
        for placeholder in sorted(used):
            if placeholder not in given:
                where = "the document path" if sigil == "#" else "expression"
                raise _invalid(
                    f"An expression attribute {kind} used in {where} is not defined; "
                    f"attribute {kind}: {placeholder}"
                )
        if unused := sorted(set(given) - used):
            raise _invalid(
                f"Value provided in {label} unused in expressions: keys: {{{', '.join(unused)}}}"
            )
        return dict(given)


def _validation(function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Call ``function``, reporting an ExpressionError as a ValidationException."""
    try:
        return function(*args, **kwargs)
    except ExpressionError as error:
        raise _invalid(str(error)) from None


def _normalize_item(raw: dict[str, Any]) -> Item:
    item: Item = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise _invalid("One or more parameter values were invalid: an attribute name is empty")
        item[name] = _normalize(value)
    return item


def _check_params(
    operation: str,
    params: dict[str, Any],
    allowed: frozenset[str],
    required: tuple[str, ...] = (),
) -> None:
    for name in params:
        if name in _LEGACY:
            raise _invalid(
                f"{operation}: the legacy parameter {name} is not supported by the memory "
                "backend; use expressions"
            )
        if name not in allowed:
            raise _invalid(f"{operation}: unknown parameter {name!r}")
    for name in required:
        if params.get(name) is None:
            raise _invalid(f"{operation}: the parameter {name!r} is required")


def _capacity(params: dict[str, Any], tables: list[str], *, write: bool) -> list[dict[str, Any]]:
    mode = params.get("ReturnConsumedCapacity", "NONE")
    if mode not in {"NONE", "TOTAL", "INDEXES"}:
        raise _invalid(f"ReturnConsumedCapacity must be NONE, TOTAL or INDEXES, got {mode!r}")
    if mode == "NONE":
        return []
    units = "WriteCapacityUnits" if write else "ReadCapacityUnits"
    result = []
    for name in tables:
        entry: dict[str, Any] = {"TableName": name, "CapacityUnits": 0.0, units: 0.0}
        if mode == "INDEXES":
            entry["Table"] = {"CapacityUnits": 0.0, units: 0.0}
        result.append(entry)
    return result


def _returned(mode: str, old: Item | None, new: Item | None, paths: list[Path]) -> Item | None:
    if mode == "ALL_OLD":
        return _copy_item(old) if old else None
    if mode == "ALL_NEW":
        return _copy_item(new) if new else None
    if mode == "UPDATED_OLD":
        return project(old, paths) if old else None
    if mode == "UPDATED_NEW":
        return project(new, paths) if new else None
    return None
