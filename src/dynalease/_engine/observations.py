"""The per-client observation cache (when each row was first seen unchanged), and hand-over.

A release wakes the longest-waiting guard of the same client, not all of them: the
others' creates would be certain to fail.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from .protocol import OBSERVATION_CAPACITY

if TYPE_CHECKING:
    import asyncio

Identity = tuple[str, str, int]
Resource = tuple[str, str]


class Observations:
    """A bounded LRU of first sightings, keyed by (table, key)."""

    def __init__(self, capacity: int = OBSERVATION_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._seen: OrderedDict[Resource, tuple[Identity, float]] = OrderedDict()
        self._waiters: dict[Resource, list[asyncio.Future[None]]] = {}
        self._holders: dict[Resource, str] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def observe(self, resource: Resource, identity: Identity, now: float) -> float:
        """Record a sighting; return when this exact identity was first seen."""
        with self._lock:
            entry = self._seen.get(resource)
            if entry is not None and entry[0] == identity:
                self._seen.move_to_end(resource)
                return entry[1]
            self._seen[resource] = (identity, now)
            self._seen.move_to_end(resource)
            while len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return now

    def forget_all(self) -> None:
        """Drop every sighting: their times cannot be trusted any more (a restored snapshot)."""
        with self._lock:
            self._seen.clear()

    def forget(self, resource: Resource) -> None:
        """Drop a resource's sighting (after we wrote the row ourselves)."""
        with self._lock:
            self._seen.pop(resource, None)

    def wait(self, resource: Resource, future: asyncio.Future[None]) -> asyncio.Future[None]:
        """``future``, resolved when a guard of this client releases ``resource`` (on the loop)."""
        self._waiters.setdefault(resource, []).append(future)
        return future

    def discard_waiter(self, resource: Resource, future: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(resource)
        if waiters is not None:
            if future in waiters:
                waiters.remove(future)
            if not waiters:
                del self._waiters[resource]

    def held(self, resource: Resource, owner: str) -> None:
        """A guard of this client now holds ``resource`` as ``owner``."""
        self._holders[resource] = owner

    def held_here(self, resource: Resource, owner: str) -> bool:
        """True when ``owner`` is a guard of this client still holding ``resource``."""
        return self._holders.get(resource) == owner

    def clear_holder(self, resource: Resource) -> None:
        """Forget this client's holder of ``resource`` (safe from any thread)."""
        self._holders.pop(resource, None)

    def has_waiters(self, resource: Resource) -> bool:
        """True when a guard of this client waits for ``resource`` (any thread)."""
        return bool(self._waiters.get(resource))

    def released(self, resource: Resource) -> None:
        """The row is gone: wake the longest waiter of ``resource`` to create it now."""
        self._holders.pop(resource, None)
        self.wake_next(resource)

    def wake_next(self, resource: Resource) -> None:
        """Wake the longest waiter of ``resource`` (also to pass on a wake nobody used)."""
        waiters = self._waiters.get(resource)
        while waiters:
            future = waiters.pop(0)
            if not future.done():
                future.set_result(None)
                break
        if not waiters:
            self._waiters.pop(resource, None)
