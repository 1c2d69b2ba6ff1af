"""What every part of a lease shares: its identity, state, loss, validity and counts.

:class:`LeaseBase` holds no I/O. The parts that send requests (``requests``,
``acquire``, ``renew``, ``release``, ``caller``) build on it, and ``lease.Lease``
puts them together. The state changes only in :meth:`LeaseBase._move`, along
``states.TRANSITIONS``; a loss is recorded only in :meth:`LeaseBase._lose`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from .._redact import escaped, key_hash, log_keys, logged_key
from ..exceptions import LockLost
from ..metrics import LockMetrics
from . import protocol as p
from .clock import Clock, Stamp, SystemClock
from .counters import Tally
from .journal import Journal
from .observations import Observations
from .states import HELD, NEW, NEXT_STATE, Event, IllegalTransition, State
from .store import LockStore, Reply

__all__ = ["LeaseBase", "key_hash", "log_keys", "logged_key"]

log = logging.getLogger("dynalease")
#: Why a lease was lost at its caller's deadline (``deadline.py``): what ``raise_if_lost``
#: and the log line say.
DEADLINE_PASSED = (
    "the invocation it was acquired in reached its deadline (no lock outlives its "
    "invocation): renewal stopped and its row is deleted"
)
#: Guards the lazily made ``lost_signal`` of every lease (taken rarely: when asked, when lost).
_SIGNALS = threading.Lock()


class LeaseBase:
    """One guard's identity, state and validity, and what other threads may ask of it."""

    # What every guard starts with, kept on the class: the constructor (one per lock
    # cycle) sets only what differs per guard. It also keeps a lease's attributes
    # under CPython's 30 for a compact, shared-key instance dict; past it the dict
    # is rebuilt as a full one of 1.5 KB per guard, which cost about 2% of a cycle.
    #: The fencing token of the acquisition (fenced leases only), set once when it wins.
    fencing_token: int | None = None
    #: A tighter network budget for a ``wait_s == 0`` attempt (set by the Lambda
    #: middleware from the invocation's remaining time).
    single_attempt_cap: float | None = None
    _lost_signal: concurrent.futures.Future[None] | None = None  # made when asked
    _version: str | None = None
    _validity: Stamp | None = None
    #: The row a failed condition returned with (the last one), if DynamoDB sent it.
    _conflict_item: dict[str, Any] | None = None
    #: The AWS request id of the last DynamoDB answer, for the errors a guard raises.
    _last_request_id: str | None = None
    #: The acquisition's span context when it was traced; renewals link to it.
    _trace_link: Any = None
    _renewer: asyncio.Task[None] | None = None
    #: The monotonic time (on ``clock``) past which the lease is not held: the
    #: deadline of the context its acquisition started in (``deadline.py``).
    deadline: float | None = None
    #: Set when that deadline ended the hold and deleted the row: the caller's own
    #: release then only reports the loss.
    released_at_deadline = False

    def __init__(
        self,
        store: LockStore,
        clock: Clock,
        observations: Observations,
        table: str,
        key: str,
        lease_s: float,
        wait_s: float,
        on_lost: Callable[[LockLost], object] | None = None,
        fencing: bool = False,
        journal: Journal | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.observations = observations
        self.table = table
        self.key = key
        self.lease_s = lease_s
        self.wait_s = wait_s
        self.owner = p.new_token()
        #: Protocol 2 (fenced rows) when true; see ``fenced.py``.
        self.fencing = fencing
        self._protocol = p.FENCED_PROTOCOL if fencing else p.PROTOCOL
        self.state = NEW
        #: Why ownership was lost, or None; written only by :meth:`_lose`, with the
        #: LOSE transition. ``counters().lost`` and :meth:`raise_if_lost` read it.
        self.loss: str | None = None
        self.tally = Tally()
        self._resource = (table, key)
        self._lease_ms = p.lease_ms(lease_s)
        self._span = p.validity_span(lease_s)
        self._pending: dict[str, Stamp] = {}
        self._late: set[asyncio.Future[Reply]] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        self._on_lost = on_lost
        #: Where this guard notes the row it may hold (``journal``); None when off.
        self.journal = journal
        #: The transport bounds requests itself, in the loop's (the system clock's) time.
        self._limited = store.limits and isinstance(clock, SystemClock)

    @property
    def lost_signal(self) -> concurrent.futures.Future[None]:
        """A future done once the lease is lost; made on first use (most guards never ask)."""
        with _SIGNALS:
            signal = self._lost_signal
            if signal is None:
                signal = self._lost_signal = concurrent.futures.Future()
                if self.loss is not None:  # lost before anyone asked
                    signal.set_result(None)
        return signal

    # --- the state machine ------------------------------------------------------

    def _move(self, event: Event) -> None:
        """The one way the state changes: along ``states.TRANSITIONS``, or raise.

        ``states.advance`` inlined: on the hot path a transition is two dict
        lookups and an assignment, with no call and nothing allocated.
        """
        try:
            self.state = NEXT_STATE[event][self.state]
        except KeyError:
            raise IllegalTransition(self.state, event) from None

    def _lose(self, reason: str) -> None:
        """Record that ownership is gone (once) and tell whoever is listening."""
        if self.loss is not None:
            return
        # The reason first: another thread that sees the new state finds it.
        self.loss = reason
        self._move(Event.LOSE)
        log.warning(
            "dynalease: lock %s in table %r lost: %s", logged_key(self.key), self.table, reason
        )
        error = self._lost_error()
        with _SIGNALS:
            signal = self._lost_signal
        if signal is not None and not signal.done():
            signal.set_result(None)
        callback = self._on_lost
        if callback is not None:
            # A user callback must never stall the runtime that renews every lease.
            threading.Thread(
                target=_run_callback, args=(callback, error), name="dynalease-on-lost", daemon=True
            ).start()

    def mark_lost(self, reason: str) -> None:
        """Record that ownership is known to be gone (e.g. a rejected check_in)."""
        self._lose(reason)

    # --- what other threads may ask ------------------------------------------

    def counters(self) -> LockMetrics:
        """A consistent-enough snapshot of the request counters."""
        return self.tally.snapshot(lost=self.loss is not None)

    def time_left(self) -> float:
        """Seconds of local validity left; 0 when not held."""
        validity = self._validity
        if self.state is not HELD or validity is None:
            return 0.0
        clock = self.clock
        now = clock.monotonic()
        left = validity.remaining_at(now, clock.wall(), self._span)
        deadline = self.deadline
        return left if deadline is None else min(left, max(0.0, deadline - now))

    def raise_if_lost(self) -> None:
        """Raise LockLost unless the guard holds a valid lease right now."""
        if self.state is State.HELD and self.loss is None and self.time_left() > 0:
            return
        raise self._lost_error()

    def condition_item(self) -> dict[str, Any]:
        """The ownership ConditionCheck for a transaction; the guard must be valid."""
        self.raise_if_lost()
        return self.store.condition_item(self.table, self.key, self.owner)

    def lost_error(self) -> LockLost:
        """The error a release of a lost guard raises."""
        return self._lost_error()

    def _lost_error(self) -> LockLost:
        if self.loss is not None:
            reason = self.loss
        elif self.state is State.HELD:
            deadline = self.deadline
            if deadline is not None and self.clock.monotonic() >= deadline:
                reason = DEADLINE_PASSED  # the renewal schedule deletes the row right now
            else:
                reason = "its lease expired locally before a renewal was confirmed"
        else:
            reason = f"the guard is {self.state.value}, not held"
        return LockLost(
            f"lock {self.key!r} in table {self.table!r} is no longer owned by this guard: "
            f"{reason}. Stop the work it protected; acquire a new guard to continue",
            table=self.table,
            key=self.key,
            owner=self.owner,
            request_id=self._last_request_id,
        )

    def _log_text(self, error: BaseException) -> str:
        """``error``'s message for a log line: the key as the line names it, controls escaped.

        Lock errors already follow :func:`logged_key`; other errors (a transport's)
        may name the key as its repr, and any may carry a server's text.
        """
        text = str(error)
        name = logged_key(self.key)
        if name != repr(self.key):
            text = text.replace(repr(self.key), name)
        return escaped(text)

    def _forget(self) -> None:
        """After giving up: drop the journal entry once no write of ours may still land.

        (A confirmed release drops it at once, in ``release`` and ``caller``.)
        """
        journal = self.journal
        if journal is not None and not self._late:
            journal.forget(self.owner)

    # --- background work -------------------------------------------------------

    def _background(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cleanup_late(self) -> None:
        """Delete a row this guard wrote after it stopped wanting it (see ``release``)."""
        raise NotImplementedError

    def end_at_deadline(self) -> None:
        """The deadline passed while held: lose ownership, delete the row (``release``)."""
        raise NotImplementedError


def _run_callback(callback: Callable[[LockLost], object], error: LockLost) -> None:
    try:
        callback(error)
    except Exception:
        log.exception("dynalease: on_lost callback raised")
