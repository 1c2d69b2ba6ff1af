"""Time for the engine: monotonic and wall readings, sleeps, and validity stamps.

The lease logic asks a clock, never ``time`` or ``asyncio.sleep``, so tests can move
time by hand.
"""

import time
from typing import NamedTuple, Protocol, Self


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
        import asyncio

        await asyncio.sleep(max(0.0, delay))


SYSTEM_CLOCK = SystemClock()


class Stamp(NamedTuple):
    """When a write was sent, on both clocks; validity is measured from here."""

    monotonic: float
    wall: float

    @classmethod
    def now(cls, clock: Clock) -> Self:
        return cls(clock.monotonic(), clock.wall())

    def remaining(self, clock: Clock, span: float) -> float:
        """Seconds of validity left, or 0 once either clock says the span is over (or the wall
        clock went back past the stamp: how much time passed is then unknown)."""
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
