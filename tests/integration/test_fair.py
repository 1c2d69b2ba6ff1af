"""Fair locks against a moto server: waiters take the key in arrival order; a waiter that
gives up or dies leaves the queue; pydynox 1.8 (which does not queue) excludes a fair
holder and is excluded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pydynox
import pytest
from pydynox.exceptions import LockNotAcquired as PydynoxNotAcquired
from pydynox.lock import SyncDistributedLock as PydynoxLock
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.exceptions import LockNotAcquired
from dynalease.fair import FairLock, SyncFairLock
from dynalease.lock import SyncDistributedLock

REGION = "us-east-1"
#: Leases of several seconds: nothing here may expire on a loaded machine.
LEASE_S = 6.0


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "fair")


@pytest.fixture
def pdx(endpoint: str) -> pydynox.DynamoDBClient:
    return pydynox.DynamoDBClient(
        region=REGION, endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )


def queue(client: DynamoDBClient, table: str, key: str) -> list[str]:
    row = client.sync_get_item(table, {"key": f"dynalease-queue:{key}"}, consistent_read=True)
    return [] if row is None else list(row.get("q", []))


def test_an_uncontended_fair_cycle_costs_four_writes_and_one_read(
    client: DynamoDBClient, table: str
) -> None:
    with SyncFairLock(client, table=table, key="k", lease_duration=LEASE_S) as fair:
        assert fair.waiters_ahead_at_arrival == 0
        assert queue(client, table, "k") == []  # left once it held the key
    metrics = fair.metrics
    # join, lock create, leave (after a read that finds the entry), lock delete
    assert (metrics.write_requests, metrics.read_requests) == (4, 1)


def test_waiters_acquire_in_arrival_order(client: DynamoDBClient, table: str) -> None:
    holder = SyncFairLock(client, table=table, key="k", lease_duration=LEASE_S)
    holder.__enter__()
    order: list[int] = []
    threads = []
    for index in range(4):

        def wait(index: int = index) -> None:
            with SyncFairLock(
                client, table=table, key="k", lease_duration=LEASE_S, wait_timeout=60
            ):
                order.append(index)
                time.sleep(0.05)

        thread = threading.Thread(target=wait)
        threads.append(thread)
        thread.start()
        # Arrival is the queue's append: wait (generously) until this one is queued.
        end = time.monotonic() + 20
        while len(queue(client, table, "k")) < index + 1 and time.monotonic() < end:
            time.sleep(0.02)
    holder.__exit__(None, None, None)
    for thread in threads:
        thread.join(60)
    assert order == [0, 1, 2, 3]
    assert queue(client, table, "k") == []


def test_a_waiter_that_gives_up_leaves_the_queue(client: DynamoDBClient, table: str) -> None:
    with SyncFairLock(client, table=table, key="k", lease_duration=LEASE_S):
        with pytest.raises(LockNotAcquired, match=r"arrived earlier|held"):
            with SyncFairLock(
                client, table=table, key="k", lease_duration=LEASE_S, wait_timeout=0.5
            ):
                pass
        assert queue(client, table, "k") == []


def test_a_dead_waiter_is_removed_by_the_one_behind_it_after_a_lease(
    client: DynamoDBClient, table: str
) -> None:
    from dynalease._engine import queue_rows as q

    # A waiter that joined and died: its entry and one beat, never renewed.
    client.sync_put_item(
        table,
        {"key": q.queue_key("k"), "q": ["dead-token"], q.beat_attr("dead-token"): "beat-1"},
    )
    began = time.monotonic()
    with SyncFairLock(client, table=table, key="k", lease_duration=2.0, wait_timeout=30) as fair:
        waited = time.monotonic() - began
        assert fair.waiters_ahead_at_arrival == 1
    assert waited >= 2.0  # one lease unchanged in our observation, never less
    assert queue(client, table, "k") == []


def test_pydynox_excludes_a_fair_holder_and_is_excluded(
    client: DynamoDBClient, table: str, pdx: pydynox.DynamoDBClient
) -> None:
    with PydynoxLock(pdx, table=table, key="k", lease_duration=LEASE_S):
        with pytest.raises(LockNotAcquired):
            with SyncFairLock(client, table=table, key="k", wait_timeout=0.5):
                pass
    assert queue(client, table, "k") == []
    with SyncFairLock(client, table=table, key="k", lease_duration=LEASE_S):
        with pytest.raises(PydynoxNotAcquired):
            with PydynoxLock(pdx, table=table, key="k", wait_timeout=0):
                pass
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(client, table=table, key="k", wait_timeout=0):
                pass


def test_the_async_face(client: DynamoDBClient, table: str) -> None:
    import asyncio

    async def main() -> Any:
        async with FairLock(
            client, table=table, key="a", lease_duration=LEASE_S, fencing=True
        ) as fair:
            return fair.lock.fencing_token

    assert asyncio.run(main()) == 1


def test_a_multi_key_waiter_acquires_while_single_key_holders_keep_arriving(
    client: DynamoDBClient, table: str
) -> None:
    """Unfair, single-key holders that take A and B in turn can keep a waiter for both out
    forever (docs/locks.md, "Starvation"); fair ones queue behind it on each key."""
    stop = threading.Event()
    spans: list[tuple[str, float, float]] = []

    def single(key: str) -> None:
        while not stop.is_set():
            with SyncFairLock(
                client, table=table, key=key, lease_duration=LEASE_S, wait_timeout=60
            ):
                began = time.monotonic()
                time.sleep(0.1)
                spans.append((key, began, time.monotonic()))

    holders = [threading.Thread(target=single, args=(key,)) for key in ("A", "B", "A", "B")]
    for thread in holders:
        thread.start()
    try:
        # Both keys busy: each has had a holder (not a fixed sleep: on a busy machine the
        # first fair acquisitions once took longer than the second this waited).
        deadline = time.monotonic() + 30
        while {key for key, _, _ in spans} != {"A", "B"} and time.monotonic() < deadline:
            time.sleep(0.05)
        before = len(spans)
        with SyncFairLock(
            client, table=table, keys=["A", "B"], lease_duration=LEASE_S, wait_timeout=40
        ) as both:
            held_from = time.monotonic()
            assert both.keys == ("A", "B")
            time.sleep(0.2)
            held_to = time.monotonic()
        time.sleep(1.0)  # the single-key holders go on after it
    finally:
        stop.set()
        for thread in holders:
            thread.join(60)
    assert before > 0 and len(spans) > before  # they kept arriving, before and after
    overlapping = [span for span in spans if span[1] < held_to and held_from < span[2]]
    assert overlapping == []


def test_fair_is_an_option_of_every_lock_face(client: DynamoDBClient, table: str) -> None:
    from dynalease.lock import distributed_lock

    with SyncDistributedLock(client, table=table, key="k", lease_duration=LEASE_S, fair=True) as g:
        assert queue(client, table, "k") == []
    assert (g.metrics.write_requests, g.metrics.read_requests) == (4, 1)

    @distributed_lock(client, table=table, key="job:{name}", lease_duration=LEASE_S, fair=True)
    def job(name: str) -> str:
        return name

    assert job("a") == "a"
    with pytest.raises(TypeError, match="fair must be True or False"):
        SyncDistributedLock(client, table=table, key="k", fair=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reserved"):
        SyncDistributedLock(client, table=table, key="dynalease-queue:x", fair=True)


def _in_order(
    client: DynamoDBClient, table: str, queue_of: str, enter: Any, hold: Any
) -> list[int]:
    """Four waiters queued one after another behind ``hold``: the order they got in."""
    order: list[int] = []
    threads = []
    for index in range(4):

        def wait(index: int = index) -> None:
            with enter():
                order.append(index)
                time.sleep(0.05)

        threads.append(threading.Thread(target=wait))
        threads[-1].start()
        end = time.monotonic() + 20
        while len(queue(client, table, queue_of)) < index + 1 and time.monotonic() < end:
            time.sleep(0.02)
    hold.__exit__(None, None, None)
    for thread in threads:
        thread.join(60)
    return order


def test_a_fair_semaphore_serves_its_waiters_in_arrival_order(
    client: DynamoDBClient, table: str
) -> None:
    from dynalease import SyncDistributedSemaphore

    options: dict[str, Any] = {"table": table, "key": "s", "permits": 2, "lease_duration": LEASE_S}
    first = SyncDistributedSemaphore(client, fair=True, **options)
    first.__enter__()
    second = SyncDistributedSemaphore(client, fair=True, **options)
    second.__enter__()  # both permits held
    order = _in_order(
        client,
        table,
        "dynalease-permit:s",
        lambda: SyncDistributedSemaphore(client, fair=True, wait_timeout=60, **options),
        first,
    )
    second.__exit__(None, None, None)
    assert order == [0, 1, 2, 3]


def test_fair_writers_take_the_writer_row_in_arrival_order(
    client: DynamoDBClient, table: str
) -> None:
    from dynalease.rwlock import SyncWriteLock

    options: dict[str, Any] = {"table": table, "key": "cfg", "lease_duration": LEASE_S}
    holder = SyncWriteLock(client, fair=True, **options)
    holder.__enter__()
    order = _in_order(
        client,
        table,
        "dynalease-writer:cfg",
        lambda: SyncWriteLock(client, fair=True, wait_timeout=60, **options),
        holder,
    )
    assert order == [0, 1, 2, 3]
