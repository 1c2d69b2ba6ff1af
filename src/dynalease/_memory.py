"""An in-memory emulation of the part of DynamoDB's low-level API dynalease uses.

Requests and answers have botocore's low-level shapes, so MemoryBackend runs the
very request-building code production uses. Condition expressions support
comparisons (``=``, ``<>``), ``attribute_exists``/``attribute_not_exists``,
``AND``, ``OR``, ``NOT`` and parentheses; update expressions support ``SET`` of
values. One lock guards all state.
"""

from __future__ import annotations

import copy
import re
import threading
from typing import Any

__all__ = ["MemoryDynamoDB", "MemoryDynamoDBError"]

Item = dict[str, Any]

_TOKEN = re.compile(r"\s*(<>|=|\(|\)|,|[#:]?[A-Za-z_][A-Za-z0-9_]*)")


class MemoryDynamoDBError(Exception):
    """A DynamoDB-style error: ``code`` is the real DynamoDB error code."""

    def __init__(
        self,
        code: str,
        message: str,
        item: Item | None = None,
        reasons: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.item = item
        self.reasons = reasons


def _tokens(expression: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    text = expression.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise MemoryDynamoDBError("ValidationException", f"cannot parse {expression!r}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


class _Condition:
    """Recursive-descent evaluation of a condition expression against one item."""

    def __init__(self, expression: str, names: dict[str, str], values: dict[str, Any]) -> None:
        self.tokens = _tokens(expression)
        self.names = names
        self.values = values
        self.position = 0

    def evaluate(self, item: Item | None) -> bool:
        result = self._or(item or {})
        if self.position != len(self.tokens):
            raise MemoryDynamoDBError("ValidationException", "unexpected trailing tokens")
        return result

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise MemoryDynamoDBError("ValidationException", f"expected {expected}, got {token}")
        self.position += 1
        return token

    def _or(self, item: Item) -> bool:
        result = self._and(item)
        while (self._peek() or "").upper() == "OR":
            self._take()
            right = self._and(item)
            result = result or right
        return result

    def _and(self, item: Item) -> bool:
        result = self._not(item)
        while (self._peek() or "").upper() == "AND":
            self._take()
            right = self._not(item)
            result = result and right
        return result

    def _not(self, item: Item) -> bool:
        if (self._peek() or "").upper() == "NOT":
            self._take()
            return not self._not(item)
        return self._atom(item)

    def _atom(self, item: Item) -> bool:
        token = self._take()
        if token == "(":
            result = self._or(item)
            self._take(")")
            return result
        if token in ("attribute_exists", "attribute_not_exists"):
            self._take("(")
            name = self._name(self._take())
            self._take(")")
            return (name in item) == (token == "attribute_exists")
        left = self._operand(token, item)
        operator = self._take()
        right = self._operand(self._take(), item)
        if operator == "=":
            return bool(left is not None and left == right)
        if operator == "<>":
            return bool(left != right)
        raise MemoryDynamoDBError("ValidationException", f"unsupported operator {operator}")

    def _name(self, token: str) -> str:
        if token.startswith("#"):
            if token not in self.names:
                raise MemoryDynamoDBError("ValidationException", f"undefined name {token}")
            return self.names[token]
        return token

    def _operand(self, token: str, item: Item) -> Any:
        if token.startswith(":"):
            if token not in self.values:
                raise MemoryDynamoDBError("ValidationException", f"undefined value {token}")
            return self.values[token]
        return item.get(self._name(token))


def _apply_update(
    item: Item, expression: str, names: dict[str, str], values: dict[str, Any]
) -> None:
    tokens = _tokens(expression)
    if not tokens or tokens[0].upper() != "SET":
        raise MemoryDynamoDBError("ValidationException", "only SET updates are supported")
    position = 1
    while position < len(tokens):
        name, equals, value = tokens[position : position + 3]
        if equals != "=" or not value.startswith(":"):
            raise MemoryDynamoDBError("ValidationException", f"unsupported update {expression!r}")
        item[names.get(name, name)] = copy.deepcopy(values[value])
        position += 3
        if position < len(tokens):
            if tokens[position] != ",":
                raise MemoryDynamoDBError("ValidationException", "expected ','")
            position += 1


class MemoryDynamoDB:
    """In-memory tables answering low-level DynamoDB requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[str, dict[str, Any]] = {}
        self._items: dict[str, dict[tuple[Any, ...], Item]] = {}

    def reset(self) -> None:
        """Drop every table."""
        with self._lock:
            self._schemas.clear()
            self._items.clear()

    def tables(self) -> dict[str, list[Item]]:
        """A deep copy of every table's items."""
        with self._lock:
            return {name: copy.deepcopy(list(rows.values())) for name, rows in self._items.items()}

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one request (``operation`` is e.g. ``"PutItem"``)."""
        handler = getattr(self, f"_op_{operation}", None)
        if handler is None:
            raise MemoryDynamoDBError("ValidationException", f"{operation} is not supported")
        with self._lock:
            result: dict[str, Any] = handler(copy.deepcopy(params))
            return copy.deepcopy(result)

    # --- tables ---------------------------------------------------------------

    def _op_CreateTable(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["TableName"]
        if name in self._schemas:
            raise MemoryDynamoDBError("ResourceInUseException", f"table {name} exists")
        self._schemas[name] = {
            "TableName": name,
            "KeySchema": params["KeySchema"],
            "AttributeDefinitions": params["AttributeDefinitions"],
            "TableStatus": "ACTIVE",
            "BillingModeSummary": {"BillingMode": params.get("BillingMode", "PAY_PER_REQUEST")},
        }
        self._items[name] = {}
        return {"TableDescription": self._schemas[name]}

    def _op_DescribeTable(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"Table": self._schema(params["TableName"])}

    def _op_DescribeTimeToLive(self, params: dict[str, Any]) -> dict[str, Any]:
        self._schema(params["TableName"])
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}

    def _op_ListTables(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"TableNames": sorted(self._schemas)}

    def _op_DeleteTable(self, params: dict[str, Any]) -> dict[str, Any]:
        schema = self._schema(params["TableName"])
        del self._schemas[params["TableName"]]
        del self._items[params["TableName"]]
        return {"TableDescription": schema}

    def _schema(self, table: str) -> dict[str, Any]:
        schema = self._schemas.get(table)
        if schema is None:
            raise MemoryDynamoDBError("ResourceNotFoundException", f"table {table} not found")
        return schema

    def _key(self, table: str, key: Item) -> tuple[Any, ...]:
        schema = self._schema(table)
        names = [k["AttributeName"] for k in schema["KeySchema"]]
        types = {d["AttributeName"]: d["AttributeType"] for d in schema["AttributeDefinitions"]}
        parts: list[Any] = []
        for name in names:
            value = key.get(name)
            if not isinstance(value, dict) or list(value) != [types[name]]:
                raise MemoryDynamoDBError(
                    "ValidationException", "The provided key element does not match the schema"
                )
            parts.append(value[types[name]])
        return tuple(parts)

    def _key_of(self, table: str, item: Item) -> tuple[tuple[Any, ...], Item]:
        schema = self._schema(table)
        names = [k["AttributeName"] for k in schema["KeySchema"]]
        return self._key(table, {n: item.get(n) for n in names}), {n: item.get(n) for n in names}

    # --- items ----------------------------------------------------------------

    @staticmethod
    def _check(params: dict[str, Any], current: Item | None) -> None:
        condition = params.get("ConditionExpression")
        if condition is None:
            return
        evaluator = _Condition(
            condition,
            params.get("ExpressionAttributeNames", {}),
            params.get("ExpressionAttributeValues", {}),
        )
        if not evaluator.evaluate(current):
            old = (
                current if params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            )
            raise MemoryDynamoDBError(
                "ConditionalCheckFailedException", "The conditional request failed", item=old
            )

    @staticmethod
    def _capacity(params: dict[str, Any]) -> dict[str, Any]:
        if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
            return {"ConsumedCapacity": {"TableName": params["TableName"], "CapacityUnits": 0.0}}
        return {}

    def _op_GetItem(self, params: dict[str, Any]) -> dict[str, Any]:
        table = params["TableName"]
        item = (
            self._items[table].get(self._key(table, params["Key"]))
            if table in self._items
            else None
        )
        self._schema(table)
        answer = self._capacity(params)
        if item is not None:
            answer["Item"] = item
        return answer

    def _op_PutItem(self, params: dict[str, Any]) -> dict[str, Any]:
        table = params["TableName"]
        key, _ = self._key_of(table, params["Item"])
        current = self._items[table].get(key)
        self._check(params, current)
        self._items[table][key] = params["Item"]
        answer = self._capacity(params)
        if params.get("ReturnValues") == "ALL_OLD" and current is not None:
            answer["Attributes"] = current
        return answer

    def _op_DeleteItem(self, params: dict[str, Any]) -> dict[str, Any]:
        table = params["TableName"]
        key = self._key(table, params["Key"])
        current = self._items[table].get(key)
        self._check(params, current)
        self._items[table].pop(key, None)
        answer = self._capacity(params)
        if params.get("ReturnValues") == "ALL_OLD" and current is not None:
            answer["Attributes"] = current
        return answer

    def _op_UpdateItem(self, params: dict[str, Any]) -> dict[str, Any]:
        table = params["TableName"]
        key = self._key(table, params["Key"])
        current = self._items[table].get(key)
        self._check(params, current)
        updated = copy.deepcopy(current) if current is not None else dict(params["Key"])
        _apply_update(
            updated,
            params["UpdateExpression"],
            params.get("ExpressionAttributeNames", {}),
            params.get("ExpressionAttributeValues", {}),
        )
        self._items[table][key] = updated
        return self._capacity(params)

    def _op_TransactWriteItems(self, params: dict[str, Any]) -> dict[str, Any]:
        entries = params["TransactItems"]
        if not 1 <= len(entries) <= 100:
            raise MemoryDynamoDBError("ValidationException", "1..100 transaction items")
        planned: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
        reasons: list[dict[str, Any]] = []
        failed = False
        seen: set[tuple[str, tuple[Any, ...]]] = set()
        for entry in entries:
            ((kind, body),) = entry.items()
            table = body["TableName"]
            key = (
                self._key_of(table, body["Item"])[0]
                if kind == "Put"
                else self._key(table, body["Key"])
            )
            if (table, key) in seen:
                raise MemoryDynamoDBError(
                    "ValidationException",
                    "Transaction request cannot include multiple operations on one item",
                )
            seen.add((table, key))
            try:
                self._check(body, self._items[table].get(key))
                reasons.append({"Code": "None"})
            except MemoryDynamoDBError as error:
                failed = True
                reason: dict[str, Any] = {
                    "Code": "ConditionalCheckFailed",
                    "Message": error.message,
                }
                if error.item is not None:
                    reason["Item"] = error.item
                reasons.append(reason)
            planned.append((kind, table, key, body))
        if failed:
            raise MemoryDynamoDBError(
                "TransactionCanceledException", "Transaction cancelled", reasons=reasons
            )
        for kind, table, key, body in planned:
            if kind == "Put":
                self._items[table][key] = body["Item"]
            elif kind == "Delete":
                self._items[table].pop(key, None)
            elif kind == "Update":
                current = self._items[table].get(key)
                updated = copy.deepcopy(current) if current is not None else dict(body["Key"])
                _apply_update(
                    updated,
                    body["UpdateExpression"],
                    body.get("ExpressionAttributeNames", {}),
                    body.get("ExpressionAttributeValues", {}),
                )
                self._items[table][key] = updated
        return {}
