"""Acquire: starting an acquisition and ending it; the driver, imported only when needed,
does the rest on the runtime's loop."""

from __future__ import annotations

from typing import Protocol

from ..exceptions import GuardReused, LockNotAcquired, LockUnavailable
from . import protocol as p
from .base import LeaseCore, LeaseEvents, logged_key
from .deadline import deadline_on
from .renew import Renewer
from .states import Event, State
from .store import FirstWrite
from .targets import Target, gave_up

__all__ = ["NO_LINE", "Acquirer", "Line"]


class Line(Protocol):
    """Where an acquisition waits its turn before it writes: nowhere (:data:`NO_LINE`, a
    plain lock), or a fair guard's place in its keys' queues (``_engine/queue.py``)."""

    #: True when the turn comes at once, with no request: a sync caller may then send
    #: its first create from its own thread.
    immediate: bool
    #: The requests the line sent (the guard's metrics add them).
    reads: int
    writes: int

    async def wait_turn(self, deadline: float, single: bool) -> bool:
        """Wait until it is this acquisition's turn (True) or the wait is over (False)."""
        ...

    async def leave(self) -> None:
        """Out of the line: the acquisition holds its rows, or gave up."""
        ...


class _NoLine:
    """A plain lock's line: its turn is always now."""

    immediate = True
    reads = writes = 0

    async def wait_turn(self, deadline: float, single: bool) -> bool:
        return True

    async def leave(self) -> None:
        return None


NO_LINE: Line = _NoLine()


class Acquirer:
    """Getting a guard from NEW to HELD, or to NOT_ACQUIRED or CANCELLED."""

    def __init__(
        self,
        core: LeaseCore,
        renewer: Renewer,
        target: Target,
        events: LeaseEvents,
        written: list[tuple[str, ...]],
    ) -> None:
        self.core = core
        self.renewer = renewer
        self.target = target
        self._events = events
        #: Every set of rows this guard aimed a write at (the releaser's cleanup reads it).
        self.written = written
        #: Where the acquisition waits its turn first (a fair lock's queue; a plain lock's
        #: turn is always now).
        self.line: Line = NO_LINE

    def begin(self, attempt_cap: float | None = None) -> tuple[float, float, bool]:
        """Leave NEW; (start, deadline, single attempt) of this acquisition.

        ``attempt_cap``: a tighter network budget for a ``wait_s == 0`` attempt (the Lambda
        middleware's, from the invocation's time left); it never raises the budget.
        """
        core = self.core
        if core.state is not State.NEW:
            raise GuardReused(
                f"this guard for {logged_key(core.key)} was already used ({core.state.value}); "
                "guards are single use, create a new one"
            )
        core.start(deadline_on(core.clock))
        # The first request may commit unanswered.
        core.journal_rows(core.key, self.target.rows(core.key))
        start = core.clock.monotonic()
        if core.wait_s != 0:
            return start, self._by_deadline(start + core.wait_s), False
        budget = p.zero_wait_budget(core.lease_s)
        if attempt_cap is not None:
            budget = min(budget, attempt_cap)
        return start, self._by_deadline(start + budget), True

    def _by_deadline(self, end: float) -> float:
        """No wait outlasts the caller's deadline: one already passed sends nothing."""
        deadline = self.core.deadline
        return end if deadline is None else min(end, deadline)

    async def acquire(
        self, first: FirstWrite | None = None, attempt_cap: float | None = None
    ) -> None:
        """Acquire within the wait budget or raise LockNotAcquired; go on from ``first``
        when a sync caller's first create did not end the acquisition (``attempt_cap``: as
        for :meth:`begin`)."""
        from .driver import CancelledError, Driver  # the loop side of an acquisition

        core = self.core
        if first is None:
            start, deadline, single = self.begin(attempt_cap)
        else:
            start, deadline, single = first.start, first.deadline, first.single
        try:
            # Setup counts toward the wait, not the first request's timeout: a cold client
            # with a short budget would otherwise time out before it sent.
            await core.store.prepare()
            if not await self.line.wait_turn(deadline, single):
                core.tally.wait_timeouts += 1
                raise gave_up(
                    core,
                    self.target,
                    "fair waiters that arrived earlier were still ahead when its wait ran "
                    f"out. {self.target.advice}",
                )
            driver = Driver(core, self._events, self.target, self.written)
            core.hold(await driver.run(deadline, single, first))
            self.complete()
        except CancelledError:
            self.finish_unacquired(Event.CANCEL)
            raise
        except BaseException:
            self.finish_unacquired(Event.GAVE_UP)
            raise
        finally:
            core.tally.wait_ms = (core.clock.monotonic() - start) * 1000
            await self.line.leave()
        self.renewer.defer(driver.loop)

    def complete(self) -> None:
        """The acquisition won: HELD, and this client knows who holds the row.

        Every acquisition that wins ends here (sync or async, one key or several, a
        permit). A guard is never handed over with less validity than
        ``protocol.handover_margin``, nor after the caller's deadline: the refusal is
        raised instead, and the caller's cleanup deletes the row (its validity is set).
        """
        refusal = self._refusal()
        if refusal is not None:
            self.core.tally.wait_timeouts += 1
            raise refusal
        core = self.core
        core.move(Event.WON)
        for key in core.keys:  # every row the guard holds
            core.observations.forget((core.table, key))
            core.observations.held((core.table, key), core.owner)

    def _refusal(self) -> LockNotAcquired | None:
        """Why a won acquisition must not hand its guard over, as the error to raise."""
        core, target = self.core, self.target
        if core.deadline_passed():
            return gave_up(
                core,
                target,
                "its write was confirmed only after the invocation's deadline, and no lock "
                "outlives its invocation; the row is deleted",
            )
        left, margin = core.validity_left(), p.handover_margin(core.lease_s)
        if left >= margin:
            return None
        assert core.validity is not None
        took = core.clock.monotonic() - core.validity.monotonic
        return gave_up(
            core,
            target,
            f"its write was confirmed {took:.2f} s after it was sent, with {left:.2f} s of its "
            f"{core.spec.span:g} s validity left, under the hand-over margin of {margin:g} s; the "
            f"row is deleted. A path to DynamoDB this slow (a proxy or relay holding answers "
            f"back, a blocked event loop) cannot keep a {core.lease_s:g} s lease: fix the "
            "path, or raise lease_duration",
            kind=LockUnavailable,
        )

    def finish_unacquired(self, event: Event) -> None:
        """The acquisition ended without the row: clean up what may have been written."""
        core = self.core
        core.move(event)
        core.drop_pending()
        if core.validity is not None or core.late:
            # Acquired just as we were cancelled, or a write may still land.
            self._events.landed()
        else:
            core.forget()
