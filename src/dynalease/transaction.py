"""DynamoDB transactions that a lock can check in to.

Collect writes inside the block; they commit together with TransactWriteItems
when the block exits cleanly, and nothing is sent when it raises. A guard's
``check_in(transaction)`` adds a condition that its lock row is still owned by
that guard, so DynamoDB rejects the transaction after a release or takeover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._values import to_attribute, to_item
from .client import DynamoDBClient, check_table_name
from .exceptions import LockOwnershipLost, TransactionCanceledException

if TYPE_CHECKING:
    from ._engine.lease import Lease

__all__ = ["SyncTransaction", "Transaction"]

MAX_ITEMS = 100


class _TransactionBase:
    """The request a transaction builds; sync and async faces only differ in waiting."""

    def __init__(self, client: DynamoDBClient) -> None:
        if not isinstance(client, DynamoDBClient):
            raise TypeError(
                f"client must be a dynalease.DynamoDBClient, got {type(client).__name__}"
            )
        self.client = client
        self._items: list[dict[str, Any]] = []
        self._leases: list[tuple[int, Lease]] = []
        self._committed = False

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
        if self._committed:
            raise RuntimeError("this transaction was already committed; start a new one")
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
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Write ``item`` (plain Python values), optionally under a condition expression."""
        self._add("Put", table, {"Item": to_item(item)}, condition, names, values)

    def update(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        update: str,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Apply an update expression (e.g. ``"SET #n = #n + :one"``) to one item."""
        if not isinstance(update, str) or not update.strip():
            raise ValueError("update must be a non-empty update expression, e.g. 'SET #a = :a'")
        body = {"Key": to_item(key, name="key"), "UpdateExpression": update}
        self._add("Update", table, body, condition, names, values)

    def delete(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Delete one item, optionally under a condition expression."""
        self._add("Delete", table, {"Key": to_item(key, name="key")}, condition, names, values)

    def condition_check(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        condition: str,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Require a condition on an item without writing it."""
        if condition is None:
            raise ValueError("condition_check needs a condition expression")
        self._add(
            "ConditionCheck", table, {"Key": to_item(key, name="key")}, condition, names, values
        )

    def _check_in(self, lease: Lease, item: dict[str, Any]) -> None:
        if self._committed:
            raise RuntimeError("this transaction was already committed; start a new one")
        if len(self._items) >= MAX_ITEMS:
            raise ValueError(f"a transaction holds at most {MAX_ITEMS} items")
        self._leases.append((len(self._items), lease))
        self._items.append(item)

    def _commit(self) -> None:
        """Send the transaction from this thread (blocking)."""
        self._committed = True
        if not self._items:
            return
        params = {"TransactItems": self._items, "ReturnConsumedCapacity": "TOTAL"}
        try:
            self.client._items.call("TransactWriteItems", params)
        except TransactionCanceledException as error:
            raise self._explain(error) from error

    def _explain(self, error: TransactionCanceledException) -> TransactionCanceledException:
        for index, lease in self._leases:
            reason = error.reasons[index] if index < len(error.reasons) else {}
            if reason.get("Code") == "ConditionalCheckFailed":
                lease._lose("a transaction's ownership check failed: the lock moved on")
                return LockOwnershipLost(
                    f"the transaction was rejected because lock {lease.key!r} in table "
                    f"{lease.table!r} is no longer owned by this guard (released or taken "
                    "over); nothing was written. Reasons: "
                    + ", ".join(str(r.get("Code")) for r in error.reasons),
                    reasons=error.reasons,
                    table=lease.table,
                    key=lease.key,
                    owner=lease.owner,
                )
        return error


class SyncTransaction(_TransactionBase):
    """A transaction committed when the ``with`` block exits cleanly.

    Example::

        with SyncTransaction(client) as transaction:
            lease.check_in(transaction)
            transaction.put("results", {"job_id": "daily", "summary": "done"})
    """

    def __enter__(self) -> SyncTransaction:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None:
            self.client._check_process()
            self._commit()


class Transaction(_TransactionBase):
    """A transaction committed when the ``async with`` block exits cleanly."""

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        if exc is None:
            await self.client._in_pool(self._commit)
