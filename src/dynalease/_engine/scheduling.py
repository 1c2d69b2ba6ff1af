"""When held leases are looked at: deferred renewals, and what the validity watch sees.

Deferred renewals keep many leases on one timer per event loop and clock, and know a
lease only as a :class:`Scheduled`, so this module imports no lease code. The validity
watch of leases that renew runs on the loop only: it is in :mod:`.watch`.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .clock import SYSTEM_CLOCK, Clock
from .runtime import Runtime
from .states import State

if TYPE_CHECKING:
    import asyncio

#: The lost signal is pushed at least this often while renewal waits, so a wall
#: clock jump ends the lease promptly rather than at the next renewal.
WATCH_INTERVAL_S = 1.0


class Scheduled(Protocol):
    """What the watches need of a lease."""

    @property
    def state(self) -> State: ...

    def renewal_due(self) -> float:
        """The monotonic time of the first renewal after acquiring (or +inf)."""
        ...

    def start_renewing(self) -> None:
        """Start the renewal task (on the runtime loop) unless released meanwhile."""
        ...

    def check_validity(self, monotonic: float, wall: float) -> None:
        """Mark the lease lost if its validity ran out by these readings of its clock."""
        ...


#: How deferred renewals reach their loop (:meth:`.runtime.Runtime.call_by`).
CallBy = Callable[[float, Callable[[], object], Callable[[], float]], None]


class DeferredRenewals:
    """Starts the renewal tasks of just-acquired leases when their first renewal is due.

    A short hold then never wakes the loop (nor makes a task) for nothing; waiting
    leases get validity checks each :data:`WATCH_INTERVAL_S`, from the runtime's
    thread until the loop runs. Leases are held weakly, so a released guard's lease
    is freed with it; a held one is always referred to by its guard, or by the
    release the guard's ``__del__`` schedules.
    """

    def __init__(self, call_by: CallBy, clock: Clock = SYSTEM_CLOCK) -> None:
        self.call_by = call_by
        self.clock = clock
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, weakref.ref[Scheduled]]] = []
        self._order = itertools.count()
        self._wake_at = math.inf  # when the loop looks next; guarded by _lock
        self._next_sweep = 0.0  # when waiting leases are next checked; guarded by _lock
        #: The sleep until the loop looks next, and when it ends (loop only).
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = math.inf

    def add(self, lease: Scheduled) -> None:
        """Take a lease just acquired (any thread)."""
        due = lease.renewal_due()
        when = min(due, self.clock.monotonic() + WATCH_INTERVAL_S)
        with self._lock:
            heapq.heappush(self._heap, (due, next(self._order), weakref.ref(lease)))
            if when >= self._wake_at:
                return  # the loop looks before this lease needs it
            self._wake_at = when
        self.call_by(
            when if self.clock is SYSTEM_CLOCK else -math.inf, self._schedule, self._loop_needed_at
        )

    def __len__(self) -> int:
        return len(self._heap)

    def _loop_needed_at(self) -> float:
        """Before the loop runs (on the runtime's thread): :meth:`_tick`'s sweep, and when
        a waiting lease needs the loop (``math.inf``: none waits)."""
        now = self.clock.monotonic()
        waiting: list[Scheduled] = []
        with self._lock:
            held = self._forget_ended()
            if not held:
                self._wake_at = math.inf
                return math.inf
            if now >= self._next_sweep:
                self._next_sweep = now + WATCH_INTERVAL_S
                waiting = held
            due = self._heap[0][0]
            self._wake_at = wake_at = min(due, self._next_sweep)
        self._check(waiting, now)
        return due if due <= now else wake_at

    def _forget_ended(self) -> list[Scheduled]:
        """Drop the entries of leases no longer held (with ``_lock``); the held ones."""
        kept: list[tuple[float, int, weakref.ref[Scheduled]]] = []
        held: list[Scheduled] = []
        for entry in self._heap:
            lease = entry[2]()
            if lease is not None and lease.state is State.HELD:
                kept.append(entry)
                held.append(lease)
        heapq.heapify(kept)
        self._heap = kept
        return held

    def _check(self, leases: list[Scheduled], now: float) -> None:
        if leases:
            wall = self.clock.wall()
            for lease in leases:
                lease.check_validity(now, wall)

    def _schedule(self) -> None:
        import asyncio

        with self._lock:
            wake_at = self._wake_at
        if self._timer is not None:
            if self._timer_at <= wake_at:
                return
            self._timer.cancel()
        self._timer, self._timer_at = None, wake_at
        if wake_at != math.inf:
            self._timer = asyncio.get_running_loop().create_task(self._sleep_until(wake_at))

    async def _sleep_until(self, wake_at: float) -> None:
        await self.clock.sleep(wake_at - self.clock.monotonic())
        self._timer = None
        self._tick()

    def _tick(self) -> None:
        now = self.clock.monotonic()
        due: list[Scheduled] = []
        waiting: list[Scheduled] = []
        with self._lock:
            heap = self._heap
            while heap and heap[0][0] <= now:
                lease = heapq.heappop(heap)[2]()
                if lease is not None:
                    due.append(lease)
            if now >= self._next_sweep:
                # Once per interval, not on every tick: with many leases due one
                # after another, a sweep per start would cost n^2.
                self._next_sweep = now + WATCH_INTERVAL_S
                waiting = self._forget_ended()
                heap = self._heap
            self._wake_at = min(heap[0][0], self._next_sweep) if heap else math.inf
        for lease in due:
            if lease.state is State.HELD:
                lease.start_renewing()
        self._check(waiting, now)
        self._schedule()


_DEFERRED: weakref.WeakKeyDictionary[
    Runtime | asyncio.AbstractEventLoop, dict[int, DeferredRenewals]
] = weakref.WeakKeyDictionary()
_DEFERRED_LOCK = threading.Lock()


def deferred_renewals(
    owner: Runtime | asyncio.AbstractEventLoop, clock: Clock = SYSTEM_CLOCK
) -> DeferredRenewals:
    """The :class:`DeferredRenewals` of ``owner`` (the runtime, or an async caller's loop)."""
    with _DEFERRED_LOCK:
        by_clock = _DEFERRED.setdefault(owner, {})
        deferred = by_clock.get(id(clock))
        if deferred is None or deferred.clock is not clock:
            call_by = owner.call_by if isinstance(owner, Runtime) else _at_once(owner)
            deferred = by_clock[id(clock)] = DeferredRenewals(call_by, clock)
    return deferred


def _at_once(loop: asyncio.AbstractEventLoop) -> CallBy:

    def call_by(
        when: float, callback: Callable[[], object], needed_at: Callable[[], float]
    ) -> None:
        loop.call_soon_threadsafe(callback)

    return call_by
