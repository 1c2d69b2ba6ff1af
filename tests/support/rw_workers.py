"""Read/write lock holders in their own processes, and the check of what they report.

Each worker (started with ``spawn``) takes the key as a reader or a writer again and
again, reporting ``("acquired", name, role, owner, t)`` right after it holds it and
``("released", name, owner, t)`` just before it lets go, after checking that its lease
is still valid; ``t`` is ``time.monotonic()``, comparable across processes on one
machine. Both times lie inside the guard's validity, so an overlap of a writer with
anyone in the reported spans would be a real violation.

A worker told to ``stay`` on its k-th hold reports ``("staying", name, owner, pid)``
and keeps renewing until the test SIGKILLs it; the test records the kill time as that
hold's end.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from dynalease import DynamoDBClient
from dynalease.exceptions import LockLost, LockNotAcquired
from dynalease.rwlock import SyncReadLock, SyncWriteLock
from support.semaphore_workers import wait_for

__all__ = ["RwHistory", "rw_worker", "wait_for"]  # wait_for: the semaphore workers' own

REGION = "us-east-1"
WORKER_LIMIT_S = 120.0


def rw_worker(
    endpoint: str,
    table: str,
    role: str,
    lease: float,
    name: str,
    events: Any,
    stop: Any,
    stay_on: int | None = None,
) -> None:
    """Hold the key as ``role`` ("read" or "write") until ``stop`` (see the docstring)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    client = DynamoDBClient(region=REGION, endpoint_url=endpoint, max_retries=0)
    kind = SyncReadLock if role == "read" else SyncWriteLock
    holds = 0
    while not stop.is_set():
        guard = kind(client, table=table, key="cfg", lease_duration=lease, wait_timeout=3.0)
        owner = f"{name}:{holds}"
        try:
            with guard:
                holds += 1
                events.put(("acquired", name, role, owner, time.monotonic()))
                if stay_on is not None and holds == stay_on:
                    events.put(("staying", name, owner, os.getpid()))
                    threading.Event().wait(WORKER_LIMIT_S)
                threading.Event().wait(random.uniform(0.02, 0.15))
                guard.raise_if_lost()
                events.put(("released", name, owner, time.monotonic()))
        except LockNotAcquired:
            events.put(("not acquired", name, role))
        except LockLost:
            events.put(("lost", name, owner))
        threading.Event().wait(random.uniform(0.0, 0.05))
    events.put(("done", name))


@dataclass
class RwHistory:
    """The holds reported: owner -> [role, start, end]."""

    holds: dict[str, list[Any]] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    lost: int = 0

    def record(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "acquired":
            _, _, role, owner, at = message
            self.holds[owner] = [role, at, None]
        elif kind == "released":
            self.holds[message[2]][2] = message[3]
        elif kind == "lost":
            # Last known valid when acquired: only that instant counts as held.
            self.lost += 1
            self.holds[message[2]][2] = self.holds[message[2]][1]
        elif kind == "not acquired":
            self.refused[message[2]] = self.refused.get(message[2], 0) + 1

    def end(self, owner: str, at: float) -> None:
        """A hold that ended without a report (its process was killed at ``at``)."""
        self.holds[owner][2] = at

    def open_holds(self) -> list[str]:
        return [owner for owner, (_, _, end) in self.holds.items() if end is None]

    def violations(self) -> list[tuple[str, str]]:
        """Pairs of overlapping holds of which one is a writer's."""
        writes = [(s, e, o) for o, (r, s, e) in self.holds.items() if r == "write"]
        found = []
        for start, end, owner in writes:
            for other, (_, s, e) in self.holds.items():
                if other != owner and s < end and start < e:
                    found.append((owner, other))
        return found

    def most_readers(self) -> int:
        points = []
        for role, start, end in self.holds.values():
            if role == "read":
                points += [(start, 1), (end, -1)]
        points.sort()
        most = inside = 0
        for _, step in points:
            inside += step
            most = max(most, inside)
        return most

    def count(self, role: str) -> int:
        return sum(1 for r, _, _ in self.holds.values() if r == role)
