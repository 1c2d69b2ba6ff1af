"""A renewal task's start: the requests it sends through, and the validity watch (every
renewing lease of one event loop and clock checked each :data:`.scheduling.WATCH_INTERVAL_S`,
so a wall clock jump ends a lease promptly rather than at its next renewal).

On the loop side: it imports ``asyncio`` at its top and is loaded with a lease's first
renewal task (docs/architecture.md, "The runtime's loop starts on first need").
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from .base import LeaseCore, LeaseEvents
from .clock import Clock
from .requests import Requests
from .scheduling import WATCH_INTERVAL_S, Scheduled

__all__ = ["ValidityWatch", "watched"]


def watched(
    lease: Scheduled,
    core: LeaseCore,
    events: LeaseEvents,
    renewals: Callable[[Requests], Coroutine[Any, Any, None]],
) -> asyncio.Task[None]:
    """Run ``renewals`` (a lease's renewal task, sending through requests of its own) on
    the running loop, the lease watched meanwhile."""

    async def run() -> None:
        watch = ValidityWatch.of(core.clock)
        watch.add(lease)
        try:
            await renewals(Requests(core, events))
        finally:
            watch.discard(lease)

    return asyncio.ensure_future(run())


class ValidityWatch:
    """Checks every held lease of one event loop and clock each WATCH_INTERVAL_S."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.leases: set[Scheduled] = set()
        self.task: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, clock: Clock) -> ValidityWatch:
        """The watch for ``clock`` on the running loop."""
        by_clock = _WATCHES.setdefault(asyncio.get_running_loop(), {})
        watch = by_clock.get(id(clock))
        if watch is None or watch.clock is not clock:
            watch = by_clock[id(clock)] = cls(clock)
        return watch

    def add(self, lease: Scheduled) -> None:
        """Watch ``lease`` (on the loop) until :meth:`discard`."""
        self.leases.add(lease)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._run())

    def discard(self, lease: Scheduled) -> None:
        """Stop watching ``lease``; the watch ends when it has none left."""
        self.leases.discard(lease)

    async def _run(self) -> None:
        while self.leases:
            await self.clock.sleep(WATCH_INTERVAL_S)
            monotonic, wall = self.clock.monotonic(), self.clock.wall()
            for lease in list(self.leases):
                lease.check_validity(monotonic, wall)


_WATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, ValidityWatch]] = (
    weakref.WeakKeyDictionary()
)
