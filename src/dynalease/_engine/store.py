"""The lock store: protocol-1 requests over a transport.

A transport moves low-level DynamoDB requests (the JSON shapes of the DynamoDB
API) and maps failures to dynalease errors; the store builds the requests the
protocol needs. The same store therefore runs against botocore, the in-memory
backend of :mod:`dynalease.testing`, or a leaner HTTP transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .protocol import KEY_ATTR, OWNER_ATTR, VERSION_ATTR, LockRow

Item = dict[str, Any]

_NAMES_KEY = {"#k": KEY_ATTR}
_NAMES_OWNER = {"#o": OWNER_ATTR}
_NAMES_OWNER_VERSION = {"#o": OWNER_ATTR, "#v": VERSION_ATTR}


class ConditionFailed(Exception):
    """The write's condition did not hold; ``item`` is the current row when DynamoDB sent it."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("conditional check failed")
        self.item = item


class Transport(Protocol):
    """Sends one low-level DynamoDB request.

    Failures are raised as :class:`ConditionFailed` or as
    :class:`dynalease.exceptions.DynamoDBError` subclasses; a
    :class:`~dynalease.exceptions.RequestFailedError` whose
    ``may_have_committed`` is true means the outcome is unknown.
    """

    async def prepare(self) -> None:
        """Get ready to send: build clients, resolve credentials (off the runtime loop).

        Awaited before a lock request's timeout starts, so one-time setup is not
        charged to a single request. Failures are left for the first request to
        report; a second call after success returns at once.
        """
        ...

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send from the calling thread and block until the answer."""
        ...

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send from the runtime's event loop."""
        ...


@dataclass(frozen=True, slots=True)
class Reply:
    """A store answer: the item read or returned (if any) and the capacity it reported."""

    item: Item | None
    capacity: float


def _capacity(response: dict[str, Any]) -> float:
    consumed = response.get("ConsumedCapacity")
    if isinstance(consumed, dict):
        units = consumed.get("CapacityUnits")
        if isinstance(units, int | float):
            return float(units)
    return 0.0


class LockStore:
    """The protocol's requests on one transport."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def prepare(self) -> None:
        """Let the transport do its one-time setup before the first request is timed."""
        # Transports without setup (test doubles among them) may omit prepare.
        prepare = getattr(self.transport, "prepare", None)
        if prepare is not None:
            await prepare()

    async def read(self, table: str, key: str) -> Reply:
        """Strongly consistent read of the lock row."""
        response = await self.transport.send(
            "GetItem",
            {
                "TableName": table,
                "Key": {KEY_ATTR: {"S": key}},
                "ConsistentRead": True,
                "ReturnConsumedCapacity": "TOTAL",
            },
        )
        return Reply(response.get("Item"), _capacity(response))

    async def create(self, table: str, row: LockRow) -> Reply:
        """Write the row only if no row exists."""
        return await self._put(table, row, "attribute_not_exists(#k)", dict(_NAMES_KEY), None)

    async def replace(self, table: str, row: LockRow, observed: LockRow) -> Reply:
        """Take over: write our row only if the observed owner and version are still there."""
        return await self._put(
            table,
            row,
            "#o = :o AND #v = :v",
            dict(_NAMES_OWNER_VERSION),
            {":o": {"S": observed.owner}, ":v": {"S": observed.version}},
        )

    async def _put(
        self,
        table: str,
        row: LockRow,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any] | None,
    ) -> Reply:
        params: dict[str, Any] = {
            "TableName": table,
            "Item": row.to_item(),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ReturnConsumedCapacity": "TOTAL",
        }
        if values:
            params["ExpressionAttributeValues"] = values
        response = await self.transport.send("PutItem", params)
        return Reply(None, _capacity(response))

    async def renew(self, table: str, key: str, owner: str, current: str, new: str) -> Reply:
        """Replace our version with a new one, only if owner and version are still ours."""
        response = await self.transport.send(
            "UpdateItem",
            {
                "TableName": table,
                "Key": {KEY_ATTR: {"S": key}},
                "UpdateExpression": "SET #v = :new",
                "ConditionExpression": "#o = :o AND #v = :v",
                "ExpressionAttributeNames": dict(_NAMES_OWNER_VERSION),
                "ExpressionAttributeValues": {
                    ":o": {"S": owner},
                    ":v": {"S": current},
                    ":new": {"S": new},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                "ReturnConsumedCapacity": "TOTAL",
            },
        )
        return Reply(None, _capacity(response))

    async def delete(self, table: str, key: str, owner: str) -> Reply:
        """Delete the row only if we still own it."""
        response = await self.transport.send(
            "DeleteItem",
            {
                "TableName": table,
                "Key": {KEY_ATTR: {"S": key}},
                "ConditionExpression": "#o = :o",
                "ExpressionAttributeNames": dict(_NAMES_OWNER),
                "ExpressionAttributeValues": {":o": {"S": owner}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                "ReturnConsumedCapacity": "TOTAL",
            },
        )
        return Reply(None, _capacity(response))

    @staticmethod
    def condition_item(table: str, key: str, owner: str) -> dict[str, Any]:
        """The TransactWriteItems entry that holds only while ``owner`` owns the row."""
        return {
            "ConditionCheck": {
                "TableName": table,
                "Key": {KEY_ATTR: {"S": key}},
                "ConditionExpression": "#o = :o",
                "ExpressionAttributeNames": dict(_NAMES_OWNER),
                "ExpressionAttributeValues": {":o": {"S": owner}},
            }
        }
