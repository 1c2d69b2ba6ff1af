"""``break_lock``: a force release of exactly the row read, on the moto server.

Holders renew every second (3 s leases); each wait for a renewal or a loss is bounded
at 10x its expected time, for a loaded 2-core machine.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient, SyncDistributedLock, admin
from dynalease._engine.store import ConditionFailed, Request
from dynalease.admin import break_lock, read_lock_row
from dynalease.exceptions import LockNotBroken
from dynalease.fencing import fence_dynamodb_write

LEASE_S = 3.0
BOUND_S = 10 * LEASE_S


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "break")


def version_of(client: DynamoDBClient, table: str, key: str) -> str | None:
    item = read_lock_row(client, table, key)
    return None if item is None else str(item["version"]["S"])


def wait_for_renewal(client: DynamoDBClient, table: str, key: str, seen: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while version_of(client, table, key) == seen:
        assert time.monotonic() < deadline, "the holder did not renew"
        time.sleep(0.05)


def test_a_break_deletes_the_row_returns_its_holder_and_the_holder_finds_out(
    client: DynamoDBClient, table: str
) -> None:
    guard = SyncDistributedLock(
        client, table=table, key="job", lease_duration=LEASE_S, metadata={"run": 7}
    )
    with pytest.raises(Exception, match="no longer owned"):  # LockLost at the release
        with guard:
            broken = break_lock(client, table=table, key="job")
            assert broken.owner == guard.owner and broken.lease_ms == 3000
            assert broken.holder["metadata"] == {"run": 7} and "pid" in broken.holder
            assert read_lock_row(client, table, "job") is None
            assert guard.wait_lost(BOUND_S)  # its next renewal finds the row gone


def test_a_holder_that_renews_between_the_read_and_the_delete_is_not_broken(
    client: DynamoDBClient, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_read = admin.read_lock_row

    def read_then_let_it_renew(*args: Any) -> dict[str, Any] | None:
        item = real_read(*args)
        assert item is not None
        wait_for_renewal(client, table, "job", item["version"]["S"])
        return item

    with SyncDistributedLock(client, table=table, key="job", lease_duration=LEASE_S) as guard:
        monkeypatch.setattr(admin, "read_lock_row", read_then_let_it_renew)
        with pytest.raises(LockNotBroken, match="between the read and the delete"):
            break_lock(client, table=table, key="job")
        monkeypatch.undo()
        assert read_lock_row(client, table, "job") is not None
        guard.raise_if_lost()


def test_a_row_that_changed_since_it_was_shown_is_not_broken(
    client: DynamoDBClient, table: str
) -> None:
    with SyncDistributedLock(client, table=table, key="job", lease_duration=LEASE_S) as guard:
        shown = version_of(client, table, "job")
        assert shown is not None
        wait_for_renewal(client, table, "job", shown)
        with pytest.raises(LockNotBroken, match="changed after it was shown"):
            break_lock(client, table=table, key="job", owner=guard.owner, version=shown)
        guard.raise_if_lost()


def test_a_broken_fenced_key_keeps_its_fence_so_the_evicted_holders_writes_stay_refused(
    client: DynamoDBClient, table: str
) -> None:
    items = f"items-{uuid.uuid4().hex[:8]}"
    client.sync_create_table(items, partition_key=("id", "S"), wait=True)

    def write(token: int, state: str) -> None:
        request = {"TableName": items, "Item": {"id": {"S": "order-1"}, "state": {"S": state}}}
        client._items.handle(Request("PutItem", fence_dynamodb_write(request, token)))

    evicted = SyncDistributedLock(
        client, table=table, key="job", lease_duration=LEASE_S, fencing=True
    )
    evicted.__enter__()
    try:
        write(evicted.fencing_token, "written by the stuck holder")
        broken = break_lock(client, table=table, key="job")
        assert broken.fence == evicted.fencing_token
        free = read_lock_row(client, table, "job")
        assert free == {
            "key": {"S": "job"},
            "protocol": {"N": "2"},
            "fence": {"N": str(evicted.fencing_token)},
        }
        with SyncDistributedLock(client, table=table, key="job", fencing=True) as successor:
            assert successor.fencing_token == evicted.fencing_token + 1
            write(successor.fencing_token, "written by the successor")
            with pytest.raises(ConditionFailed):
                write(evicted.fencing_token, "a stale write after the break")
    finally:
        assert evicted.wait_lost(BOUND_S)
        with pytest.raises(Exception, match="no longer owned"):
            evicted.__exit__(None, None, None)


def test_nothing_to_break_and_bad_input_change_nothing(client: DynamoDBClient, table: str) -> None:
    with pytest.raises(LockNotBroken, match="nothing holds it"):
        break_lock(client, table=table, key="never-held")
    with pytest.raises(ValueError, match="both owner and version"):
        break_lock(client, table=table, key="k", owner="someone")
