"""Semaphores on MemoryBackend (moto's DynamoDB in this process): the faces, end to end."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dynalease import (
    DistributedSemaphore,
    LockNotAcquired,
    SyncDistributedSemaphore,
    SyncTransaction,
    distributed_semaphore,
)
from dynalease.exceptions import LockOwnershipLost
from dynalease.testing import MemoryBackend


@pytest.fixture
def backend() -> MemoryBackend:
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks", partition_key=("key", "S"))
        yield backend  # type: ignore[misc]


def test_at_most_n_sync_guards_hold_and_a_release_frees_a_permit(backend: MemoryBackend) -> None:
    client = backend.client
    options = {"table": "locks", "key": "reindex", "permits": 3, "wait_timeout": 0}
    held = [SyncDistributedSemaphore(client, **options) for _ in range(3)]  # type: ignore[arg-type]
    for guard in held:
        assert guard.permit_key is None
        guard.__enter__()
    assert sorted(g.permit_key or "" for g in held) == [
        f"dynalease-permit:{i}:reindex" for i in (1, 2, 3)
    ]
    assert all(g.key == "reindex" and g.permits == 3 for g in held)
    fourth = SyncDistributedSemaphore(client, **options)  # type: ignore[arg-type]
    with pytest.raises(LockNotAcquired, match="semaphore key_hash="):
        fourth.__enter__()
    first = held.pop(0)
    first.__exit__(None, None, None)
    with SyncDistributedSemaphore(client, **options) as again:  # type: ignore[arg-type]
        assert again.permit_key == first.permit_key  # the one free permit
    for guard in held:
        guard.__exit__(None, None, None)
    assert backend.tables()["locks"] == []


def test_async_guards_and_the_decorator_never_exceed_n(backend: MemoryBackend) -> None:
    client = backend.client
    inside = 0
    most = 0
    lock = threading.Lock()

    @distributed_semaphore(client, table="locks", key="partner:{name}", permits=2, wait_timeout=5)
    async def call(name: str) -> str:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        await asyncio.sleep(0.02)
        with lock:
            inside -= 1
        return name

    async def main() -> list[str]:
        async with DistributedSemaphore(client, table="locks", key="x", permits=1) as guard:
            assert guard.permit_key == "dynalease-permit:1:x"
        return list(await asyncio.gather(*(call("acme") for _ in range(6))))

    assert asyncio.run(main()) == ["acme"] * 6
    assert most == 2
    assert backend.tables()["locks"] == []


def test_check_in_conditions_on_the_permit_row(backend: MemoryBackend) -> None:
    client = backend.client
    client.sync_create_table("out", partition_key=("id", "S"))
    with SyncDistributedSemaphore(client, table="locks", key="k", permits=2) as guard:
        with SyncTransaction(client) as transaction:
            guard.check_in(transaction)
            transaction.put("out", {"id": "1"})
    assert client.sync_get_item("out", {"id": "1"}) == {"id": "1"}
    with (
        pytest.raises(LockOwnershipLost),
        SyncDistributedSemaphore(client, table="locks", key="k", permits=2) as guard,
    ):
        row = {"owner": "next", "version": "v", "lease_ms": 1000, "protocol": 1}
        client.sync_put_item("locks", {"key": guard.permit_key, **row})
        with SyncTransaction(client) as transaction:
            guard.check_in(transaction)
            transaction.put("out", {"id": "2"})
    assert client.sync_get_item("out", {"id": "2"}) is None


def test_bad_arguments_fail_before_any_request(backend: MemoryBackend) -> None:
    client = backend.client
    with pytest.raises(ValueError, match="between 1 and 100"):
        SyncDistributedSemaphore(client, table="locks", key="k", permits=0)
    with pytest.raises(ValueError, match="between 1 and 100"):
        distributed_semaphore(client, table="locks", key="k:{a}", permits=500)
    with pytest.raises(ValueError, match="reserved"):
        SyncDistributedSemaphore(client, table="locks", key="dynalease-permit:1:k", permits=2)


def test_sync_decorated_calls_from_threads_never_exceed_n(backend: MemoryBackend) -> None:
    client = backend.client
    inside = most = 0
    lock = threading.Lock()
    done = threading.Event()

    @distributed_semaphore(client, table="locks", key="jobs", permits=2, wait_timeout=10)
    def job() -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        done.wait(0.02)
        with lock:
            inside -= 1

    threads = [threading.Thread(target=job) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert most == 2
    assert backend.tables()["locks"] == []
