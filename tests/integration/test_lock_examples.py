"""The reference documentation's examples, run against a real moto server over HTTP."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from dynalease import DynamoDBClient
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock
from dynalease.transaction import SyncTransaction


def test_async_workers_example_serialises_same_customer(client: DynamoDBClient) -> None:
    if not client.sync_table_exists("worker_locks"):
        client.sync_create_table("worker_locks", partition_key=("key", "S"), wait=True)

    @distributed_lock(client, table="worker_locks", key="customer:{customer_id}", wait_timeout=2)
    async def synchronize_customer(customer_id: str) -> str:
        await asyncio.sleep(0.01)
        return f"Updated {customer_id}"

    async def main() -> None:
        results = await asyncio.gather(
            synchronize_customer("123"),
            synchronize_customer(customer_id="123"),
            synchronize_customer("456"),
        )
        assert results == ["Updated 123", "Updated 123", "Updated 456"]

    asyncio.run(main())


def test_sync_transaction_example_uses_two_lock_writes(client: DynamoDBClient) -> None:
    for table, partition_key in (("script_locks", "key"), ("import_results", "job_id")):
        if not client.sync_table_exists(table):
            client.sync_create_table(table, partition_key=(partition_key, "S"), wait=True)

    with SyncDistributedLock(client, table="script_locks", key="import:daily") as lease:
        summary = "Imported 100 rows"
        with SyncTransaction(client) as transaction:
            lease.check_in(transaction)
            transaction.put("import_results", {"job_id": "daily", "summary": summary})

    assert lease.metrics.write_requests == 2
    result = client.sync_get_item("import_results", {"job_id": "daily"})
    assert result is not None and result["summary"] == summary


def test_a_held_lock_blocks_a_zero_wait_contender(client: DynamoDBClient) -> None:
    if not client.sync_table_exists("contended"):
        client.sync_create_table("contended", partition_key=("key", "S"), wait=True)
    other = DynamoDBClient(region="us-east-1", endpoint_url=client.endpoint_url)
    with SyncDistributedLock(client, table="contended", key="k", lease_duration=5):
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(other, table="contended", key="k", wait_timeout=0):
                pass
    with SyncDistributedLock(other, table="contended", key="k", wait_timeout=0) as lease:
        assert lease.time_left > 0


def test_renewal_keeps_the_lease_over_several_windows(client: DynamoDBClient) -> None:
    if not client.sync_table_exists("renewing"):
        client.sync_create_table("renewing", partition_key=("key", "S"), wait=True)

    async def hold() -> DistributedLock:
        # Renewals every 1 s, each with 1 s to be answered (0.5 s with a 1.5 s lease, thin on
        # a busy machine): the release at 4.5 s falls between two, none is in flight then.
        async with DistributedLock(client, table="renewing", key="r", lease_duration=3.0) as lease:
            await asyncio.sleep(4.5)
            lease.raise_if_lost()
        return lease

    lease = asyncio.run(hold())
    assert lease.metrics.renewals >= 3
    assert lease.metrics.write_requests == lease.metrics.renewals + 2


def test_bad_durations_are_rejected_before_any_request(client: DynamoDBClient) -> None:
    for kwargs in (
        {"lease_duration": 0.05},
        {"wait_timeout": -1},
        {"lease_duration": float("nan")},
        {"wait_timeout": 86_401},
    ):
        with pytest.raises(ValueError):
            SyncDistributedLock(client, table="renewing", key="x", **kwargs)  # type: ignore[arg-type]
    assert os.getpid() > 0


def _table(client: DynamoDBClient, name: str) -> str:
    if not client.sync_table_exists(name):
        client.sync_create_table(name, partition_key=("key", "S"), wait=True)
    return name


def test_cancelling_an_async_body_releases_the_row(client: DynamoDBClient) -> None:
    table = _table(client, "cancelled")

    async def main() -> None:
        async def body() -> None:
            async with DistributedLock(client, table=table, key="c"):
                await asyncio.sleep(30)

        task = asyncio.ensure_future(body())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert client.sync_get_item(table, {"key": "c"}, consistent_read=True) is None


def test_threads_sharing_one_client_never_overlap(client: DynamoDBClient) -> None:
    import threading

    table = _table(client, "threads")
    inside: list[int] = []
    overlaps: list[int] = []

    def worker() -> None:
        for _ in range(3):
            with SyncDistributedLock(client, table=table, key="t", wait_timeout=20):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.01)
                inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert overlaps == []


def test_check_in_is_rejected_once_another_owner_holds_the_row(client: DynamoDBClient) -> None:
    from dynalease.exceptions import LockLost, LockOwnershipLost, TransactionCanceledException

    table = _table(client, "checkin")
    results = _table(client, "checkin_results")
    with pytest.raises(LockLost):
        with SyncDistributedLock(client, table=table, key="job") as lease:
            # A successor's row, as after a takeover.
            client.sync_put_item(
                table,
                {
                    "key": "job",
                    "owner": "successor",
                    "version": "v",
                    "lease_ms": 30000,
                    "protocol": 1,
                },
            )
            with pytest.raises(TransactionCanceledException) as rejected:
                with SyncTransaction(client) as transaction:
                    lease.check_in(transaction)
                    transaction.put(results, {"key": "job", "by": lease.owner})
            assert isinstance(rejected.value, LockOwnershipLost)
            assert lease.lost
    assert client.sync_get_item(results, {"key": "job"}) is None
    row = client.sync_get_item(table, {"key": "job"}, consistent_read=True)
    assert row is not None and row["owner"] == "successor"


def test_a_transaction_sends_nothing_when_its_block_raises(client: DynamoDBClient) -> None:
    table = _table(client, "tx_abort")
    with pytest.raises(RuntimeError, match="boom"):
        with SyncTransaction(client) as transaction:
            transaction.put(table, {"key": "a", "n": 1})
            raise RuntimeError("boom")
    assert client.sync_get_item(table, {"key": "a"}) is None


def test_check_in_refuses_a_transaction_of_another_client(client: DynamoDBClient) -> None:
    table = _table(client, "tx_other")
    other = DynamoDBClient(region="us-east-1", endpoint_url=client.endpoint_url)
    with SyncDistributedLock(client, table=table, key="o") as lease:
        with pytest.raises(ValueError, match="different DynamoDBClient"):
            lease.check_in(SyncTransaction(other))


def test_a_missing_table_is_an_error_not_contention(client: DynamoDBClient) -> None:
    from dynalease.exceptions import TableNotFoundError

    with pytest.raises(TableNotFoundError, match="does not exist"):
        with SyncDistributedLock(client, table="no_such_table", key="k", wait_timeout=1):
            pass


def test_item_helpers_round_trip_plain_python_values(client: DynamoDBClient) -> None:
    table = _table(client, "items")
    item = {
        "key": "v",
        "int": 7,
        "float": 0.25,
        "bytes": b"\x00\x01",
        "flag": True,
        "nothing": None,
        "list": [1, "two"],
        "map": {"a": 1},
        "tags": {"x", "y"},
    }
    client.sync_put_item(table, item)
    assert client.sync_get_item(table, {"key": "v"}) == item
    client.sync_delete_item(table, {"key": "v"})
    assert client.sync_get_item(table, {"key": "v"}) is None

    async def main() -> None:
        await client.put_item(table, {"key": "w", "n": 1})
        assert await client.get_item(table, {"key": "w"}) == {"key": "w", "n": 1}
        assert await client.table_exists(table)

    asyncio.run(main())
