"""The lock protocol over HTTP, written once and run on moto and on dynalite.

Only scenarios without transactions: dynalite 4.0.0 has no TransactWriteItems.
Differences between the two servers are listed in docs/emulators.md; where one
matters to the protocol, the scenario shows the engine behaves the same anyway.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import pytest
from support.servers import Emulator

from dynalease.exceptions import LockLost, LockNotAcquired, MalformedLockRow, TableNotFoundError
from dynalease.lock import DistributedLock, SyncDistributedLock


def lock_row(key: str, owner: str, version: str, lease_ms: int) -> dict[str, Any]:
    return {
        "key": {"S": key},
        "owner": {"S": owner},
        "version": {"S": version},
        "lease_ms": {"N": str(lease_ms)},
        "protocol": {"N": "1"},
    }


def is_uuid4(text: str) -> bool:
    return uuid.UUID(text).version == 4 and str(uuid.UUID(text)) == text


def test_an_uncontended_acquire_writes_exactly_the_protocol_row_and_release_deletes_it(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()
    # A long lease: no renewal falls inside this short block, even on a busy machine.
    with SyncDistributedLock(emulator.client(), table=table, key="job", lease_duration=10) as lease:
        stored = emulator.row(table, "job")
        assert stored is not None
        version = stored["version"]["S"]
        # The protocol row as pydynox 1.8 writes it, plus the holder map (issue 47), which
        # pydynox ignores: who holds it, for people; nothing in the protocol reads it.
        holder = stored.pop("holder")
        assert stored == lock_row("job", lease.owner, version, 10_000)
        assert set(holder["M"]) == {"host", "pid", "acquired_at"}
        assert holder["M"]["pid"] == {"N": str(os.getpid())}
        assert is_uuid4(lease.owner) and is_uuid4(version)
    assert emulator.row(table, "job") is None
    metrics = lease.metrics
    assert (metrics.write_requests, metrics.read_requests) == (2, 0)
    # Both servers answer ReturnConsumedCapacity=TOTAL: one unit per small write.
    assert metrics.consumed_wcu == 2.0


def test_a_zero_wait_contender_fails_with_one_write_whether_or_not_the_row_comes_back(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()
    holder_client, contender_client = emulator.client(), emulator.client()
    with SyncDistributedLock(holder_client, table=table, key="k", lease_duration=5) as holder:
        contender = SyncDistributedLock(contender_client, table=table, key="k", wait_timeout=0)
        with pytest.raises(LockNotAcquired, match="held by another owner") as refused:
            with contender:
                pass
        assert holder.owner not in str(refused.value)  # another holder's token stays out
    metrics = contender.metrics
    assert metrics.write_requests == 1 and metrics.conditional_failures == 1
    # Without the row in the failure answer the engine reads it once (never re-creates).
    assert metrics.read_requests == (0 if emulator.returns_row_on_condition_failure else 1)
    with SyncDistributedLock(contender_client, table=table, key="k", wait_timeout=0):
        pass


def test_a_failed_condition_returns_the_current_row_only_where_the_server_supports_it(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()
    raw = emulator.raw
    row = lock_row("k", "someone", "v1", 30_000)
    raw.put_item(TableName=table, Item=row)
    with pytest.raises(raw.exceptions.ConditionalCheckFailedException) as failed:
        raw.put_item(
            TableName=table,
            Item=lock_row("k", "me", "v2", 30_000),
            ConditionExpression="attribute_not_exists(#k)",
            ExpressionAttributeNames={"#k": "key"},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    returned = failed.value.response.get("Item")
    assert returned == (row if emulator.returns_row_on_condition_failure else None)


def test_renewal_keeps_a_short_lease_and_changes_only_the_version(emulator: Emulator) -> None:
    table = emulator.new_table()
    holder_client = emulator.client()
    # Leases here are short for speed but leave each request lease/3 (0.6 s) on a busy machine.
    with SyncDistributedLock(holder_client, table=table, key="r", lease_duration=1.8) as lease:
        first = emulator.row(table, "r")
        time.sleep(2.0)  # three renewal intervals and more than the lease itself
        lease.raise_if_lost()
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(emulator.client(), table=table, key="r", wait_timeout=0):
                pass
        later = emulator.row(table, "r")
    assert first is not None and later is not None
    assert later["version"] != first["version"]
    assert {**later, "version": first["version"]} == first
    assert lease.metrics.renewals >= 2
    assert lease.metrics.write_requests == lease.metrics.renewals + 2


def test_an_abandoned_row_is_taken_over_only_after_its_stored_lease_was_observed(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()
    emulator.raw.put_item(TableName=table, Item=lock_row("a", "crashed", "v1", 600))
    with SyncDistributedLock(
        emulator.client(), table=table, key="a", lease_duration=2, wait_timeout=3
    ) as lease:
        stored = emulator.row(table, "a")
        assert stored is not None and stored["owner"] == {"S": lease.owner}
    assert lease.metrics.wait_ms >= 600
    assert lease.metrics.read_requests >= 1  # it had to watch the row to take it over


def test_a_renewing_holder_is_never_taken_over_by_a_waiting_contender(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()

    async def main() -> None:
        async with DistributedLock(
            emulator.client(), table=table, key="live", lease_duration=1.8
        ) as holder:
            # Waits past the holder's lease: only its renewals keep the contender out.
            contender = DistributedLock(
                emulator.client(), table=table, key="live", wait_timeout=2.0
            )
            with pytest.raises(LockNotAcquired, match="wait_timeout"):
                async with contender:
                    pass
            holder.raise_if_lost()
            stored = emulator.row(table, "live")
            assert stored is not None and stored["owner"] == {"S": holder.owner}

    asyncio.run(main())


def test_release_after_a_takeover_reports_the_loss_and_keeps_the_successors_row(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()
    successor = lock_row("s", "successor", "v9", 30_000)
    with pytest.raises(LockLost, match="another owner took"):
        with SyncDistributedLock(emulator.client(), table=table, key="s", lease_duration=5):
            emulator.raw.put_item(TableName=table, Item=successor)
    assert emulator.row(table, "s") == successor


@pytest.mark.parametrize(
    ("attribute", "value", "problem"),
    [
        ("protocol", {"N": "2"}, "protocol"),
        ("lease_ms", {"N": "50"}, "lease_ms"),
        ("lease_ms", {"S": "600"}, "lease_ms"),
        ("owner", {"N": "7"}, "owner"),
        ("version", None, "version"),
    ],
)
def test_a_malformed_row_is_never_taken_over(
    emulator: Emulator, attribute: str, value: dict[str, str] | None, problem: str
) -> None:
    table = emulator.new_table()
    row = lock_row("m", "someone", "v1", 600)
    if value is None:
        del row[attribute]
    else:
        row[attribute] = value
    emulator.raw.put_item(TableName=table, Item=row)
    with pytest.raises(MalformedLockRow, match=problem):
        with SyncDistributedLock(emulator.client(), table=table, key="m", wait_timeout=5):
            pass
    assert emulator.row(table, "m") == row


def test_a_missing_table_is_an_error_not_contention(emulator: Emulator) -> None:
    lock = SyncDistributedLock(emulator.client(), table="no_such_table", key="k", wait_timeout=2)
    with pytest.raises(TableNotFoundError, match="does not exist"):
        with lock:
            pass
    assert lock.metrics.write_requests == 1


def test_a_unicode_key_of_the_full_2048_utf8_bytes_is_stored_unchanged(
    emulator: Emulator,
) -> None:
    table = emulator.new_table()
    key = "é" * 1023 + "k:"  # 2,046 + 2 bytes
    assert len(key.encode()) == 2048
    with SyncDistributedLock(emulator.client(), table=table, key=key) as lease:
        stored = emulator.row(table, key)
        assert stored is not None and stored["key"] == {"S": key}
        assert stored["owner"] == {"S": lease.owner}
    assert emulator.row(table, key) is None


def test_fenced_locks_count_owners_in_the_row_on_both_servers(emulator: Emulator) -> None:
    table = emulator.new_table()
    client = emulator.client()
    for expected in (1, 2):
        with SyncDistributedLock(
            client, table=table, key="job", lease_duration=10, fencing=True
        ) as lease:
            assert lease.fencing_token == expected
            stored = emulator.row(table, "job")
            assert stored is not None and stored["fence"] == {"N": str(expected)}
            assert stored["protocol"] == {"N": "2"}
        assert (lease.metrics.write_requests, lease.metrics.read_requests) == (2, 0)
        assert emulator.row(table, "job") == {
            "key": {"S": "job"},
            "protocol": {"N": "2"},
            "fence": {"N": str(expected)},
        }
    # An abandoned fenced row is taken over (after its stored lease) with the next token.
    abandoned = {**lock_row("job", "crashed", "v-1", 300), "protocol": {"N": "2"}}
    emulator.raw.put_item(TableName=table, Item={**abandoned, "fence": {"N": "2"}})
    with SyncDistributedLock(client, table=table, key="job", wait_timeout=5, fencing=True) as lease:
        assert lease.fencing_token == 3
