"""Lock behaviour against a real DynamoDB-compatible HTTP server (moto, started by the tests).

Rows written "by someone else" are put with the item helpers, exactly as a
crashed or foreign writer would leave them. Leases are short (0.3-1 s) and
timing bounds generous: lower bounds check the protocol, upper bounds only
catch a hang.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.exceptions import (
    DynaleaseError,
    LockLost,
    LockNotAcquired,
    LockReleaseError,
    MalformedLockRow,
)
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "locks")


def fresh(client: DynamoDBClient) -> DynamoDBClient:
    """A new client for the same server: no observation history."""
    return DynamoDBClient(region="us-east-1", endpoint_url=client.endpoint_url)


def abandon(client: DynamoDBClient, table: str, key: str, **row: Any) -> dict[str, Any]:
    """Leave a row as a crashed holder (or a foreign writer) would."""
    item = {"key": key, "owner": "crashed", "version": "v1", "lease_ms": 1000, "protocol": 1}
    item.update(row)
    client.sync_put_item(table, item)
    return item


def stored(client: DynamoDBClient, table: str, key: str) -> dict[str, Any] | None:
    return client.sync_get_item(table, {"key": key}, consistent_read=True)


# --- recovery of abandoned rows ---------------------------------------------------------


def test_an_abandoned_row_is_taken_over_after_its_stored_lease_not_before(
    client: DynamoDBClient, table: str
) -> None:
    abandon(client, table, "job", lease_ms=1500)
    start = time.monotonic()
    # Our own lease is 1 s: the wait must follow the stored 1.5 s lease, not ours.
    with SyncDistributedLock(client, table=table, key="job", lease_duration=1, wait_timeout=10):
        waited = time.monotonic() - start
        row = stored(client, table, "job")
        assert row is not None and row["owner"] != "crashed" and row["lease_ms"] == 1000
    # Not before the stored lease; after it, within the 10 s wait_timeout (several leases,
    # for a loaded machine), or the acquisition would have raised. The exact schedule is
    # the engine's unit tests', on a manual clock.
    assert waited >= 1.5
    assert stored(client, table, "job") is None


def test_a_fresh_client_cannot_skip_observation_of_an_old_row(
    client: DynamoDBClient, table: str
) -> None:
    abandon(client, table, "old", lease_ms=600)
    time.sleep(0.8)  # the row is older than its lease, but nobody has watched it
    newcomer = fresh(client)
    with pytest.raises(LockNotAcquired):
        with SyncDistributedLock(newcomer, table=table, key="old", wait_timeout=0):
            pass
    first_sighting = time.monotonic()  # the client saw the row before this instant
    with pytest.raises(LockNotAcquired):
        with SyncDistributedLock(fresh(client), table=table, key="old", wait_timeout=0.2):
            pass
    assert stored(client, table, "old")["owner"] == "crashed"  # type: ignore[index]
    # The same client keeps its sighting: once 0.6 s have passed since it, zero wait succeeds.
    time.sleep(max(0.0, first_sighting + 0.7 - time.monotonic()))
    with SyncDistributedLock(newcomer, table=table, key="old", wait_timeout=0) as lease:
        assert stored(client, table, "old")["owner"] == lease.owner  # type: ignore[index]


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"protocol": 2, "lease_ms": 100}, "protocol"),
        ({"lease_ms": 1.5}, "lease_ms"),
        ({"lease_ms": 50}, "lease_ms"),
        ({"owner": ""}, "owner"),
        ({"version": 7}, "version"),
    ],
)
def test_a_malformed_or_unknown_protocol_row_is_never_taken_over(
    client: DynamoDBClient, table: str, row: dict[str, Any], problem: str
) -> None:
    item = abandon(client, table, "odd", **row)
    guard = SyncDistributedLock(client, table=table, key="odd", wait_timeout=3)
    with pytest.raises(MalformedLockRow, match=problem) as raised:
        with guard:
            pass
    # Raised at its first sight of the row, not after waiting: one create, no poll.
    assert (guard.metrics.write_requests, guard.metrics.read_requests) == (1, 0)
    assert not isinstance(raised.value, LockNotAcquired)
    assert isinstance(raised.value, DynaleaseError)
    assert f"{table!r}" in str(raised.value) and "will not be taken over" in str(raised.value)
    assert stored(client, table, "odd") == item


# --- one client, many threads and event loops -----------------------------------------------


def test_one_client_serves_successive_event_loops(client: DynamoDBClient, table: str) -> None:
    async def hold() -> DistributedLock:
        async with DistributedLock(client, table=table, key="loops", lease_duration=1) as lease:
            await asyncio.sleep(0.01)
        return lease

    leases = [asyncio.run(hold()) for _ in range(3)]
    assert [lease.metrics.write_requests for lease in leases] == [2, 2, 2]
    assert len({lease.owner for lease in leases}) == 3


def test_threads_each_running_their_own_event_loop_share_one_client(
    client: DynamoDBClient, table: str
) -> None:
    inside: list[str] = []
    overlaps: list[str] = []
    errors: list[BaseException] = []

    async def work(name: str) -> None:
        for _ in range(2):
            async with DistributedLock(client, table=table, key="shared", wait_timeout=20):
                inside.append(name)
                if len(inside) > 1:
                    overlaps.append(name)
                await asyncio.sleep(0.01)
                inside.remove(name)

    def async_thread(name: str) -> None:
        try:
            asyncio.run(work(name))
        except BaseException as error:
            errors.append(error)

    def sync_thread() -> None:
        try:
            with SyncDistributedLock(client, table=table, key="shared", wait_timeout=20):
                inside.append("sync")
                if len(inside) > 1:
                    overlaps.append("sync")
                time.sleep(0.01)
                inside.remove("sync")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=async_thread, args=(f"loop-{n}",)) for n in range(3)]
    threads.append(threading.Thread(target=sync_thread))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and overlaps == []
    assert stored(client, table, "shared") is None


# --- the lost signal --------------------------------------------------------------------------


def test_a_sync_holder_is_told_promptly_when_another_owner_takes_the_row(
    client: DynamoDBClient, table: str
) -> None:
    told: list[LockLost] = []
    callback_ran = threading.Event()

    def on_lost(error: LockLost) -> None:
        told.append(error)
        callback_ran.set()

    with pytest.raises(LockLost):
        with SyncDistributedLock(
            client, table=table, key="taken", lease_duration=1.5, on_lost=on_lost
        ) as lease:
            assert lease.wait_lost(timeout=0) is False and not lease.lost
            abandon(client, table, "taken", owner="successor", lease_ms=30000)
            # The next renewal (every 0.5 s) finds out; the timeout is for a loaded machine,
            # so that only a loss never noticed fails.
            assert lease.wait_lost(timeout=30)
            assert lease.lost
            with pytest.raises(LockLost):
                lease.raise_if_lost()
            assert callback_ran.wait(30)
    assert told[0].key == "taken" and told[0].owner == lease.owner
    assert lease.metrics.lost
    assert stored(client, table, "taken")["owner"] == "successor"  # type: ignore[index]


def test_an_async_holder_can_await_the_loss(client: DynamoDBClient, table: str) -> None:
    async def main() -> DistributedLock:
        async with DistributedLock(client, table=table, key="taken", lease_duration=1.5) as lease:
            await client.put_item(
                table,
                {
                    "key": "taken",
                    "owner": "successor",
                    "version": "v",
                    "lease_ms": 30000,
                    "protocol": 1,
                },
            )
            work = asyncio.ensure_future(asyncio.sleep(30))  # long work, stopped early
            lost = asyncio.ensure_future(lease.until_lost())
            done, _ = await asyncio.wait({work, lost}, timeout=5, return_when="FIRST_COMPLETED")
            work.cancel()
            assert done == {lost}
        return lease

    with pytest.raises(LockLost, match="another owner"):
        asyncio.run(main())


# --- exit: body exception and cleanup failure ------------------------------------------------


@pytest.fixture
def dropped_table(client: DynamoDBClient) -> Iterator[tuple[str, Any]]:
    """A lock table and a way to delete it mid-hold, so release cannot succeed."""
    name = fresh_lock_table(client, "gone")
    raw = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=client.endpoint_url)
    yield name, lambda: raw.delete_table(TableName=name)


def test_the_body_exception_wins_and_the_cleanup_failure_is_attached_as_a_note(
    client: DynamoDBClient, dropped_table: tuple[str, Any]
) -> None:
    name, drop = dropped_table
    with pytest.raises(KeyError, match="from the body") as raised:
        with SyncDistributedLock(client, table=name, key="k", lease_duration=0.5) as lease:
            drop()
            raise KeyError("from the body")
    notes = getattr(raised.value, "__notes__", [])
    assert len(notes) == 1 and "cleanup" in notes[0] and "not confirmed" in notes[0]
    assert lease.metrics.cleanup_failures == 1


def test_without_a_body_exception_the_cleanup_failure_is_raised(
    client: DynamoDBClient, dropped_table: tuple[str, Any]
) -> None:
    name, drop = dropped_table

    async def main() -> None:
        async with DistributedLock(client, table=name, key="k", lease_duration=0.5):
            drop()

    with pytest.raises(LockReleaseError, match="cleanup budget"):
        asyncio.run(main())


def test_an_async_body_exception_also_wins(
    client: DynamoDBClient, dropped_table: tuple[str, Any]
) -> None:
    name, drop = dropped_table

    @distributed_lock(client, table=name, key="job:{job}", lease_duration=0.5)
    async def job(job: str) -> None:
        drop()
        raise RuntimeError(f"job {job} failed")

    with pytest.raises(RuntimeError, match="job 1 failed") as raised:
        asyncio.run(job("1"))
    assert "cleanup" in raised.value.__notes__[0]


# --- single use, no reentrancy ----------------------------------------------------------------


def test_a_guard_is_single_use(client: DynamoDBClient, table: str) -> None:
    guard = SyncDistributedLock(client, table=table, key="once", lease_duration=1)
    with guard:
        pass
    with pytest.raises(RuntimeError, match="single use"):
        with guard:
            pass

    async def main() -> None:
        async_guard = DistributedLock(client, table=table, key="once", lease_duration=1)
        async with async_guard:
            pass
        with pytest.raises(RuntimeError, match="single use"):
            async with async_guard:
                pass

    asyncio.run(main())
    assert stored(client, table, "once") is None


def test_a_lock_is_not_reentrant(client: DynamoDBClient, table: str) -> None:
    with SyncDistributedLock(client, table=table, key="outer", lease_duration=3) as outer:
        # Nested acquisition of the same key on the same client competes like anyone.
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(client, table=table, key="outer", wait_timeout=0.2):
                pass
        outer.raise_if_lost()
        with SyncDistributedLock(client, table=table, key="other", wait_timeout=0):
            pass


# --- the decorator ---------------------------------------------------------------------------


def test_the_decorator_works_on_async_and_sync_methods(client: DynamoDBClient, table: str) -> None:
    class Customers:
        def __init__(self) -> None:
            self.seen: list[dict[str, Any] | None] = []

        @distributed_lock(client, table=table, key="customer:{customer_id}", lease_duration=3)
        async def refresh(self, customer_id: str, *, note: str = "") -> str:
            """Refresh one customer."""
            self.seen.append(await client.get_item(table, {"key": f"customer:{customer_id}"}))
            return f"refreshed {customer_id}{note}"

        @distributed_lock(client, table=table, key="customer:{customer_id}", lease_duration=3)
        def fail(self, customer_id: str) -> None:
            self.seen.append(stored(client, table, f"customer:{customer_id}"))
            raise LookupError(customer_id)

    customers = Customers()
    assert asyncio.run(customers.refresh("1", note="!")) == "refreshed 1!"
    assert Customers.refresh.__doc__ == "Refresh one customer."
    with pytest.raises(LookupError, match="2"):
        customers.fail("2")
    assert [row is not None and row["protocol"] == 1 for row in customers.seen] == [True, True]
    assert stored(client, table, "customer:1") is None
    assert stored(client, table, "customer:2") is None


# --- metrics ------------------------------------------------------------------------------------


def test_metrics_count_requests_outcomes_and_reported_capacity(
    client: DynamoDBClient, table: str
) -> None:
    other = fresh(client)
    with SyncDistributedLock(other, table=table, key="warm-up", wait_timeout=10):
        pass  # the first request of a client also opens its connection: keep that out
    with SyncDistributedLock(client, table=table, key="m", lease_duration=3) as held:
        contender = SyncDistributedLock(other, table=table, key="m", wait_timeout=0.5)
        with pytest.raises(LockNotAcquired):
            with contender:
                pass
    mine, theirs = held.metrics, contender.metrics
    assert (mine.write_requests, mine.read_requests, mine.renewals) == (2, 0, 0)
    assert mine.consumed_wcu > 0 and mine.consumed_rcu == 0 and not mine.lost
    # One failed create, then strongly consistent polls until the wait ran out.
    assert theirs.write_requests == 1 and theirs.conditional_failures == 1
    assert theirs.read_requests >= 1 and theirs.consumed_rcu > 0
    assert theirs.wait_timeouts == 1 and theirs.wait_ms >= 500
    assert theirs.consumed_wcu == 0  # a failed condition reports no capacity to count
