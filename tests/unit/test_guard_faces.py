"""What the lock faces add on top of the engine: error context and dropped guards."""

from __future__ import annotations

import gc
import time

import pytest

from dynalease import SyncTransaction
from dynalease.exceptions import LockNotAcquired, TableNotFoundError
from dynalease.lock import SyncDistributedLock
from dynalease.middleware import key_hash
from dynalease.testing import MemoryBackend


def test_a_held_guard_dropped_without_exit_releases_its_row() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        SyncDistributedLock(client, table="locks", key="job", lease_duration=30).__enter__()
        gc.collect()  # the guard is unreachable now; nobody will call __exit__
        deadline = time.monotonic() + 30  # generous: only a row never released fails
        while client.sync_get_item("locks", {"key": "job"}) is not None:
            assert time.monotonic() < deadline, "the dropped guard's row was never released"
            time.sleep(0.01)
        with SyncDistributedLock(client, table="locks", key="job", wait_timeout=0):
            pass  # no observation wait: the row was deleted, not abandoned


def test_a_dropped_guard_whose_on_lost_refers_to_it_is_released_too() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))

        def hold_and_drop() -> None:
            guard = SyncDistributedLock(
                client, table="locks", key="job", on_lost=lambda error: print(guard.key)
            )
            guard.__enter__()

        hold_and_drop()
        gc.collect()  # a cycle: guard -> lease -> on_lost -> guard
        deadline = time.monotonic() + 30
        while client.sync_get_item("locks", {"key": "job"}) is not None:
            assert time.monotonic() < deadline, "the dropped guard's row was never released"
            time.sleep(0.01)


def test_an_exited_guard_is_not_released_again_when_collected() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        guard = SyncDistributedLock(client, table="locks", key="job")
        with guard:
            pass
        writes = guard.metrics.write_requests
        lease = guard._lease
        del guard
        gc.collect()
        time.sleep(0.05)
        assert lease.counters().write_requests == writes == 2


def test_a_missing_table_error_names_the_lock_and_the_table() -> None:
    with MemoryBackend() as backend, pytest.raises(TableNotFoundError) as raised:
        with SyncDistributedLock(backend.client, table="no-such-locks", key="job"):
            pass
    message = str(raised.value)
    assert "'no-such-locks'" in message and f"key_hash={key_hash('job')}" in message
    assert "sync_create_table" in message  # still says what to do


def test_a_multi_key_lock_works_on_the_memory_backend_and_checks_in_every_key() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        keys = [f"k{index}" for index in range(60)]
        with SyncDistributedLock(client, table="locks", keys=keys) as lease:
            with pytest.raises(LockNotAcquired):
                with SyncDistributedLock(client, table="locks", key="k59", wait_timeout=0):
                    pass
            transaction = SyncTransaction(client)
            lease.check_in(transaction)  # 60 ownership checks
            with pytest.raises(ValueError, match="120 would exceed DynamoDB's limit of 100"):
                lease.check_in(transaction)
            transaction.put("locks", {"key": "done"})
            transaction.commit()
        assert lease.metrics.write_requests == 2
        assert client.sync_get_item("locks", {"key": "k0"}) is None
        assert client.sync_get_item("locks", {"key": "done"}) is not None
