"""Fair waiting across processes: waiters in three processes take the key in the order
they reached its queue, and one SIGKILLed while waiting leaves the queue by observation."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import uuid

import pytest
from support.fair_workers import fair_waiter
from support.workers import reaped

from dynalease import DynamoDBClient
from dynalease.fair import SyncFairLock

#: Long enough for every request (lease/3) on a loaded machine.
LEASE_S = 2.0

spawn = multiprocessing.get_context("spawn")


def queued(client: DynamoDBClient, table: str) -> int:
    row = client.sync_get_item(table, {"key": "dynalease-queue:hot"}, consistent_read=True)
    return 0 if row is None else len(row.get("q", []))


@pytest.mark.process_history
def test_processes_take_the_key_in_queue_order_and_a_killed_waiter_drops_out(
    client: DynamoDBClient, endpoint: str
) -> None:
    table = f"locks-{uuid.uuid4().hex[:10]}"
    client.sync_create_table(table, partition_key=("key", "S"), wait=True)
    events = spawn.Queue()
    holder = SyncFairLock(client, table=table, key="hot", lease_duration=LEASE_S)
    holder.__enter__()
    pids: dict[str, int] = {}
    with reaped([]) as started:
        for index, name in enumerate(["p0", "p1", "p2", "p3"]):
            process = spawn.Process(
                target=fair_waiter, args=(endpoint, table, LEASE_S, name, events)
            )
            started.append(process)
            process.start()
            _, _, pids[name] = events.get(timeout=60)
            # Arrival is the append to the queue: wait (generously) for this one's.
            end = time.monotonic() + 60
            while queued(client, table) < index + 1 and time.monotonic() < end:
                time.sleep(0.05)
            assert queued(client, table) == index + 1
        os.kill(pids["p1"], signal.SIGKILL)  # queued, waiting: it never beats again
        killed_at = time.monotonic()
        holder.__exit__(None, None, None)
        order = [events.get(timeout=60)[1:] for _ in range(3)]
        for process in started:
            process.join(30)
    assert [name for name, _ in order] == ["p0", "p2", "p3"]
    # p2 went only once p1's entry stayed unchanged for a lease in its observation.
    assert order[1][1] - killed_at >= LEASE_S / 3
    assert queued(client, table) == 0
