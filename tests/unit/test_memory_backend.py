"""MemoryBackend runs the real protocol code: contention, renewal, decorators, check_in."""

from __future__ import annotations

import asyncio

import pytest

from dynalease.exceptions import LockNotAcquired, LockOwnershipLost, TransactionCanceledException
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock
from dynalease.testing import MemoryBackend
from dynalease.transaction import SyncTransaction


def test_the_sync_transaction_example_runs_in_memory() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("script_locks", partition_key=("key", "S"))
        client.sync_create_table("import_results", partition_key=("job_id", "S"))
        with SyncDistributedLock(client, table="script_locks", key="import:daily") as lease:
            with SyncTransaction(client) as transaction:
                lease.check_in(transaction)
                transaction.put("import_results", {"job_id": "daily", "summary": "ok"})
        assert lease.metrics.write_requests == 2
        assert lease.metrics.consumed_wcu == 0
        assert client.sync_get_item("import_results", {"job_id": "daily"}) == {
            "job_id": "daily",
            "summary": "ok",
        }


def test_contention_and_decorators_work_in_memory() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))

        @distributed_lock(client, table="locks", key="customer:{customer_id}", wait_timeout=2)
        async def synchronize(customer_id: str) -> str:
            await asyncio.sleep(0.01)
            return customer_id

        async def main() -> list[str]:
            return await asyncio.gather(synchronize("1"), synchronize("1"), synchronize("2"))

        assert asyncio.run(main()) == ["1", "1", "2"]
        with SyncDistributedLock(client, table="locks", key="k"):
            with pytest.raises(LockNotAcquired):
                with SyncDistributedLock(client, table="locks", key="k", wait_timeout=0):
                    pass


def test_check_in_is_rejected_in_memory_after_the_row_moves_on() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        client.sync_create_table("out", partition_key=("id", "S"))
        with (
            pytest.raises(LockOwnershipLost),
            SyncDistributedLock(client, table="locks", key="k") as lease,
        ):
            client.sync_put_item(
                "locks",
                {"key": "k", "owner": "next", "version": "v", "lease_ms": 1000, "protocol": 1},
            )
            with SyncTransaction(client) as transaction:
                lease.check_in(transaction)
                transaction.put("out", {"id": "1"})
        assert client.sync_get_item("out", {"id": "1"}) is None
        assert issubclass(LockOwnershipLost, TransactionCanceledException)


def test_a_table_with_the_wrong_schema_is_a_clear_error() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("wrong", partition_key=("id", "S"))
        with pytest.raises(ValueError, match="partition key named 'key'"):
            with SyncDistributedLock(client, table="wrong", key="k"):
                pass


def test_renewal_runs_in_memory() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))

        async def main() -> DistributedLock:
            async with DistributedLock(client, table="locks", key="r", lease_duration=0.3) as lease:
                await asyncio.sleep(0.45)
            return lease

        lease = asyncio.run(main())
        assert lease.metrics.renewals >= 2
        assert lease.metrics.write_requests == lease.metrics.renewals + 2
