"""Read/write locks against a moto server: readers share, a writer is alone, waiting
writers go first, and pydynox 1.8 on the same key excludes both (and is excluded)."""

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
from dynalease.rwlock import (
    ReadLock,
    SyncReadLock,
    SyncWriteLock,
    WriteLock,
    distributed_read_lock,
    distributed_write_lock,
)

REGION = "us-east-1"
#: Leases of several seconds: nothing here may expire on a loaded machine.
LEASE_S = 6.0
#: For the tests that count requests: no renewal falls due (a third of the lease) and no
#: request times out and is sent again (a third too, at most 5 s) while a loaded machine
#: holds them. With 6 s, one did beside a busy core (4 requests where 3 were counted).
COUNTED_LEASE_S = 30.0


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "rwlock")


@pytest.fixture
def pdx(endpoint: str) -> pydynox.DynamoDBClient:
    return pydynox.DynamoDBClient(
        region=REGION, endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )


def stored(client: DynamoDBClient, table: str, key: str) -> dict[str, Any] | None:
    return client.sync_get_item(table, {"key": key}, consistent_read=True)


def test_readers_share_the_key_and_the_last_one_out_deletes_its_row(
    client: DynamoDBClient, table: str
) -> None:
    with SyncReadLock(client, table=table, key="cfg", lease_duration=COUNTED_LEASE_S) as first:
        with SyncReadLock(client, table=table, key="cfg", lease_duration=COUNTED_LEASE_S) as second:
            row = stored(client, table, "cfg")
            assert row is not None and row["owner"] == "dynalease-readers"
            assert set(row["readers"]) == {first.owner, second.owner}
        assert set(stored(client, table, "cfg")["readers"]) == {first.owner}  # type: ignore[index]
    assert stored(client, table, "cfg") is None
    assert second.requests == 2  # the join, then the leave (the row still had a reader)
    assert first.requests == 3  # join, leave, and the last one out deletes the row


def test_an_uncontended_read_costs_three_requests_and_a_write_four(
    client: DynamoDBClient, table: str
) -> None:
    with SyncReadLock(client, table=table, key="k", lease_duration=COUNTED_LEASE_S) as reader:
        pass
    assert reader.requests == 3  # join, leave (set now empty), delete
    with SyncWriteLock(client, table=table, key="k", lease_duration=COUNTED_LEASE_S) as writer:
        pass
    gate, main = writer._gate.metrics, writer._main.metrics
    assert gate.write_requests + main.write_requests == 4


def test_a_writer_excludes_readers_and_other_writers(client: DynamoDBClient, table: str) -> None:
    with SyncWriteLock(client, table=table, key="k", lease_duration=LEASE_S) as writer:
        assert writer.fencing_token >= 1
        with pytest.raises(LockNotAcquired, match="writer"):
            with SyncReadLock(client, table=table, key="k", wait_timeout=0):
                pass
        with pytest.raises(LockNotAcquired):
            with SyncWriteLock(client, table=table, key="k", wait_timeout=0):
                pass
    with SyncReadLock(client, table=table, key="k", lease_duration=LEASE_S) as reader:
        assert reader.writer_token() == writer.fencing_token


def test_writer_tokens_grow(client: DynamoDBClient, table: str) -> None:
    tokens = []
    for _ in range(3):
        with SyncWriteLock(client, table=table, key="k", lease_duration=LEASE_S) as writer:
            tokens.append(writer.fencing_token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_a_waiting_writer_stops_new_readers_and_gets_the_key_when_readers_leave(
    client: DynamoDBClient, table: str
) -> None:
    reader = SyncReadLock(client, table=table, key="k", lease_duration=LEASE_S)
    reader.__enter__()
    got: list[float] = []

    def write() -> None:
        with SyncWriteLock(client, table=table, key="k", lease_duration=LEASE_S, wait_timeout=30):
            got.append(time.monotonic())

    thread = threading.Thread(target=write)
    thread.start()
    # Wait (generously) until the writer's row is written: from then on readers stay out.
    end = time.monotonic() + 20
    while stored(client, table, "dynalease-writer:k") is None and time.monotonic() < end:
        time.sleep(0.05)
    with pytest.raises(LockNotAcquired, match="waits"):
        with SyncReadLock(client, table=table, key="k", wait_timeout=0):
            pass
    assert not got
    left = time.monotonic()
    reader.__exit__(None, None, None)
    thread.join(30)
    assert got and got[0] >= left


def test_pydynox_on_the_key_excludes_readers_and_writers(
    client: DynamoDBClient, table: str, pdx: pydynox.DynamoDBClient
) -> None:
    with PydynoxLock(pdx, table=table, key="k", lease_duration=LEASE_S):
        with pytest.raises(LockNotAcquired):
            with SyncReadLock(client, table=table, key="k", wait_timeout=0):
                pass
        with pytest.raises(LockNotAcquired):
            with SyncWriteLock(client, table=table, key="k", wait_timeout=0):
                pass


def test_readers_and_writers_exclude_pydynox(
    client: DynamoDBClient, table: str, pdx: pydynox.DynamoDBClient
) -> None:
    with SyncReadLock(client, table=table, key="k", lease_duration=LEASE_S):
        with pytest.raises(PydynoxNotAcquired):
            with PydynoxLock(pdx, table=table, key="k", wait_timeout=0):
                pass
    with SyncWriteLock(client, table=table, key="k", lease_duration=LEASE_S):
        with pytest.raises(PydynoxNotAcquired):
            with PydynoxLock(pdx, table=table, key="k", wait_timeout=0):
                pass
    with PydynoxLock(pdx, table=table, key="k", wait_timeout=0):
        pass  # both left: pydynox gets the key at once


def test_the_async_faces_and_decorators(client: DynamoDBClient, table: str) -> None:
    import asyncio

    async def both() -> tuple[int | None, int]:
        async with WriteLock(client, table=table, key="a", lease_duration=LEASE_S) as writer:
            token = writer.fencing_token
        async with ReadLock(client, table=table, key="a", lease_duration=LEASE_S) as reader:
            return await reader.writer_token(), token

    seen, token = asyncio.run(both())
    assert seen == token

    @distributed_read_lock(client, table=table, key="cfg:{tenant}", lease_duration=LEASE_S)
    def read(tenant: str) -> str | None:
        row = stored(client, table, f"cfg:{tenant}")
        return None if row is None else row["owner"]

    @distributed_write_lock(client, table=table, key="cfg:{tenant}", lease_duration=LEASE_S)
    async def write(tenant: str) -> str | None:
        row = stored(client, table, f"cfg:{tenant}")
        return None if row is None else row["owner"]

    assert read("t1") == "dynalease-readers"
    assert asyncio.run(write("t1")) not in (None, "dynalease-readers")


def test_bad_keys_are_refused_before_any_request(client: DynamoDBClient) -> None:
    with pytest.raises(ValueError, match="reserved"):
        SyncReadLock(client, table="locks", key="dynalease-writer:x")
    with pytest.raises(ValueError, match="too long"):
        SyncWriteLock(client, table="locks", key="x" * 2040)
