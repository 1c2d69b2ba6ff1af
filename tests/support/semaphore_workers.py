"""Semaphore holders in their own processes, and the check of what they report.

Each worker (started with ``spawn``) takes a permit again and again, reporting
``("acquired", name, owner, permit_key, t)`` right after it holds one and
``("released", name, owner, t)`` just before it lets go, after checking that
its lease is still valid; ``t`` is ``time.monotonic()``, comparable across
processes on one machine. Both times lie inside the guard's validity, so a
moment with more than N reported holders would be a real violation.

A worker told to ``stay`` on its k-th permit reports ``("staying", ...)`` and
keeps renewing until the test SIGKILLs it; the test records the kill time as
that hold's end.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from dynalease import DynamoDBClient, SyncDistributedSemaphore
from dynalease.exceptions import LockLost, LockNotAcquired

REGION = "us-east-1"
WORKER_LIMIT_S = 120.0


def semaphore_worker(
    endpoint: str,
    table: str,
    key: str,
    permits: int,
    lease: float,
    name: str,
    events: Any,
    stop: Any,
    stay_on: int | None = None,
) -> None:
    """Contend for a permit until ``stop`` (see the module docstring)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    client = DynamoDBClient(region=REGION, endpoint_url=endpoint, max_retries=0)
    holds = 0
    while not stop.is_set():
        guard = SyncDistributedSemaphore(
            client, table=table, key=key, permits=permits, lease_duration=lease, wait_timeout=1.0
        )
        began = time.monotonic()
        try:
            with guard:
                holds += 1
                metrics = guard.metrics
                events.put(
                    (
                        "acquired",
                        name,
                        guard.owner,
                        guard.permit_key,
                        time.monotonic(),
                        metrics.write_requests,
                        metrics.read_requests,
                    )
                )
                if stay_on is not None and holds == stay_on:
                    events.put(("staying", name, guard.owner, os.getpid()))
                    threading.Event().wait(WORKER_LIMIT_S)
                threading.Event().wait(random.uniform(0.05, 0.3))
                guard.raise_if_lost()
                events.put(("released", name, guard.owner, time.monotonic()))
        except LockNotAcquired as error:
            events.put(("not acquired", name, guard.owner, time.monotonic() - began, str(error)))
        except LockLost:
            events.put(("lost", name, guard.owner, time.monotonic()))
        threading.Event().wait(random.uniform(0.0, 0.05))
    events.put(("done", name))


@dataclass
class History:
    """The holds reported by every worker: owner -> [start, end, permit]."""

    holds: dict[str, list[Any]] = field(default_factory=dict)
    acquisitions: list[tuple[int, int]] = field(default_factory=list)  # (writes, reads)
    refused: list[float] = field(default_factory=list)  # how long each refused guard waited
    lost: int = 0

    def record(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "acquired":
            _, _, owner, permit, at, writes, reads = message
            self.holds[owner] = [at, None, permit]
            self.acquisitions.append((writes, reads))
        elif kind == "released":
            self.holds[message[2]][1] = message[3]
        elif kind == "lost":
            # Noticed late, perhaps after a successor took over: the guard was last known
            # valid when it was acquired, so only that instant counts as held.
            self.lost += 1
            if message[2] in self.holds:
                self.holds[message[2]][1] = self.holds[message[2]][0]
        elif kind == "not acquired":
            self.refused.append(message[3])

    def end(self, owner: str, at: float) -> None:
        """A hold that ended without a report (its process was killed at ``at``)."""
        self.holds[owner][1] = at

    def open_holds(self) -> list[str]:
        return [owner for owner, (_, end, _) in self.holds.items() if end is None]

    def max_concurrent(self) -> int:
        """The most holds open at one moment (an end at the same time as a start comes first)."""
        points = []
        for start, end, _ in self.holds.values():
            points.append((start, 1))
            points.append((end, -1))
        points.sort(key=lambda point: (point[0], point[1]))
        most = inside = 0
        for _, step in points:
            inside += step
            most = max(most, inside)
        return most

    def next_start(self, permit: str, after: float) -> float | None:
        """When the first hold of ``permit`` that started after ``after`` began, if any."""
        starts = [start for start, _, key in self.holds.values() if key == permit and start > after]
        return min(starts, default=None)

    def permit_overlaps(self) -> int:
        """Pairs of holds of the same permit row that overlap in time."""
        by_permit: dict[str, list[tuple[float, float]]] = {}
        for start, end, permit in self.holds.values():
            by_permit.setdefault(permit, []).append((start, end))
        overlaps = 0
        for spans in by_permit.values():
            spans.sort()
            overlaps += sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])
        return overlaps


def wait_for(events: Any, history: History, kind: str, timeout: float) -> tuple[Any, ...]:
    """Record messages until one of ``kind`` arrives; return it."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {kind!r} message within {timeout:g} s")
        message: tuple[Any, ...] = events.get(timeout=left)
        history.record(message)
        if message[0] == kind:
            return message
