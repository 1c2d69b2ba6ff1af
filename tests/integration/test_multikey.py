"""Multi-key locks (``keys=[...]``) against a moto server: all or nothing, in one transaction.

An uncontended cycle costs two write requests whatever the number of keys; a key
held by anyone (pydynox 1.8, a single-key guard) keeps every other row unwritten;
a multi-key guard keeps pydynox and single-key guards out of each of its keys;
abandoned rows are taken over by observation, all in the same transaction.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pydynox
import pytest
from pydynox.exceptions import LockNotAcquired as PydynoxNotAcquired
from pydynox.lock import SyncDistributedLock as PydynoxLock
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient, SyncTransaction
from dynalease.exceptions import LockLost, LockNotAcquired
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock

REGION = "us-east-1"


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "multikey")


@pytest.fixture
def pdx(endpoint: str) -> pydynox.DynamoDBClient:
    return pydynox.DynamoDBClient(
        region=REGION, endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )


def stored(client: DynamoDBClient, table: str, key: str) -> dict[str, Any] | None:
    return client.sync_get_item(table, {"key": key}, consistent_read=True)


def keys_of(n: int, prefix: str = "account") -> list[str]:
    return [f"{prefix}:{index}" for index in range(n)]


@pytest.mark.parametrize("n", [1, 5, 25, 100])
def test_an_uncontended_cycle_is_two_write_requests_whatever_the_number_of_keys(
    client: DynamoDBClient, table: str, n: int
) -> None:
    keys = keys_of(n)
    with SyncDistributedLock(client, table=table, keys=keys) as lease:
        assert lease.keys == tuple(keys)
        owners = {stored(client, table, key)["owner"] for key in keys}  # type: ignore[index]
        assert owners == {lease.owner}
    metrics = lease.metrics
    assert (metrics.write_requests, metrics.read_requests) == (2, 0)
    # moto reports no capacity for a transaction (DynamoDB: 2 WCU per row of up to 1 KB).
    assert all(stored(client, table, key) is None for key in keys)


def test_the_async_guard_and_the_decorator_hold_every_key(
    client: DynamoDBClient, table: str
) -> None:
    @distributed_lock(client, table=table, keys=["order:{order}", "customer:{customer}"])
    def work(order: str, customer: str) -> list[str]:
        return [stored(client, table, key)["owner"] for key in ("order:7", "customer:c1")]  # type: ignore[index]

    first, second = work("7", customer="c1")
    assert first == second
    assert stored(client, table, "order:7") is None

    async def hold() -> tuple[str, ...]:
        async with DistributedLock(client, table=table, keys=["a", "b", "c"]) as lease:
            return lease.keys

    assert asyncio.run(hold()) == ("a", "b", "c")


def test_a_key_held_by_pydynox_blocks_the_guard_which_writes_none_of_its_other_rows(
    client: DynamoDBClient, pdx: pydynox.DynamoDBClient, table: str
) -> None:
    keys = keys_of(5)
    with PydynoxLock(pdx, table=table, key=keys[3], lease_duration=5.0):
        waiting = SyncDistributedLock(client, table=table, keys=keys, wait_timeout=0.6)
        with pytest.raises(LockNotAcquired, match="nothing was written"):
            with waiting:
                pass
        assert [stored(client, table, key) for key in keys if key != keys[3]] == [None] * 4
        assert waiting.metrics.read_requests >= 1  # it waited, reading every row together
    with SyncDistributedLock(client, table=table, keys=keys, wait_timeout=0):
        pass


@pytest.mark.parametrize("index", [0, 4])
def test_a_multi_key_guard_blocks_pydynox_and_single_key_guards_on_each_key(
    client: DynamoDBClient, pdx: pydynox.DynamoDBClient, table: str, index: int
) -> None:
    keys = keys_of(5)
    # The lease only has to outlast the two refused attempts: 6 s, so that a renewal slowed
    # by a busy machine cannot lose it first (nothing here waits the lease out).
    with SyncDistributedLock(client, table=table, keys=keys, lease_duration=6.0) as lease:
        with pytest.raises(PydynoxNotAcquired):
            with PydynoxLock(pdx, table=table, key=keys[index], wait_timeout=0):
                pass
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(client, table=table, key=keys[index], wait_timeout=0):
                pass
        lease.raise_if_lost()
    with PydynoxLock(pdx, table=table, key=keys[index], wait_timeout=0):
        pass


def test_the_guard_waits_for_a_holder_to_release_then_takes_every_key(
    client: DynamoDBClient, table: str
) -> None:
    keys = keys_of(3)
    holder = SyncDistributedLock(client, table=table, key=keys[1])
    holder.__enter__()

    async def release_later() -> None:
        await asyncio.sleep(0.3)
        holder.__exit__(None, None, None)

    async def acquire() -> SyncDistributedLock:
        waiter = SyncDistributedLock(client, table=table, keys=keys, wait_timeout=10)
        release = asyncio.ensure_future(release_later())
        await asyncio.to_thread(waiter.__enter__)
        await release
        waiter.__exit__(None, None, None)
        return waiter

    waiter = asyncio.run(acquire())
    assert waiter.metrics.write_requests >= 3  # refused, then won, then released


def test_abandoned_rows_are_taken_over_by_observation_all_together(
    client: DynamoDBClient, table: str
) -> None:
    keys = keys_of(4)
    for key in keys[:3]:  # a crashed holder's rows; the fourth is free
        client.sync_put_item(
            table,
            {"key": key, "owner": "crashed", "version": "v1", "lease_ms": 500, "protocol": 1},
        )
    started = time.monotonic()
    with SyncDistributedLock(client, table=table, keys=keys, wait_timeout=5) as lease:
        assert time.monotonic() - started >= 0.5  # not before the stored lease was observed
        assert {stored(client, table, key)["owner"] for key in keys} == {lease.owner}  # type: ignore[index]
    assert all(stored(client, table, key) is None for key in keys)


def test_renewals_keep_every_row_and_check_in_adds_one_check_per_key(
    client: DynamoDBClient, table: str
) -> None:
    keys = keys_of(3)
    # 4.5 s: a renewal every 1.5 s, each with 1.5 s to be answered (with a 1.5 s lease, 0.5 s
    # for the three rows' transaction was once not enough beside a busy core). The sleep
    # leaves the first renewal 1.2 s to be confirmed.
    with SyncDistributedLock(client, table=table, keys=keys, lease_duration=4.5) as lease:
        time.sleep(2.7)
        lease.raise_if_lost()
        # Renewed together, one version (a renewal may land between two of the reads).
        assert any(
            len({stored(client, table, key)["version"] for key in keys}) == 1  # type: ignore[index]
            for _ in range(5)
        )
        transaction = SyncTransaction(client)
        lease.check_in(transaction)
        transaction.put(table, {"key": "side-effect", "owner": "x"})
        transaction.commit()
    assert lease.metrics.renewals >= 1
    assert stored(client, table, "side-effect") is not None


def test_losing_one_row_loses_the_guard(client: DynamoDBClient, table: str) -> None:
    keys = keys_of(3)
    with pytest.raises(LockLost) as raised:
        # 1.5 s: the release of the two rows left gets a 0.9 s cleanup budget (0.36 s, with
        # a 0.6 s lease, ran out once beside a busy core).
        with SyncDistributedLock(client, table=table, keys=keys, lease_duration=1.5) as lease:
            client.sync_delete_item(table, {"key": keys[2]})
            assert lease.wait_lost(timeout=30)  # at 90% of the lease; 30 s: only never fails
    assert "lock on 3 keys (first " in str(raised.value)
    assert "no longer owned" in str(raised.value)
    assert all(stored(client, table, key) is None for key in keys)
