"""DynamoDB transactions that a lock can check in to.

Collect writes inside the block; they commit together with TransactWriteItems
when the block exits cleanly, and nothing is sent when it raises. A guard's
``check_in(transaction)`` adds a condition that its lock row is still owned by
that guard, so DynamoDB rejects the transaction after a release or takeover.

The methods take pydynox 1.8's parameter names (``condition_expression``,
``expression_attribute_names``, ...) as well as the short keywords
(``condition``, ``names``, ...), and ``commit()`` behaves as pydynox's: it sends
what was collected and starts afresh, so a second commit with nothing new sends
nothing and writes added after it go into the next commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._engine.protocol import check_table_name
from ._engine.store import Request
from ._values import to_attribute, to_item
from .client import DynamoDBClient
from .exceptions import LockOwnershipLost, TransactionCanceledError

if TYPE_CHECKING:
    from ._engine.lease import Lease

__all__ = ["SyncTransaction", "Transaction"]

MAX_ITEMS = 100
MAX_TOKEN_CHARS = 36


#: Each expression parameter's two spellings: the short keyword and pydynox 1.8's name.
_SPELLINGS = (
    ("condition", "condition_expression"),
    ("names", "expression_attribute_names"),
    ("values", "expression_attribute_values"),
)

#: (condition, names, values) under one of the two spellings.
Expressions = tuple[str | None, Mapping[str, str] | None, Mapping[str, Any] | None]


def _either(short: str, short_value: Any, pydynox: str, pydynox_value: Any) -> Any:
    """The value of a parameter given by its short name or by pydynox's, not both."""
    if short_value is not None and pydynox_value is not None:
        raise TypeError(f"pass {short}= or {pydynox}=, not both (they are the same parameter)")
    return pydynox_value if short_value is None else short_value


def _expressions(short: Expressions, pydynox: Expressions) -> Expressions:
    """(condition, names, values), each given by its short name or by pydynox's, not both."""
    condition, names, values = (
        _either(short_name, given, long_name, long_given)
        for (short_name, long_name), given, long_given in zip(
            _SPELLINGS, short, pydynox, strict=True
        )
    )
    return condition, names, values


def _check_token(token: object) -> str | None:
    if token is None:
        return None
    if not isinstance(token, str):
        raise TypeError(f"client_request_token must be a str, got {type(token).__name__}")
    if not 1 <= len(token) <= MAX_TOKEN_CHARS:
        raise ValueError(
            f"client_request_token must have 1 to {MAX_TOKEN_CHARS} characters, got {len(token)}"
        )
    return token


class _TransactionBase:
    """The request a transaction builds; sync and async faces only differ in waiting."""

    def __init__(self, client: DynamoDBClient, *, client_request_token: str | None = None) -> None:
        if not isinstance(client, DynamoDBClient):
            raise TypeError(
                f"client must be a dynalease.DynamoDBClient, got {type(client).__name__}"
            )
        self.client = client
        self.client_request_token = _check_token(client_request_token)
        self._items: list[dict[str, Any]] = []
        self._leases: list[tuple[int, Lease]] = []

    def __len__(self) -> int:
        return len(self._items)

    def _add(
        self,
        kind: str,
        table: str,
        body: dict[str, Any],
        condition: str | None,
        names: Mapping[str, str] | None,
        values: Mapping[str, Any] | None,
    ) -> None:
        if len(self._items) >= MAX_ITEMS:
            raise ValueError(f"a transaction holds at most {MAX_ITEMS} items")
        entry: dict[str, Any] = {"TableName": check_table_name(table), **body}
        if condition is not None:
            if not isinstance(condition, str) or not condition.strip():
                raise ValueError("condition must be a non-empty condition expression")
            entry["ConditionExpression"] = condition
        if names:
            entry["ExpressionAttributeNames"] = dict(names)
        if values:
            if not isinstance(values, Mapping):
                raise TypeError("values must map ':placeholders' to Python values")
            entry["ExpressionAttributeValues"] = {
                name: to_attribute(value, path=f"values[{name!r}]")
                for name, value in values.items()
            }
        self._items.append({kind: entry})

    def put(
        self,
        table: str,
        item: Mapping[str, Any],
        condition_expression: str | None = None,
        expression_attribute_names: Mapping[str, str] | None = None,
        expression_attribute_values: Mapping[str, Any] | None = None,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Write ``item`` (plain Python values), optionally under a condition expression."""
        expressions = _expressions(
            (condition, names, values),
            (condition_expression, expression_attribute_names, expression_attribute_values),
        )
        self._add("Put", table, {"Item": to_item(item)}, *expressions)

    def update(
        self,
        table: str,
        key: Mapping[str, Any],
        update_expression: str | None = None,
        condition_expression: str | None = None,
        expression_attribute_names: Mapping[str, str] | None = None,
        expression_attribute_values: Mapping[str, Any] | None = None,
        *,
        update: str | None = None,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Apply an update expression (e.g. ``"SET #n = #n + :one"``) to one item."""
        update = _either("update", update, "update_expression", update_expression)
        if not isinstance(update, str) or not update.strip():
            raise ValueError("update must be a non-empty update expression, e.g. 'SET #a = :a'")
        expressions = _expressions(
            (condition, names, values),
            (condition_expression, expression_attribute_names, expression_attribute_values),
        )
        body = {"Key": to_item(key, name="key"), "UpdateExpression": update}
        self._add("Update", table, body, *expressions)

    def delete(
        self,
        table: str,
        key: Mapping[str, Any],
        condition_expression: str | None = None,
        expression_attribute_names: Mapping[str, str] | None = None,
        expression_attribute_values: Mapping[str, Any] | None = None,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Delete one item, optionally under a condition expression."""
        expressions = _expressions(
            (condition, names, values),
            (condition_expression, expression_attribute_names, expression_attribute_values),
        )
        self._add("Delete", table, {"Key": to_item(key, name="key")}, *expressions)

    def condition_check(
        self,
        table: str,
        key: Mapping[str, Any],
        condition_expression: str | None = None,
        expression_attribute_names: Mapping[str, str] | None = None,
        expression_attribute_values: Mapping[str, Any] | None = None,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Require a condition on an item without writing it."""
        expressions = _expressions(
            (condition, names, values),
            (condition_expression, expression_attribute_names, expression_attribute_values),
        )
        if expressions[0] is None:
            raise ValueError("condition_check needs a condition expression (condition=...)")
        self._add("ConditionCheck", table, {"Key": to_item(key, name="key")}, *expressions)

    def _check_in(self, lease: Lease, items: list[dict[str, Any]]) -> None:
        """Add a guard's ownership checks (one per key it holds), all or none."""
        if len(self._items) + len(items) > MAX_ITEMS:
            raise ValueError(
                f"check_in() adds {len(items)} ownership check{'s' if len(items) > 1 else ''} "
                f"(one per key of the lock) to a transaction of {len(self._items)} items: "
                f"{len(self._items) + len(items)} would exceed DynamoDB's limit of {MAX_ITEMS} "
                "actions per transaction; commit fewer items with it, or lock fewer keys"
            )
        for item in items:
            self._leases.append((len(self._items), lease))
            self._items.append(item)

    def _commit(self) -> None:
        """Send what was collected from this thread (blocking), then start afresh."""
        if not self._items:
            return
        params: dict[str, Any] = {"TransactItems": self._items, "ReturnConsumedCapacity": "TOTAL"}
        if self.client_request_token is not None:
            params["ClientRequestToken"] = self.client_request_token
        try:
            self.client._items.handle(Request("TransactWriteItems", params))
        except TransactionCanceledError as error:
            raise self._explain(error) from error
        # Only on success, as pydynox: a failed commit keeps its items for a retry.
        self._items, self._leases = [], []

    def _explain(self, error: TransactionCanceledError) -> TransactionCanceledError:
        for index, lease in self._leases:
            reason = error.reasons[index] if index < len(error.reasons) else {}
            if reason.get("Code") == "ConditionalCheckFailed":
                lease.lose("a transaction's ownership check failed: the lock moved on")
                return LockOwnershipLost(
                    f"the transaction was rejected because lock {lease.key!r} in table "
                    f"{lease.table!r} is no longer owned by this guard (released or taken "
                    "over); nothing was written. Reasons: "
                    + ", ".join(str(r.get("Code")) for r in error.reasons),
                    reasons=error.reasons,
                    table=lease.table,
                    key=lease.key,
                    owner=lease.owner,
                    request_id=error.request_id,
                )
        return error


class SyncTransaction(_TransactionBase):
    """A transaction committed when the ``with`` block exits cleanly (or by ``commit()``).

    ``client_request_token`` (1 to 36 characters) makes a retried commit
    idempotent for ten minutes; without it each commit gets a fresh token.

    For example:

        with SyncTransaction(client) as transaction:
            lease.check_in(transaction)
            transaction.put("results", {"job_id": "daily", "summary": "done"})
    """

    def __enter__(self) -> SyncTransaction:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None:
            self.commit()

    def commit(self) -> None:
        """Send the writes collected so far as one transaction (the block's exit calls it).

        The transaction then starts afresh: committing again sends only writes
        added since (nothing, if none were). A commit that fails keeps its writes,
        so calling it again retries them (with ``client_request_token``, idempotently).
        A lock's ``check_in`` guards only the commit it was added to.
        """
        self.client._check_process()
        self._commit()


class Transaction(_TransactionBase):
    """A transaction committed when the ``async with`` block exits cleanly (or by ``commit()``)."""

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        if exc is None:
            await self.commit()

    async def commit(self) -> None:
        """Async form of `SyncTransaction.commit`."""
        await self.client._in_pool(self._commit)
