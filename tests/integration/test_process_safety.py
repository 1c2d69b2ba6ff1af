"""Holders in separate processes that are killed, paused, or race for an abandoned row.

Each holder is a spawned process with its own client (tests/support/workers.py);
every critical section records its commits through check_in transactions, and
the history check proves that no two owners overlapped.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest
from dynalease_dev.demo.history import ACQUIRED, check_history, commit
from support.worker_messages import MESSAGE_TIMEOUT_S, expect
from support.workers import (
    Target,
    hold_until_killed,
    new_target,
    pause_before_commit,
    race_for_row,
)

from dynalease import DynamoDBClient
from dynalease._engine.protocol import poll_cap
from dynalease.lock import SyncDistributedLock

LEASE_S = 2.0
#: Room for a loaded machine (eight test runs on two cores) on top of protocol timing:
#: several leases, so that only a takeover that never came, or came leases late, fails.
#: The exact schedule (the lease, then one poll at most) is the engine's unit tests', on a
#: manual clock.
SLACK_S = 10.0

spawn = multiprocessing.get_context("spawn")


@pytest.fixture
def target(client: DynamoDBClient, endpoint: str) -> Target:
    return new_target(client, endpoint, lease=LEASE_S)


def lock_row(client: DynamoDBClient, target: Target) -> dict[str, Any] | None:
    return client.sync_get_item(target.table, {"key": target.key}, consistent_read=True)


def successor(client: DynamoDBClient, target: Target, wait_timeout: float) -> SyncDistributedLock:
    return SyncDistributedLock(
        client,
        table=target.table,
        key=target.key,
        lease_duration=LEASE_S,
        wait_timeout=wait_timeout,
    )


def test_a_killed_holder_is_taken_over_within_the_lease_and_one_poll(
    client: DynamoDBClient, target: Target, processes: list[Any]
) -> None:
    events = spawn.Queue()
    holder = spawn.Process(target=hold_until_killed, args=(target, events))
    processes.append(holder)
    holder.start()
    _, killed_owner, _ = expect(events, "held")
    time.sleep(LEASE_S / 2)  # let it renew at least once

    os.kill(holder.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    with successor(client, target, wait_timeout=LEASE_S + SLACK_S + 5) as guard:
        took = time.monotonic() - killed_at
        commit(client, guard, table=target.history, kind=ACQUIRED)
        commit(client, guard, table=target.history)
        assert lock_row(client, target)["owner"] == guard.owner  # type: ignore[index]

    # Observation started after the kill, so the row must have stayed unchanged
    # for a whole lease before the takeover (exact: a takeover before it would be a
    # fault); one poll later at most, plus the slack for a loaded machine.
    assert took >= LEASE_S
    assert took <= LEASE_S + poll_cap(LEASE_S) + SLACK_S
    holder.join(10)
    assert holder.exitcode == -signal.SIGKILL
    report = check_history(client, target.history)
    assert report.ok, report.violations
    assert (report.owners, report.acquisitions, report.commits) == (2, 2, 2)
    assert report.takeovers == 1
    assert killed_owner != guard.owner


def test_a_paused_holder_resumed_after_a_takeover_is_lost_rejected_and_spares_the_new_row(
    client: DynamoDBClient, target: Target, processes: list[Any]
) -> None:
    events, resume = spawn.Queue(), spawn.Event()
    holder = spawn.Process(target=pause_before_commit, args=(target, events, resume))
    processes.append(holder)
    holder.start()
    _, paused_owner, pid = expect(events, "prepared")

    os.kill(pid, signal.SIGSTOP)
    with successor(client, target, wait_timeout=LEASE_S + SLACK_S + 5) as guard:
        commit(client, guard, table=target.history, kind=ACQUIRED)
        commit(client, guard, table=target.history)
        os.kill(pid, signal.SIGCONT)
        resume.set()
        _, outcome = expect(events, "outcome")
        holder.join(30)

        assert outcome["raise_if_lost"] == "LockLost"
        assert outcome["commit"] == "rejected"
        assert outcome["release"] == "LockLost"
        row = lock_row(client, target)
        assert row is not None and row["owner"] == guard.owner
        guard.raise_if_lost()
        commit(client, guard, table=target.history)

    assert holder.exitcode == 0
    report = check_history(client, target.history)
    assert report.ok, report.violations
    # The paused owner's prepared record never landed: it has 1 write, the successor 2.
    assert (report.acquisitions, report.commits, report.takeovers) == (2, 3, 1)
    assert paused_owner != guard.owner


def test_five_processes_racing_for_one_abandoned_row_produce_exactly_one_winner(
    client: DynamoDBClient, target: Target, processes: list[Any]
) -> None:
    racers = 5
    # Racers wait up to 6 s (room for a loaded machine) and hold with an 8 s
    # lease: even if the winner stopped renewing at once, no loser could observe
    # its row unchanged for a whole lease and take it over too.
    racing = replace(target, lease=8.0)
    abandoned = {
        "key": target.key,
        "owner": str(uuid.uuid4()),
        "version": str(uuid.uuid4()),
        "lease_ms": 1000,
        "protocol": 1,
    }
    client.sync_put_item(target.table, abandoned)
    events, start, done = spawn.Queue(), spawn.Event(), spawn.Event()
    for _ in range(racers):
        racer = spawn.Process(target=race_for_row, args=(racing, 6.0, events, start, done))
        processes.append(racer)
        racer.start()
    for _ in range(racers):
        expect(events, "ready")

    start.set()
    outcomes = [events.get(timeout=MESSAGE_TIMEOUT_S) for _ in range(racers)]
    done.set()
    for racer in processes:
        racer.join(30)

    winners = [owner for name, owner, *_ in outcomes if name == "won"]
    assert len(winners) == 1, outcomes
    assert sum(name == "not acquired" for name, *_ in outcomes) == racers - 1
    assert all(racer.exitcode == 0 for racer in processes)
    report = check_history(client, target.history)
    assert report.ok, report.violations
    assert report.acquisitions == 1
    assert lock_row(client, target) is None  # the winner released on its way out
