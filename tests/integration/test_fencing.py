"""Fenced locks (``fencing=True``) on a moto server: tokens, rows, renewals, takeovers, mixing.

The tokens of one key strictly increase across every change of owner; the
rows are protocol 2 (a live row has the protocol-1 attributes plus ``fence``,
a released one is free: key, protocol, fence); an uncontended fenced cycle is
two writes, as an unfenced one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease._engine import protocol as p
from dynalease._engine.store import Request
from dynalease.exceptions import FencingMismatch, FencingUnavailable
from dynalease.lock import DistributedLock, SyncDistributedLock, current_guard, distributed_lock

# Long enough that a renewal's request timeout (a third of the lease) outlasts a slow
# moto answer on a loaded 2-core CI host: at 0.6 s three 0.2 s timeouts in a row lost it.
LEASE_S = 1.5


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "fence")


def row(client: DynamoDBClient, table: str, key: str) -> dict[str, Any] | None:
    answer = client._items.handle(
        Request("GetItem", {"TableName": table, "Key": {"key": {"S": key}}, "ConsistentRead": True})
    )
    item = answer.get("Item")
    return item if isinstance(item, dict) else None


def test_tokens_increase_across_acquisitions_and_releases_leave_a_free_row(
    client: DynamoDBClient, table: str
) -> None:
    tokens = []
    for _ in range(3):
        with SyncDistributedLock(client, table=table, key="job", fencing=True) as lease:
            tokens.append(lease.fencing_token)
            live = row(client, table, "job")
            assert live is not None and set(live) == p.FENCED_ROW_ATTRS | {p.HOLDER_ATTR}
            assert live["protocol"] == {"N": "2"}
            assert live["fence"] == {"N": str(lease.fencing_token)}
            assert live["owner"] == {"S": lease.owner}
        assert lease.metrics.write_requests == 2  # acquire and release: no extra request
        assert lease.metrics.read_requests == 0
        assert lease.fencing_token == tokens[-1]  # still readable after release
        free = row(client, table, "job")
        assert free == {
            "key": {"S": "job"},
            "protocol": {"N": "2"},
            "fence": {"N": str(tokens[-1])},
        }
    assert tokens == [1, 2, 3]


def test_the_async_face_and_the_decorator_take_fenced_locks(
    client: DynamoDBClient, table: str
) -> None:
    async def hold() -> int:
        async with DistributedLock(client, table=table, key="a", fencing=True) as lease:
            return lease.fencing_token

    assert asyncio.run(hold()) == 1
    assert asyncio.run(hold()) == 2

    @distributed_lock(client, table=table, key="job:{name}", fencing=True)
    def job(name: str) -> int:
        return current_guard().fencing_token

    @distributed_lock(client, table=table, key="job:{name}", fencing=True)
    async def async_job(name: str) -> int:
        return current_guard().fencing_token

    assert job("x") == 1
    assert asyncio.run(async_job("x")) == 2
    with pytest.raises(LookupError, match="inside a function decorated"):
        current_guard()
    assert row(client, table, "job:x") == {
        "key": {"S": "job:x"},
        "protocol": {"N": "2"},
        "fence": {"N": "2"},
    }


def test_renewals_keep_the_token(client: DynamoDBClient, table: str) -> None:
    with SyncDistributedLock(
        client, table=table, key="job", lease_duration=LEASE_S, fencing=True
    ) as lease:
        # Until two renewals were seen, not for a fixed time: on a loaded machine fewer
        # renewals fit in one. The limit only ends a lease that never renews.
        versions = set()
        give_up = time.monotonic() + 30
        while len(versions) < 3 and time.monotonic() < give_up:
            item = row(client, table, "job")
            assert item is not None
            versions.add(item["version"]["S"])
            assert item["fence"] == {"N": "1"}
            time.sleep(0.05)
        lease.raise_if_lost()
        assert lease.metrics.renewals >= 2
        assert len(versions) >= 3
        assert lease.fencing_token == 1


def test_an_abandoned_fenced_row_is_taken_over_with_the_next_token(
    client: DynamoDBClient, table: str
) -> None:
    # A holder that crashed: a live fenced row nobody renews, its counter at 41.
    client._items.handle(
        Request(
            "PutItem",
            {
                "TableName": table,
                "Item": {
                    "key": {"S": "job"},
                    "owner": {"S": p.new_token()},
                    "version": {"S": p.new_token()},
                    "lease_ms": {"N": "300"},
                    "protocol": {"N": "2"},
                    "fence": {"N": "41"},
                },
            },
        )
    )
    with SyncDistributedLock(client, table=table, key="job", wait_timeout=5, fencing=True) as lease:
        assert lease.fencing_token == 42
        assert lease.metrics.read_requests >= 1  # it observed the row before taking over


def test_fenced_and_unfenced_locks_refuse_each_others_rows(
    client: DynamoDBClient, table: str
) -> None:
    with SyncDistributedLock(client, table=table, key="fenced", fencing=True):
        pass  # leaves a free fenced row
    with pytest.raises(FencingMismatch, match="fencing=True"):
        with SyncDistributedLock(client, table=table, key="fenced", wait_timeout=1):
            pass
    assert row(client, table, "fenced") == {
        "key": {"S": "fenced"},
        "protocol": {"N": "2"},
        "fence": {"N": "1"},
    }
    with SyncDistributedLock(client, table=table, key="plain"):
        with pytest.raises(FencingMismatch, match="unfenced"):
            with SyncDistributedLock(
                client, table=table, key="plain", wait_timeout=1, fencing=True
            ):
                pass
    assert row(client, table, "plain") is None  # the unfenced holder deleted its row


def test_an_unfenced_guard_has_no_token(client: DynamoDBClient, table: str) -> None:
    guard = SyncDistributedLock(client, table=table, key="job", fencing=True)
    with pytest.raises(FencingUnavailable, match="not acquired"):
        guard.fencing_token  # noqa: B018
    with SyncDistributedLock(client, table=table, key="job") as lease:
        assert not lease.fencing
        with pytest.raises(FencingUnavailable, match="without fencing=True"):
            lease.fencing_token  # noqa: B018
    with pytest.raises(TypeError, match="fencing must be True or False"):
        SyncDistributedLock(client, table=table, key="job", fencing="yes")  # type: ignore[arg-type]
