"""The lock store: the protocol's requests (built by :mod:`.shapes`) over a transport.

Every transport (botocore, the lean path, the in-memory backend) implements the one
:class:`Transport` interface (:mod:`.wire`, re-exported here) and maps failures to
dynalease errors.
"""

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..exceptions import RequestFailedError, TransactionCanceledException
from . import shapes
from .protocol import LockRow
from .shapes import Item, Reply, reply_of, write_reply
from .wire import LoopTransport, Request, TimedOut, Transport, bounded, late_answer

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "TLS_REFUSED",
    "BudgetSpent",
    "ConditionFailed",
    "FirstWrite",
    "Limit",
    "LockStore",
    "LoopTransport",
    "OutcomeUnknown",
    "Reply",
    "Request",
    "TimedOut",
    "Transport",
    "bounded",
    "interrupted_failure",
]

#: A row of a key set: its key, or the row written.
R = TypeVar("R")

#: The ``code`` of a request whose TLS handshake refused the endpoint's certificate (the
#: ``ssl`` error's class name, on every transport): never sent, and a setting to fix.
TLS_REFUSED = "SSLCertVerificationError"


# --- how a request ended, as both sides of the loop see it --------------------


class FirstWrite(NamedTuple):
    """How a write sent from a sync caller's own thread ended, for the engine to go on from.

    ``error`` is None when nothing was sent; ``late`` is the still-open request.
    """

    operation: str
    deadline: float
    error: BaseException | None
    late: Any = None
    version: str = ""
    start: float = 0.0
    single: bool = False

    @property
    def sent(self) -> bool:
        return self.error is not None


class OutcomeUnknown(Exception):
    """A request whose outcome is unknown: timed out, reset, or a 5xx answer."""

    def __init__(self, task: "asyncio.Future[Reply]", cause: BaseException | None) -> None:
        super().__init__(str(cause) if cause else "no answer within the request timeout")
        self.task = task
        self.cause = cause


class BudgetSpent(Exception):
    """No time is left for another request within the current deadline."""


def interrupted_failure(operation: str) -> RequestFailedError:
    """What an interrupted blocking write counts as: sent, outcome unknown."""
    return RequestFailedError(
        f"{operation} was interrupted before its answer arrived; it may have been applied",
        code="Interrupted",
        operation=operation,
        may_have_committed=True,
    )


class ConditionFailed(Exception):
    """The write's condition did not hold; ``item`` is the current row when DynamoDB sent it."""

    def __init__(self, item: Item | None, request_id: str | None = None) -> None:
        super().__init__("conditional check failed")
        self.item = item
        self.request_id = request_id


class Limit(NamedTuple):
    """How long a request may take; then (or when cancelled) ``on_late`` gets the answer to come."""

    timeout: float
    on_late: Callable[[Awaitable[dict[str, Any]]], object]


class LockStore:
    """The protocol's requests on one transport."""

    def __init__(self, transport: Transport) -> None:
        #: The transport requests go over (``doctor --measure`` replaces it with a timed one).
        self.transport = transport
        self._blocking_ready = False

    async def _send(
        self, operation: str, params: dict[str, Any], limit: Limit | None
    ) -> dict[str, Any]:
        request = Request(operation, params, *(limit or ()))
        return await self.transport.handle_async(request)

    async def _written(self, operation: str, params: dict[str, Any], limit: Limit | None) -> Reply:
        return write_reply(await self._send(operation, params, limit))

    async def prepare(self) -> None:
        await self.transport.prepare()

    async def send(self, operation: str, params: dict[str, Any], limit: Limit | None) -> Reply:
        """One request whose parameters another kind's shapes built (a read/write lock's
        shared row); a failed condition is :class:`ConditionFailed`."""
        return reply_of(operation, await self._send(operation, params, limit))

    async def transact(self, actions: list[dict[str, Any]], limit: Limit | None) -> Reply:
        """One ``TransactWriteItems`` of ``actions`` (as :meth:`write_rows` sends them)."""
        return await self._transact(actions, limit)

    async def read(self, table: str, key: str, limit: Limit | None = None) -> Reply:
        """Strongly consistent read of the lock row."""
        return reply_of(
            "GetItem", await self._send("GetItem", shapes.read_params(table, key), limit)
        )

    async def read_many(
        self, table: str, keys: tuple[str, ...], limit: Limit | None = None
    ) -> Reply:
        """Strongly consistent ``BatchGetItem`` of up to 100 rows (also of the one key a
        batch left unread); unread keys are in ``unprocessed``."""
        response = await self._send("BatchGetItem", shapes.batch_get_params(table, keys), limit)
        return shapes.batch_reply(table, response)

    async def write(
        self, table: str, row: LockRow, observed: LockRow | None = None, limit: Limit | None = None
    ) -> Reply:
        """Create the row (none there, or a free fenced one), or take over ``observed`` if its
        owner and version are still there. A fenced write's ``Reply.item`` holds the counter."""
        return await self._written(*shapes.write_request(table, row, observed), limit)

    async def delete(
        self,
        table: str,
        key: str,
        owner: str,
        limit: Limit | None = None,
        *,
        fencing: bool = False,
    ) -> Reply:
        """Delete the row only if we still own it (a fenced row: leave it free)."""
        return await self._written(*shapes.release_request(table, key, owner, fencing), limit)

    # --- a key set: one row, or several all or nothing ---------------------------
    # A single lock is a key set of one: its requests are one row's (the write and the
    # delete above, or a renewal's update); a set of several is written, renewed and
    # deleted in one transaction.

    async def read_rows(
        self, table: str, keys: tuple[str, ...], limit: Limit | None = None
    ) -> Reply:
        """Strongly consistent read of ``keys`` (GetItem for one, else one BatchGetItem of up
        to 100): found rows in ``items``, unread keys in ``unprocessed``."""
        if len(keys) > 1:
            return await self.read_many(table, keys, limit)
        reply = await self.read(table, keys[0], limit)
        return reply._replace(items={} if reply.item is None else {keys[0]: reply.item})

    async def write_rows(
        self,
        table: str,
        rows: tuple[LockRow, ...],
        observed: dict[str, LockRow],
        limit: Limit | None = None,
    ) -> Reply:
        """Write every row: each on no row (or a free fenced one), or over its ``observed`` row
        if that owner and version are still there. All or nothing."""
        return await self._one_or_all(
            rows,
            lambda row: self.write(table, row, observed.get(row.key), limit),
            lambda row: shapes.put_action(table, row, observed.get(row.key)),
            limit,
        )

    async def renew_rows(
        self,
        table: str,
        keys: tuple[str, ...],
        owner: str,
        current: str,
        new: str,
        limit: Limit | None = None,
        holder: Item | None = None,
    ) -> Reply:
        """Replace our version of every row with a new one, only if owner and version are
        still ours (setting the ``holder`` map too when given). All or nothing."""
        return await self._one_or_all(
            keys,
            lambda key: self._written(
                "UpdateItem", shapes.renew_params(table, key, owner, current, new, holder), limit
            ),
            lambda key: shapes.renew_action(table, key, owner, current, new, holder),
            limit,
        )

    async def delete_rows(
        self,
        table: str,
        keys: tuple[str, ...],
        owner: str,
        limit: Limit | None = None,
        *,
        fencing: bool = False,
    ) -> Reply:
        """Delete every row only if we still own each (a fenced row: left free). All or nothing."""
        return await self._one_or_all(
            keys,
            lambda key: self.delete(table, key, owner, limit, fencing=fencing),
            lambda key: shapes.delete_action(table, key, owner),
            limit,
        )

    async def _one_or_all(
        self,
        rows: tuple[R, ...],
        one: Callable[[R], Awaitable[Reply]],
        action: Callable[[R], dict[str, Any]],
        limit: Limit | None,
    ) -> Reply:
        """A key set's request: ``one`` row's own request, or one transaction of every row's
        ``action`` (a single lock is a key set of one)."""
        if len(rows) == 1:
            return await one(rows[0])
        return await self._transact([action(row) for row in rows], limit)

    async def _transact(self, actions: list[dict[str, Any]], limit: Limit | None) -> Reply:
        """Send one ``TransactWriteItems``; a failed condition is :class:`ConditionFailed`.

        The failing rows are not kept: the guard reads every row afterwards.
        Any other cancellation wrote nothing, so it is a definite failure.
        """
        try:
            params = shapes.transact_params(actions)
            response = await self._send("TransactWriteItems", params, limit)
        except TransactionCanceledException as error:
            if any(reason.get("Code") == "ConditionalCheckFailed" for reason in error.reasons):
                raise ConditionFailed(None) from error
            codes = sorted({str(r.get("Code")) for r in error.reasons if r.get("Code") != "None"})
            raise RequestFailedError(
                f"TransactWriteItems was cancelled ({', '.join(codes) or 'no reason given'}); "
                "nothing was written",
                code=codes[0] if codes else "TransactionCanceledException",
                operation="TransactWriteItems",
                may_have_committed=False,
            ) from error
        return shapes.transact_reply(response)

    # --- from a sync caller's own thread ----------------------------------------

    def blocking_ready(self) -> bool:
        """True when the transport can send from the calling thread (see ``create_blocking``)."""
        if not self._blocking_ready:  # a transport that could, always can
            self._blocking_ready = self.transport.blocking
        return self._blocking_ready

    def blocking_for(self, keys: tuple[str, ...]) -> bool:
        """True when the requests of ``keys`` may go from the calling thread now: one row's
        (a transaction of several goes from the runtime loop)."""
        return len(keys) == 1 and self.blocking_ready()

    def create_blocking(
        self, table: str, row: LockRow, timeout: float, on_late: Callable[[Any], object]
    ) -> Reply:
        """A create sent from the calling thread (see ``Transport.blocking``)."""
        operation, params = shapes.write_request(table, row)
        return write_reply(self.transport.handle(Request(operation, params, timeout, on_late)))

    def delete_blocking(
        self,
        table: str,
        key: str,
        owner: str,
        timeout: float,
        on_late: Callable[[Any], object],
        *,
        fencing: bool = False,
    ) -> Reply:
        """:meth:`delete`, sent from the calling thread (as :meth:`create_blocking`)."""
        operation, params = shapes.release_request(table, key, owner, fencing)
        return write_reply(self.transport.handle(Request(operation, params, timeout, on_late)))

    async def finish_late(self, late: Any) -> Reply:
        """The outcome of a late blocking write (on the runtime loop)."""
        return write_reply(await late_answer(late))
