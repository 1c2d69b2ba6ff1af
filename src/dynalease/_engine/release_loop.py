"""The release's loop side: the requests it sends, the tasks it leaves running in the
background, and the lock that keeps its clean-ups one at a time.

It imports ``asyncio`` at its top: the releaser makes it on the loop, at the first step
that needs it (a sync caller's release that its own thread ends never does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from .base import LeaseCore, LeaseEvents
from .requests import Requests

__all__ = ["ReleaseLoop"]


class ReleaseLoop:
    """What a :class:`.release.Releaser` needs from the loop, made once per lease."""

    def __init__(self, core: LeaseCore, events: LeaseEvents) -> None:
        self.requests = Requests(core, events)
        #: One clean-up at a time.
        self.cleaning = asyncio.Lock()
        self._tasks: set[asyncio.Future[None]] = set()

    def background(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` on this loop as a task kept until it ends."""
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def tasks(self) -> list[asyncio.Future[None]]:
        """The background tasks still running."""
        return list(self._tasks)
