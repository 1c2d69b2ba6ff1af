"""Lock holders that run in their own processes, for the process and clock tests.

Every function here is the target of a process started with the
multiprocessing ``spawn`` method: it builds its own DynamoDBClient in the
child and talks to the test only through the queues and events it is given.
Messages are tuples whose first element names what happened; times are
``time.monotonic()`` readings, comparable across processes on one machine.

Workers never call ``time.sleep``: under libfaketime with
``FAKETIME_DONT_FAKE_MONOTONIC=1`` Python 3.11's ``time.sleep`` fails with
EINVAL (wolfcw/libfaketime#426), so they wait on ``threading.Event`` instead.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dynalease_dev.demo.history import (
    ACQUIRED,
    RELEASED,
    append,
    commit,
    create_history_table,
    read_head,
)

from dynalease import DynamoDBClient
from dynalease.exceptions import LockLost, LockNotAcquired, LockOwnershipLost
from dynalease.lock import SyncDistributedLock
from dynalease.transaction import SyncTransaction

REGION = "us-east-1"
#: Bounds every wait of a worker, so a test that died cannot leave it running.
WORKER_LIMIT_S = 120.0


@dataclass(frozen=True)
class Target:
    """Where one contended lock lives: server, lock table, history table, key, lease."""

    endpoint: str
    table: str
    history: str
    key: str
    lease: float

    def client(self) -> DynamoDBClient:
        """A client for this process (no SDK retries: they would call time.sleep)."""
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        return DynamoDBClient(region=REGION, endpoint_url=self.endpoint, max_retries=0)

    def guard(self, client: DynamoDBClient, wait_timeout: float) -> SyncDistributedLock:
        """A new guard on this lock."""
        return SyncDistributedLock(
            client,
            table=self.table,
            key=self.key,
            lease_duration=self.lease,
            wait_timeout=wait_timeout,
        )


def new_target(client: DynamoDBClient, endpoint: str, *, lease: float, key: str = "job") -> Target:
    """Fresh lock and history tables (unique names) and the Target for them."""
    suffix = uuid.uuid4().hex[:10]
    table, history = f"locks-{suffix}", f"history-{suffix}"
    client.sync_create_table(table, partition_key=("key", "S"), wait=True)
    create_history_table(client, history)
    return Target(endpoint, table, history, key, lease)


@contextmanager
def reaped(started: list[Any]) -> Iterator[list[Any]]:
    """Yield ``started`` for a test to fill with processes; afterwards resume and kill
    any still running (a failed test must not leave paused or renewing holders)."""
    try:
        yield started
    finally:
        for process in started:
            if process.is_alive():
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
            process.join(10)


def pause(seconds: float) -> None:
    """Sleep without ``time.sleep`` (see the module docstring)."""
    threading.Event().wait(seconds)


def hold_until_killed(target: Target, events: Any) -> None:
    """Acquire, record it, report ``("held", owner, pid)`` and keep renewing until killed."""
    client = target.client()
    with target.guard(client, wait_timeout=30) as guard:
        commit(client, guard, table=target.history, kind=ACQUIRED)
        commit(client, guard, table=target.history)
        events.put(("held", guard.owner, os.getpid()))
        pause(WORKER_LIMIT_S)


def pause_before_commit(target: Target, events: Any, resume: Any) -> None:
    """Check in a history record, report ``prepared``, wait for ``resume``, then commit.

    The test SIGSTOPs this process while it waits and takes the lock over; once
    resumed the worker reports what each step saw as ``("outcome", {...})``.
    """
    client = target.client()
    outcome: dict[str, str] = {}
    guard = target.guard(client, wait_timeout=30)
    try:
        with guard:
            commit(client, guard, table=target.history, kind=ACQUIRED)
            commit(client, guard, table=target.history)
            sequence = read_head(client, target.history, target.key) + 1
            try:
                with SyncTransaction(client) as transaction:
                    append(transaction, guard, table=target.history, sequence=sequence)
                    events.put(("prepared", guard.owner, os.getpid()))
                    resume.wait(WORKER_LIMIT_S)
                    outcome["resumed_at"] = repr(time.monotonic())
                    try:
                        guard.raise_if_lost()
                        outcome["raise_if_lost"] = "held"
                    except LockLost:
                        outcome["raise_if_lost"] = "LockLost"
                outcome["commit"] = "committed"
            except LockOwnershipLost:
                outcome["commit"] = "rejected"
        outcome["release"] = "released"
    except LockLost:
        outcome["release"] = "LockLost"
    events.put(("outcome", outcome))


def race_for_row(target: Target, wait_timeout: float, events: Any, start: Any, done: Any) -> None:
    """Wait for ``start``, try to acquire once; the winner holds until ``done``.

    Reports ``("ready", pid)``, then ``("won", owner)`` or ``("not acquired", owner, why)``.
    """
    client = target.client()
    events.put(("ready", os.getpid()))
    start.wait(WORKER_LIMIT_S)
    guard = target.guard(client, wait_timeout=wait_timeout)
    try:
        with guard:
            commit(client, guard, table=target.history, kind=ACQUIRED)
            events.put(("won", guard.owner))
            done.wait(WORKER_LIMIT_S)
    except LockNotAcquired as error:
        events.put(("not acquired", guard.owner, str(error)))


def contend(
    target: Target, events: Any, stop: Any, name: str, first_hold: float, go: Any = None
) -> None:
    """Take the lock again and again until ``stop``, committing history records while held.

    The first hold lasts ``first_hold`` seconds (or until the guard is lost),
    later ones 0.3 s, with a 0.5 s pause after each. Reports ``("ready",
    name)``, ``("acquired", name, owner, t, wall)`` and, for a guard that found
    itself lost, ``("lost", name, owner, t, wall)`` with the monotonic time it
    first noticed; ``wall`` is this process's wall clock when it reported. With
    ``go`` it starts contending only once that event is set.
    """
    client = target.client()
    events.put(("ready", name))
    if go is not None:
        go.wait(WORKER_LIMIT_S)
    holds = 0
    while not stop.is_set():
        guard = target.guard(client, wait_timeout=1.0)
        lost_at: float | None = None
        try:
            with guard:
                commit(client, guard, table=target.history, kind=ACQUIRED)
                events.put(("acquired", name, guard.owner, time.monotonic(), time.time()))
                end = time.monotonic() + (first_hold if holds == 0 else 0.3)
                holds += 1
                try:
                    while time.monotonic() < end and not stop.is_set():
                        guard.raise_if_lost()
                        commit(client, guard, table=target.history)
                        pause(0.05)
                    commit(client, guard, table=target.history, kind=RELEASED)
                except LockLost:
                    lost_at = time.monotonic()
        except LockNotAcquired:
            continue
        except LockLost:
            lost_at = lost_at or time.monotonic()
        if lost_at is not None:
            events.put(("lost", name, guard.owner, lost_at, time.time()))
        # Give the other contender a turn: a release wakes only waiters of the
        # same client, so one that re-acquired at once would hog the lock.
        pause(0.5)
