"""Bounded requests: one deadline each, unknown outcomes, and answers that come late.

Every request a lease sends goes through :meth:`Requests._request`: it is
counted, bounded by ``protocol.request_timeout`` of the time left, and ends in a
reply, a failed condition (None), a definite failure (``DynamoDBError``) or
:class:`OutcomeUnknown`. A write that may still commit after we stopped waiting
is watched (:meth:`Requests._watch_late`) so that a late success never revives
a guard that gave up: its row is deleted instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from ..exceptions import DynamoDBError, RequestFailedError, ThrottledError
from . import fenced
from . import protocol as p
from .base import LeaseBase, logged_key
from .clock import Stamp, wait_for
from .shapes import reply_of
from .states import State
from .store import ConditionFailed, Limit, Reply, TimedOut

log = logging.getLogger("dynalease")

#: Validity below this cannot be renewed in time; a replayed request (already
#: sent) gets at least this timeout to report how it ended.
EPSILON_S = 1e-6

_GAVE_UP = (State.NOT_ACQUIRED, State.CANCELLED)


class FirstWrite(NamedTuple):
    """How a write sent from a sync caller's own thread ended, for the engine to go on from.

    ``error`` is what the request raised (a failed condition, an error, or a
    failure that may have been applied); ``late`` is the still-open request
    when its answer had not arrived (see ``LockStore.finish_late``).
    """

    operation: str
    deadline: float
    error: BaseException | None
    late: Any = None
    version: str = ""
    start: float = 0.0
    single: bool = False


class OutcomeUnknown(Exception):
    """A request whose outcome is unknown: timed out, reset, or a 5xx answer."""

    def __init__(self, task: asyncio.Future[Reply], cause: BaseException | None) -> None:
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


class Requests(LeaseBase):
    """Sending, bounding and reconciling one lease's requests."""

    async def _request(
        self,
        kind: str,
        make: Callable[[Limit | None], Awaitable[Reply]],
        deadline: float,
        *,
        replayed: bool = False,
    ) -> Reply | None:
        """Send one request bounded by the deadline.

        Returns the reply, or None when the condition failed (the current row, if
        DynamoDB returned it, is in ``self._conflict_item``). Raises
        :class:`OutcomeUnknown` when the outcome is unknown and ``DynamoDBError``
        when the request was definitely not applied. ``make(limit)`` makes the
        request; a ``replayed`` one is the outcome of a request already sent (and
        counted) from a caller's thread.
        """
        tally = self.tally
        timeout = p.request_timeout(self.lease_s, deadline - self.clock.monotonic())
        if replayed:
            timeout = max(timeout, EPSILON_S)
        elif timeout <= 0:
            raise BudgetSpent
        elif kind == "read":
            tally.read_requests += 1
        else:
            tally.write_requests += 1
        task: asyncio.Future[Reply]
        if self._limited and not replayed:
            task = await self._limited_request(kind, make, timeout)
        else:
            task = await self._task_request(kind, make(None), timeout)
        try:
            reply = task.result()
        except ConditionFailed as failed:
            tally.conditional_failures += 1
            self._conflict_item = failed.item
            self._last_request_id = failed.request_id or self._last_request_id
            return None
        except RequestFailedError as error:
            tally.request_failures += 1
            self._last_request_id = error.request_id or self._last_request_id
            if error.may_have_committed and kind != "read":
                raise OutcomeUnknown(task, error) from error
            raise
        except DynamoDBError as error:
            tally.request_failures += 1
            self._last_request_id = error.request_id or self._last_request_id
            if isinstance(error, ThrottledError):
                self._note_throttled(error)
            raise
        self._last_request_id = reply.request_id or self._last_request_id
        if kind == "read":
            tally.consumed_rcu += reply.capacity
        else:
            tally.consumed_wcu += reply.capacity
        return reply

    async def _limited_request(
        self, kind: str, make: Callable[[Limit | None], Awaitable[Reply]], timeout: float
    ) -> asyncio.Future[Reply]:
        """Await the request itself; the transport bounds it and hands on a late answer.

        Saves the task and ``asyncio.wait`` per request (three loop iterations
        of about nine) that :meth:`_task_request` needs to keep a request
        running past its time limit.
        """
        late: list[Awaitable[dict[str, Any]]] = []
        outcome: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        try:
            outcome.set_result(await make(Limit(timeout, late.append)))
        except TimedOut:
            self.tally.request_failures += 1
            raise OutcomeUnknown(self._late_reply(kind, late), None) from None
        except asyncio.CancelledError:
            if late and kind != "read" and self.state is State.ACQUIRING:
                # Cancelled with a create or takeover in flight: it may still land.
                self._watch_late(self._late_reply(kind, late))
            elif late:
                self._late_reply(kind, late)  # read to its end, for nobody
            raise
        except Exception as error:
            outcome.set_exception(error)
        return outcome

    def _note_throttled(self, error: ThrottledError) -> None:
        """Count a throttled request with its reasons, and log why it was throttled."""
        self.tally.throttled(error.reasons)
        log.warning(
            "dynalease: DynamoDB throttled %s of lock %s in table %r: %s",
            error.operation or "a request",
            logged_key(self.key),
            self.table,
            ", ".join(r["reason"] for r in error.reasons) or error.code or "no reason given",
        )

    def _late_reply(
        self, kind: str, late: list[Awaitable[dict[str, Any]]]
    ) -> asyncio.Future[Reply]:
        async def reply() -> Reply:
            return reply_of("GetItem" if kind == "read" else "write", await late[0])

        task = asyncio.ensure_future(reply())
        task.add_done_callback(retrieve)
        return task

    async def _task_request(
        self, kind: str, operation: Awaitable[Reply], timeout: float
    ) -> asyncio.Future[Reply]:
        """Run the request as a task and wait up to ``timeout`` clock seconds for it."""
        task: asyncio.Future[Reply] = asyncio.ensure_future(operation)
        try:
            finished = await wait_for(self.clock, task, timeout)
        except asyncio.CancelledError:
            if kind != "read" and self.state is State.ACQUIRING:
                # Cancelled with a create or takeover in flight: it may still land.
                self._watch_late(task)
            # Nobody awaits it now (e.g. a renewal cut short by release): look at its
            # failure so asyncio does not log it as never retrieved.
            task.add_done_callback(retrieve)
            raise
        if not finished:
            self.tally.request_failures += 1
            # Nobody may await it again; retrieve its failure so asyncio does not
            # log "Task exception was never retrieved" when it finally fails.
            task.add_done_callback(retrieve)
            raise OutcomeUnknown(task, None)
        return task

    async def _read_row(self, deadline: float) -> dict[str, Any] | None:
        reply = await self._request(
            "read", lambda limit: self.store.read(self.table, self.key, limit), deadline
        )
        assert reply is not None  # reads have no condition
        return reply.item

    def _ours(self, item: dict[str, Any] | None) -> Stamp | None:
        """If the row shows one of our attempted versions, the stamp of that attempt."""
        if item is None or item.get(p.OWNER_ATTR) != {"S": self.owner}:
            return None
        version = item.get(p.VERSION_ATTR, {}).get("S")
        return self._pending.get(version) if isinstance(version, str) else None

    def _confirm(self, version: str, stamp: Stamp) -> None:
        self._version = version
        self._validity = stamp
        self._pending.clear()

    def _won(self, version: str, stamp: Stamp, item: dict[str, Any] | None) -> None:
        """An acquisition confirmed; a fenced one's token is the counter in ``item``.

        ``item`` is what the winning write returned (``UPDATED_NEW``) or the row
        a reconciling read found showing our owner and version: either way the
        counter our write set, since only a change of owner changes it.
        """
        self._confirm(version, stamp)
        if self.fencing:
            self.fencing_token = fenced.token_of(item, table=self.table, key=self.key)

    def _watch_late(self, task: asyncio.Future[Reply]) -> None:
        """A write that may still commit: clean it up if it lands after we moved on."""
        self._late.add(task)

        def landed(done: asyncio.Future[Reply]) -> None:
            self._late.discard(done)
            if done.cancelled():
                return
            failure = done.exception()
            # A lost answer may still mean the write was applied; deleting our own
            # owner's row is always safe, so treat it like a success here.
            if failure is not None and not (
                isinstance(failure, RequestFailedError) and failure.may_have_committed
            ):
                if self.state in _GAVE_UP:
                    self._forget()  # it did not land: nothing of ours is left
                return
            if self.state in _GAVE_UP:
                self._background(self._cleanup_late())

        task.add_done_callback(landed)

    def _replay_with(self, first: FirstWrite, limit: Limit | None) -> Awaitable[Reply]:
        return self._replay(first)

    async def _replay(self, first: FirstWrite) -> Reply:
        """The outcome of a write sent from a caller's thread, as a request would end."""
        if first.late is not None:
            # Still open: the answer may yet say it was applied (``_watch_late``).
            self._watch_late(
                asyncio.ensure_future(self.store.finish_late(first.operation, first.late))
            )
        assert first.error is not None
        raise first.error


def retrieve(task: asyncio.Future[Reply]) -> None:
    """Look at a finished task's failure, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
