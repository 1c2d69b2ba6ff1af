"""The loop side of the engine: the runtime's event loop itself and what only runs on a loop.

This module imports ``asyncio`` and ``concurrent.futures`` at its top, so it is loaded
only when a loop starts or async code first runs: by the runtime's thread when its loop
starts, by the acquire driver, by an async face, by a transport's async path. A sync
hold that ends before its first renewal loads none of it (docs/architecture.md, "The
runtime's loop starts on first need"; tests/unit/test_budgets.py holds that).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

from .clock import Clock

T = TypeVar("T")


class RunningLoop:
    """The runtime's event loop, made on its thread; other threads hand it coroutines."""

    def __init__(self, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(executor)
        asyncio.set_event_loop(self.loop)

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop; its future is for a thread to wait on."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    async def run_async(self, coroutine: Coroutine[Any, Any, T], shield: bool) -> T:
        """Await ``coroutine`` on this loop from another one (see ``Runtime.run_async``)."""
        abandoned = False

        async def unless_abandoned() -> T:
            # A caller cancelled before the runtime got to it: never start the coroutine
            # (the task's cancel, chained from the caller, would come after its first step).
            if abandoned:
                coroutine.close()
                raise asyncio.CancelledError
            return await coroutine

        answer = asyncio.wrap_future(self.submit(unless_abandoned()))
        try:
            return await (asyncio.shield(answer) if shield else answer)
        except asyncio.CancelledError:
            abandoned = not shield
            raise


async def sleep_or_wake(clock: Clock, delay: float, wakes: list[asyncio.Future[None]]) -> None:
    """Sleep ``delay`` clock seconds, returning early when any of ``wakes`` resolves."""
    if not wakes:
        await clock.sleep(delay)
        return
    sleeper = asyncio.ensure_future(clock.sleep(delay))
    try:
        await asyncio.wait((sleeper, *wakes), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
