"""A clock that moves only when told: the engine's tests drive leases with it.

The engine asks a :class:`dynalease._engine.clock.Clock` for every reading and
sleep; production passes ``SYSTEM_CLOCK``, these tests a :class:`ManualClock`,
so a 30-second lease is driven in milliseconds. It lives here, not in the
package: nothing but the tests uses it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


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

    def spend(self, seconds: float) -> None:
        """Move time forward at once, waking no sleeper: a blocking call on a caller's
        thread spent it while the loop could not run."""
        self._now += seconds

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
