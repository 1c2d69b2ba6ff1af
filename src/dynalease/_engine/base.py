"""What every part of a lease shares: its identity, state, loss, validity and counts.

:class:`LeaseBase` holds no I/O. The parts that send requests (``requests``,
``acquire``, ``renew``, ``release``, ``caller``) build on it, and ``lease.Lease``
puts them together. The state changes only in :meth:`LeaseBase._move`, along
``states.TRANSITIONS``; a loss is recorded only in :meth:`LeaseBase._lose`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ..constants import ENV_LOG_KEYS
from ..exceptions import LockLost
from ..metrics import LockMetrics
from . import protocol as p
from .clock import Clock, Stamp, SystemClock
from .counters import Tally
from .journal import Journal
from .observations import Observations
from .states import HELD, NEW, NEXT_STATE, Event, IllegalTransition, State
from .store import LockStore, Reply

log = logging.getLogger("dynalease")
#: Guards the lazily made ``lost_signal`` of every lease (taken rarely: when asked, when lost).
_SIGNALS = threading.Lock()


def key_hash(key: str) -> str:
    """The short hash logged for ``key``: the first 16 hex digits of its SHA-256.

    Compute it for a key you know to find its log lines::

        >>> key_hash("customer:123")
        '02ec19c58d54ce98'
    """
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def log_keys() -> str:
    """``"key"`` when ``DYNALEASE_LOG_KEYS=key`` asks for keys in log lines, else ``"hash"``.

    Read per line: log lines are rare, and a test or a process may change it.
    """
    return "key" if os.environ.get(ENV_LOG_KEYS, "").strip().lower() == "key" else "hash"


def logged_key(key: str) -> str:
    """How an engine log line names ``key``: ``key_hash=<16 hex>``, or the key's repr."""
    return repr(key) if log_keys() == "key" else f"key_hash={key_hash(key)}"


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
    _renewer: asyncio.Task[None] | None = None

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
        return validity.remaining_at(clock.monotonic(), clock.wall(), self._span)

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
        """``error``'s message for a log line: the key in it hashed, as the line names it.

        Lock errors name the key for the caller (``{key!r}``); a log line follows
        :func:`logged_key` instead.
        """
        text = str(error)
        name = logged_key(self.key)
        return text if name == repr(self.key) else text.replace(repr(self.key), name)

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


def _run_callback(callback: Callable[[LockLost], object], error: LockLost) -> None:
    try:
        callback(error)
    except Exception:
        log.exception("dynalease: on_lost callback raised")
