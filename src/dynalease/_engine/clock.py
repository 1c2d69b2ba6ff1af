"""Time for the engine: monotonic and wall readings, sleeps, and validity stamps.

The lease logic never calls ``time`` or ``asyncio.sleep`` directly; it asks a
clock. Production uses :data:`SYSTEM_CLOCK`; tests pass a :class:`ManualClock`
and move time by hand, so a 30-second lease is driven in milliseconds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable
from typing import NamedTuple, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """What the engine needs to know about time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; only differences are meaningful."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch on the local wall clock (it may jump)."""
        ...

    async def sleep(self, delay: float) -> None:
        """Sleep ``delay`` seconds of this clock's monotonic time."""
        ...


class SystemClock:
    """The real clocks of this machine."""

    monotonic = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    async def sleep(self, delay: float) -> None:
        """Sleep on the event loop's timer."""
        await asyncio.sleep(max(0.0, delay))


SYSTEM_CLOCK = SystemClock()


async def wait_for(clock: Clock, future: asyncio.Future[T], timeout: float) -> bool:
    """Wait up to ``timeout`` clock seconds for ``future``; True when it finished.

    Unlike ``asyncio.wait_for`` this never cancels the future: a write that timed
    out may still commit, and the caller keeps the future to learn about it.
    """
    if future.done():
        return True
    if isinstance(clock, SystemClock):
        done, _ = await asyncio.wait((future,), timeout=max(0.0, timeout))
        return bool(done)
    timer = asyncio.ensure_future(clock.sleep(timeout))
    try:
        await asyncio.wait((future, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return future.done()


async def sleep_or_wake(clock: Clock, delay: float, wake: asyncio.Future[None] | None) -> None:
    """Sleep ``delay`` clock seconds, returning early when ``wake`` resolves."""
    if wake is None:
        await clock.sleep(delay)
        return
    sleeper = asyncio.ensure_future(clock.sleep(delay))
    try:
        await asyncio.wait((sleeper, wake), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()


class Stamp(NamedTuple):
    """When a write was sent, on both clocks; validity is measured from here."""

    monotonic: float
    wall: float

    @classmethod
    def now(cls, clock: Clock) -> Stamp:
        """Read both clocks."""
        return cls(clock.monotonic(), clock.wall())

    def remaining(self, clock: Clock, span: float) -> float:
        """Seconds of validity left, or 0 once either clock says the span is over.

        A wall clock that moved backwards past the stamp also ends validity: we
        can no longer tell how much time really passed, so we stop trusting it.
        """
        return self.remaining_at(clock.monotonic(), clock.wall(), span)

    def remaining_at(self, monotonic: float, wall: float, span: float) -> float:
        """:meth:`remaining` at the given clock readings (a sweep reads the clock once)."""
        wall_elapsed = wall - self.wall
        if wall_elapsed < 0:
            return 0.0
        elapsed = monotonic - self.monotonic
        if wall_elapsed > elapsed:
            elapsed = wall_elapsed
        return span - elapsed if elapsed < span else 0.0


class ManualClock:
    """A clock that moves only when told; for tests driving the engine on one loop.

    ``advance`` moves both clocks and wakes due sleepers in time order, letting
    the event loop run after each wake so the code under test reacts exactly as
    it would at that instant.
    """

    def __init__(self, start: float = 1_000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        """The manual monotonic reading."""
        return self._now

    def wall(self) -> float:
        """The manual wall reading (monotonic plus an offset that jumps can change)."""
        return self._now + self._wall_offset

    def jump_wall(self, seconds: float) -> None:
        """Move only the wall clock, as an operator or a bad NTP step would."""
        self._wall_offset += seconds

    async def sleep(self, delay: float) -> None:
        """Sleep until :meth:`advance` reaches ``now + delay``."""
        if delay <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Never wake at "now": a delay lost to float rounding would spin forever.
        wake = max(self._now + delay, math.nextafter(self._now, math.inf))
        heapq.heappush(self._sleepers, (wake, next(self._order), future))
        await future

    async def settle(self, rounds: int = 50) -> None:
        """Let the loop run until the code under test is waiting again."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking sleepers at their exact times."""
        target = self._now + seconds
        await self.settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            when, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, when)
            if not future.done():
                future.set_result(None)
            await self.settle()
        self._now = target
        await self.settle()

    async def run(self, awaitable: Awaitable[T], *, limit: float = 1e6) -> T:
        """Run ``awaitable`` to completion, jumping time to each next sleeper."""
        task = asyncio.ensure_future(awaitable)
        start = self._now
        await self.settle()
        while not task.done():
            pending = [entry for entry in self._sleepers if not entry[2].done()]
            if not pending:
                await self.settle()
                if task.done() or not [e for e in self._sleepers if not e[2].done()]:
                    break
                continue
            next_time = min(entry[0] for entry in pending)
            if next_time - start > limit:
                raise TimeoutError(f"clock passed its limit of {limit} s")
            await self.advance(max(0.0, next_time - self._now))
        return await task
