"""The lock store: protocol-1 requests over a transport.

A transport moves low-level DynamoDB requests (the JSON shapes of the DynamoDB
API) and maps failures to dynalease errors; the store builds the requests the
protocol needs. The same store therefore runs against botocore, the in-memory
backend of :mod:`dynalease.testing`, or a leaner HTTP transport.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

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


class LimitingTransport(Transport, Protocol):
    """A transport that bounds a request's wait itself (see :class:`Limit`)."""

    async def send_within(
        self,
        operation: str,
        params: dict[str, Any],
        timeout: float,
        on_late: Callable[[Awaitable[dict[str, Any]]], object],
    ) -> dict[str, Any]:
        """Send from the runtime loop; raise :class:`TimedOut` after ``timeout`` seconds."""
        ...


class BlockingTransport(Transport, Protocol):
    """A transport that can also send from a sync caller's own thread."""

    def blocking_ready(self) -> bool:
        """True when :meth:`send_blocking` may be used now."""
        ...

    def send_blocking(
        self,
        operation: str,
        params: dict[str, Any],
        timeout: float,
        on_late: Callable[[Any], object],
    ) -> dict[str, Any]:
        """Send from the calling thread, waiting at most ``timeout`` seconds.

        Raises like :meth:`Transport.send`; a request sent but not answered in
        time (or interrupted) is first handed to ``on_late``.
        """
        ...

    async def finish_late(self, operation: str, late: Any) -> dict[str, Any]:
        """The answer to a request handed to ``on_late`` (on the runtime loop)."""
        ...


class TimedOut(Exception):
    """No answer within the caller's :class:`Limit`; the rest went to its ``on_late``."""


@dataclass(frozen=True, slots=True)
class Limit:
    """How long a request may take before the engine stops waiting for it.

    A transport with ``send_within`` honours it itself: after ``timeout``
    seconds (or when the wait is cancelled) it hands ``on_late`` an awaitable of
    the answer still to come and raises :class:`TimedOut` (or the
    cancellation). The engine then needs no task per request to keep a write
    running past its time limit.
    """

    timeout: float
    on_late: Callable[[Awaitable[dict[str, Any]]], object]


@dataclass(frozen=True, slots=True)
class Reply:
    """A store answer: the item read or returned (if any) and the capacity it reported.

    A ``BatchGetItem`` answer carries the rows it found by key in ``items`` and
    the keys DynamoDB left unread in ``unprocessed``.
    """

    item: Item | None
    capacity: float
    items: Mapping[str, Item] = field(default_factory=dict)
    unprocessed: tuple[str, ...] = ()


def _capacity(response: dict[str, Any]) -> float:
    consumed = response.get("ConsumedCapacity")
    if isinstance(consumed, list):  # BatchGetItem: one entry per table
        return sum(_units(entry) for entry in consumed)
    return _units(consumed)


def _units(consumed: object) -> float:
    if isinstance(consumed, dict):
        units = consumed.get("CapacityUnits")
        if isinstance(units, int | float):
            return float(units)
    return 0.0


class LockStore:
    """The protocol's requests on one transport."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        #: True when the transport bounds a request itself (``send_within``).
        self.limits = callable(getattr(transport, "send_within", None))

    async def _send(
        self, operation: str, params: dict[str, Any], limit: Limit | None
    ) -> dict[str, Any]:
        if limit is None:
            return await self.transport.send(operation, params)
        transport = cast(LimitingTransport, self.transport)
        return await transport.send_within(operation, params, limit.timeout, limit.on_late)

    async def prepare(self) -> None:
        """Let the transport do its one-time setup before the first request is timed."""
        # Transports without setup (test doubles among them) may omit prepare.
        prepare = getattr(self.transport, "prepare", None)
        if prepare is not None:
            await prepare()

    async def read(self, table: str, key: str, limit: Limit | None = None) -> Reply:
        """Strongly consistent read of the lock row."""
        response = await self._send(
            "GetItem",
            {
                "TableName": table,
                "Key": {KEY_ATTR: {"S": key}},
                "ConsistentRead": True,
                "ReturnConsumedCapacity": "TOTAL",
            },
            limit,
        )
        return reply_of("GetItem", response)

    async def read_many(
        self, table: str, keys: tuple[str, ...], limit: Limit | None = None
    ) -> Reply:
        """Strongly consistent ``BatchGetItem`` of up to 100 lock rows (a semaphore's permits).

        The reply's ``items`` maps each found key to its row; keys DynamoDB did
        not read this time are in ``unprocessed``, for the caller to ask again.
        """
        response = await self._send("BatchGetItem", batch_get_params(table, keys), limit)
        return batch_reply(table, response)

    async def create(self, table: str, row: LockRow, limit: Limit | None = None) -> Reply:
        """Write the row only if no row exists."""
        return _write_reply(await self._send("PutItem", _create_params(table, row), limit))

    async def replace(
        self, table: str, row: LockRow, observed: LockRow, limit: Limit | None = None
    ) -> Reply:
        """Take over: write our row only if the observed owner and version are still there."""
        params = _put_params(
            table,
            row,
            "#o = :o AND #v = :v",
            dict(_NAMES_OWNER_VERSION),
            {":o": {"S": observed.owner}, ":v": {"S": observed.version}},
        )
        return _write_reply(await self._send("PutItem", params, limit))

    async def renew(
        self, table: str, key: str, owner: str, current: str, new: str, limit: Limit | None = None
    ) -> Reply:
        """Replace our version with a new one, only if owner and version are still ours."""
        response = await self._send(
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
            limit,
        )
        return _write_reply(response)

    async def delete(self, table: str, key: str, owner: str, limit: Limit | None = None) -> Reply:
        """Delete the row only if we still own it."""
        params = _delete_params(table, key, owner)
        return _write_reply(await self._send("DeleteItem", params, limit))

    # --- from a sync caller's own thread ----------------------------------------

    def blocking_ready(self) -> bool:
        """True when the transport can send from the calling thread (see ``create_blocking``)."""
        ready = getattr(self.transport, "blocking_ready", None)
        return bool(ready is not None and ready())

    def create_blocking(
        self, table: str, row: LockRow, timeout: float, on_late: Callable[[Any], object]
    ) -> Reply:
        """:meth:`create`, sent from the calling thread within ``timeout`` seconds.

        A request sent but not answered in time (or interrupted) is handed to
        ``on_late``; :meth:`finish_late` later tells how it ended.
        """
        transport = cast(BlockingTransport, self.transport)
        response = transport.send_blocking("PutItem", _create_params(table, row), timeout, on_late)
        return _write_reply(response)

    def delete_blocking(
        self, table: str, key: str, owner: str, timeout: float, on_late: Callable[[Any], object]
    ) -> Reply:
        """:meth:`delete`, sent from the calling thread (as :meth:`create_blocking`)."""
        transport = cast(BlockingTransport, self.transport)
        params = _delete_params(table, key, owner)
        return _write_reply(transport.send_blocking("DeleteItem", params, timeout, on_late))

    async def finish_late(self, operation: str, late: Any) -> Reply:
        """The outcome of a late blocking write (on the runtime loop)."""
        transport = cast(BlockingTransport, self.transport)
        return _write_reply(await transport.finish_late(operation, late))

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


def _write_reply(response: dict[str, Any]) -> Reply:
    return Reply(None, _capacity(response))


def reply_of(operation: str, response: dict[str, Any]) -> Reply:
    """The store's reply for a response to ``operation`` (the item only for reads)."""
    return Reply(response.get("Item") if operation == "GetItem" else None, _capacity(response))


def batch_get_params(table: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The strongly consistent ``BatchGetItem`` of ``keys`` (1..100 distinct keys)."""
    return {
        "RequestItems": {
            table: {"Keys": [{KEY_ATTR: {"S": key}} for key in keys], "ConsistentRead": True}
        },
        "ReturnConsumedCapacity": "TOTAL",
    }


def batch_reply(table: str, response: dict[str, Any]) -> Reply:
    """The rows a ``BatchGetItem`` answer found, by key, and the keys it left unread."""
    items: dict[str, Item] = {}
    for item in (response.get("Responses") or {}).get(table) or ():
        key = item.get(KEY_ATTR, {}).get("S") if isinstance(item, dict) else None
        if isinstance(key, str):
            items[key] = item
    left = ((response.get("UnprocessedKeys") or {}).get(table) or {}).get("Keys") or ()
    unprocessed = tuple(
        key["S"]
        for entry in left
        if isinstance(entry, dict)
        and isinstance(key := entry.get(KEY_ATTR), dict)
        and isinstance(key.get("S"), str)
    )
    return Reply(None, _capacity(response), items, unprocessed)


def _put_params(
    table: str,
    row: LockRow,
    condition: str,
    names: dict[str, str],
    values: dict[str, Any] | None,
) -> dict[str, Any]:
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
    return params


def _create_params(table: str, row: LockRow) -> dict[str, Any]:
    return _put_params(table, row, "attribute_not_exists(#k)", dict(_NAMES_KEY), None)


def _delete_params(table: str, key: str, owner: str) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "ConditionExpression": "#o = :o",
        "ExpressionAttributeNames": dict(_NAMES_OWNER),
        "ExpressionAttributeValues": {":o": {"S": owner}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }
