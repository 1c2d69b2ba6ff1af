"""Bounded requests: one deadline each, unknown outcomes, and answers that come late.

A write that may still commit after we stopped waiting is watched, so that a late
success never revives a guard that gave up: its row is deleted instead.

On the loop side: this module imports ``asyncio`` at its top and is loaded by the first
part of a lease that sends from the loop (the acquire driver, the renewal task, a
release that goes on there); how a request ended (:class:`.store.OutcomeUnknown`,
:class:`.store.FirstWrite`) is told in :mod:`.store`, which both sides import.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from ..exceptions import DynamoDBError, RequestFailedError, ThrottledError
from . import protocol as p
from .base import LeaseCore, LeaseEvents, logged_key
from .pacing import Unread
from .shapes import reply_of
from .states import State
from .store import BudgetSpent, ConditionFailed, FirstWrite, Limit, OutcomeUnknown, Reply, TimedOut

Item = dict[str, Any]

log = logging.getLogger("dynalease")

_GAVE_UP = (State.NOT_ACQUIRED, State.CANCELLED)


class Requests:
    """Sending, bounding and reconciling one lease's requests.

    ``events.landed`` is called when a write this lease gave up on may have landed after all.
    """

    def __init__(self, core: LeaseCore, events: LeaseEvents) -> None:
        self.core = core
        self._events = events
        self.conflict_item: dict[str, Any] | None = None

    async def send(
        self, kind: str, make: Callable[[Limit], Awaitable[Reply]], deadline: float
    ) -> Reply | None:
        """Send one request bounded by the deadline; None when the condition failed.

        Raises :class:`OutcomeUnknown`, or ``DynamoDBError`` when it was surely not applied.
        """
        core = self.core
        timeout = p.request_timeout(core.lease_s, deadline - core.clock.monotonic())
        if timeout <= 0:
            raise BudgetSpent
        if kind == "read":
            core.tally.read_requests += 1
        else:
            core.tally.write_requests += 1
        late: list[Awaitable[dict[str, Any]]] = []
        outcome: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        try:
            outcome.set_result(await make(Limit(timeout, late.append)))
        except TimedOut:
            core.tally.request_failures += 1
            raise OutcomeUnknown(self._late_reply(kind, late), None) from None
        except asyncio.CancelledError:
            if late and kind != "read" and core.state is State.ACQUIRING:
                # Cancelled with a create or takeover in flight: it may still land.
                self.watch_late(self._late_reply(kind, late))
            elif late:
                self._late_reply(kind, late)  # read to its end, for nobody
            raise
        except Exception as error:
            outcome.set_exception(error)
        return self._settle(kind, outcome)

    def replay(self, first: FirstWrite) -> Reply | None:
        """How a write sent from a caller's thread ended, as :meth:`send` would say it."""
        if first.late is not None:
            self.watch_late_answer(first.late)
        assert first.error is not None
        outcome: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        outcome.set_exception(first.error)
        return self._settle("write", outcome)

    def _settle(self, kind: str, outcome: asyncio.Future[Reply]) -> Reply | None:
        core = self.core
        tally = core.tally
        try:
            reply = outcome.result()
        except ConditionFailed as failed:
            tally.conditional_failures += 1
            core.note_answer(failed.request_id)
            self.conflict_item = failed.item
            return None
        except RequestFailedError as error:
            tally.request_failures += 1
            core.note_answer(error.request_id)
            if error.may_have_committed and kind != "read":
                raise OutcomeUnknown(outcome, error) from error
            raise
        except DynamoDBError as error:
            tally.request_failures += 1
            core.note_answer(error.request_id)
            if isinstance(error, ThrottledError):
                self._note_throttled(error)
            raise
        core.note_answer(reply.request_id)
        if kind == "read":
            tally.consumed_rcu += reply.capacity
        else:
            tally.consumed_wcu += reply.capacity
        return reply

    def _note_throttled(self, error: ThrottledError) -> None:
        core = self.core
        core.tally.throttled(error.reasons)
        log.warning(
            "dynalease: DynamoDB throttled %s of lock %s in table %r: %s",
            error.operation or "a request",
            logged_key(core.key),
            core.table,
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

    async def read_row(self, key: str, deadline: float) -> dict[str, Any] | None:
        """The row at ``key``, strongly consistent."""
        return (await self.read_rows((key,), deadline))[key]

    async def read_rows(self, keys: tuple[str, ...], deadline: float) -> dict[str, Item | None]:
        """Every row at ``keys``, strongly consistent (None where none): one GetItem for one
        key, else BatchGetItem until none is left unread."""
        core, found, asked, read = self.core, dict[str, Item](), keys, self.core.store.read_rows
        unread = Unread(core.lease_s, random.Random(random.getrandbits(64)))
        while True:
            reply = await self.send("read", functools.partial(read, core.table, asked), deadline)
            assert reply is not None  # reads have no condition
            found.update(reply.items)
            again = unread.again(asked, reply.unprocessed)
            if again is None:
                return {key: found.get(key) for key in keys}
            asked, pause = again
            read = core.store.read_many  # the rest of a batch is asked as a batch
            left = deadline - core.clock.monotonic()
            if left <= 0:
                raise BudgetSpent
            await core.clock.sleep(min(left, pause))

    def watch_late_answer(self, late: Any) -> None:
        """:meth:`watch_late` for a write a caller's thread sent (``FirstWrite.late``)."""
        self.watch_late(asyncio.ensure_future(self.core.store.finish_late(late)))

    def watch_late(self, task: asyncio.Future[Reply]) -> None:
        """A write that may still commit: clean it up if it lands after we moved on."""
        core = self.core
        core.late.add(task)

        def landed(done: asyncio.Future[Reply]) -> None:
            core.late.discard(done)
            if done.cancelled():
                return
            failure = done.exception()
            # A lost answer may still mean the write was applied; deleting our own
            # owner's row is always safe, so treat it like a success here.
            if failure is not None and not (
                isinstance(failure, RequestFailedError) and failure.may_have_committed
            ):
                if core.state in _GAVE_UP:
                    core.forget()  # it did not land: nothing of ours is left
                return
            if core.state in _GAVE_UP:
                self._events.landed()

        task.add_done_callback(landed)


def retrieve(task: asyncio.Future[Reply]) -> None:
    """Look at a finished task's failure, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def ignore_late(late: object) -> None:
    """An ``on_late`` for a request whose late answer changes nothing (the next read shows
    what landed): its outcome is still looked at when it comes, so that asyncio never logs
    it as never retrieved from a finalizer."""
    if isinstance(late, asyncio.Future):
        late.add_done_callback(retrieve)
