"""MemoryBackend runs the real protocol code on moto's DynamoDB, in this process.

Contention, renewal, decorators, check_in; and what the backend itself promises:
isolated tables, fresh copies from ``tables()``, DynamoDB's own expression and
error handling, one request at a time, moto imported only when needed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import boto3
import pytest
from moto import mock_aws

from dynalease.exceptions import (
    LockNotAcquired,
    LockOwnershipLost,
    TableNotFoundError,
    TransactionCanceledException,
    ValidationError,
)
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
        assert lease.metrics.consumed_wcu == 0  # MemoryBackend reports zero real capacity
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
            return list(await asyncio.gather(synchronize("1"), synchronize("1"), synchronize("2")))

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
            # Real time: a 1.2 s lease renews every 0.4 s, and each renewal may take 0.4 s
            # (a 0.3 s lease, 0.1 s each, was lost once on a loaded two-core machine).
            async with DistributedLock(client, table="locks", key="r", lease_duration=1.2) as lease:
                await asyncio.sleep(1.8)
            return lease

        lease = asyncio.run(main())
        assert lease.metrics.renewals >= 2
        assert lease.metrics.write_requests == lease.metrics.renewals + 2


def test_a_guard_with_renewals_and_reads_reports_zero_capacity() -> None:
    """The reference's promise: MemoryBackend reports zero real capacity, renewals included."""
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))

        async def main() -> tuple[DistributedLock, DistributedLock]:
            holder = DistributedLock(client, table="locks", key="c", lease_duration=1.2)
            waiter = DistributedLock(client, table="locks", key="c", wait_timeout=5)
            async with holder:
                waiting = asyncio.create_task(waiter.__aenter__())
                await asyncio.sleep(1.8)  # the holder renews; the waiter reads the row
            await waiting
            await waiter.__aexit__(None, None, None)
            return holder, waiter

        holder, waiter = asyncio.run(main())
        assert holder.metrics.renewals >= 1
        assert waiter.metrics.read_requests >= 1
        for lease in (holder, waiter):
            assert (lease.metrics.consumed_rcu, lease.metrics.consumed_wcu) == (0, 0)


def test_tables_lists_every_item_as_fresh_copies_and_clear_drops_them() -> None:
    backend = MemoryBackend()
    client = backend.client
    client.sync_create_table("jobs", partition_key=("id", "S"))
    client.sync_create_table("empty", partition_key=("id", "S"))
    client.sync_put_item("jobs", {"id": "1", "tags": {"a": "b"}, "blob": b"\x00\x01", "n": 2})
    view = backend.tables()
    # Plain Python values, as sync_get_item returns them (not AttributeValues).
    assert view == {
        "empty": [],
        "jobs": [{"id": "1", "tags": {"a": "b"}, "blob": b"\x00\x01", "n": 2}],
    }
    assert view["jobs"][0] == client.sync_get_item("jobs", {"id": "1"})
    view["jobs"][0]["tags"].clear()
    assert client.sync_get_item("jobs", {"id": "1"}) == {
        "id": "1",
        "tags": {"a": "b"},
        "blob": b"\x00\x01",
        "n": 2,
    }
    backend.clear()
    assert backend.tables() == {}
    assert not client.sync_table_exists("jobs")


def test_the_context_manager_drops_every_table_on_exit() -> None:
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks", partition_key=("key", "S"))
    assert backend.tables() == {}


def test_two_backends_and_moto_mock_aws_never_share_tables() -> None:
    first, second = MemoryBackend(), MemoryBackend()
    first.client.sync_create_table("locks", partition_key=("key", "S"))
    assert second.tables() == {}
    with mock_aws():
        users = boto3.client("dynamodb", region_name="us-east-1")
        assert users.list_tables()["TableNames"] == []  # the backend's table is not there
        users.create_table(
            TableName="theirs",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        with SyncDistributedLock(first.client, table="locks", key="k"):
            pass
    # mock_aws reset its own backends on exit; ours keeps its table
    assert list(first.tables()) == ["locks"]


def test_expressions_and_errors_are_dynamodbs() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("counters", partition_key=("id", "S"))
        client.sync_put_item("counters", {"id": "c", "n": 1, "seen": {"a"}})
        with SyncTransaction(client) as transaction:
            transaction.update(
                "counters",
                {"id": "c"},
                update="SET #n = #n + :one ADD seen :b",
                condition="size(seen) = :size",
                names={"#n": "n"},
                values={":one": 1, ":b": {"b"}, ":size": 1},
            )
        assert client.sync_get_item("counters", {"id": "c"}) == {
            "id": "c",
            "n": 2,
            "seen": {"a", "b"},
        }
        with pytest.raises(TransactionCanceledException) as cancelled:
            with SyncTransaction(client) as transaction:
                transaction.put("counters", {"id": "d"})
                transaction.condition_check(
                    "counters",
                    {"id": "c"},
                    condition="#n > :n",
                    names={"#n": "n"},
                    values={":n": 5},
                )
        assert [reason["Code"] for reason in cancelled.value.reasons] == [
            "None",
            "ConditionalCheckFailed",
        ]
        assert client.sync_get_item("counters", {"id": "d"}) is None
        with pytest.raises(ValidationError):
            with SyncTransaction(client) as transaction:
                transaction.update("counters", {"id": "c"}, update="SET = nonsense")
        with pytest.raises(TableNotFoundError):
            client.sync_get_item("missing", {"id": "c"})


def test_racing_conditional_puts_from_8_threads_let_exactly_one_win() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("claims", partition_key=("id", "S"))
        start, winners = threading.Barrier(8), []

        def claim(worker: int) -> None:
            start.wait()
            try:
                with SyncTransaction(client) as transaction:
                    transaction.put(
                        "claims",
                        {"id": "only", "worker": worker},
                        condition="attribute_not_exists(id)",
                    )
                winners.append(worker)
            except TransactionCanceledException:
                pass

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(winners) == 1
        assert client.sync_get_item("claims", {"id": "only"}) == {
            "id": "only",
            "worker": winners[0],
        }


def test_moto_is_imported_only_when_a_backend_is_created() -> None:
    code = (
        "import sys, dynalease, dynalease.testing, dynalease.lock\n"
        "assert 'moto' not in sys.modules, 'imported too early'\n"
        "dynalease.testing.MemoryBackend()\n"
        "assert 'moto' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_moto_the_backend_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "dynalease.testing._moto", raising=False)
    monkeypatch.delitem(sys.modules, "dynalease.testing._transport", raising=False)
    monkeypatch.setitem(sys.modules, "moto", None)
    monkeypatch.setitem(sys.modules, "moto.core.request", None)
    with pytest.raises(ImportError, match=r"pip install 'dynalease\[testing\]'"):
        MemoryBackend()
