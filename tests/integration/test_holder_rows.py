"""The holder map through the public faces, on the moto server: who holds a row, and what
they said about it, at no extra request.

Leases are 3 s (a renewal every second) so a hold spans renewals quickly; every wait for
a renewal to show is bounded at 10x its expected time, for a loaded 2-core machine.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from support.tables import fresh_lock_table

from dynalease import (
    DynamoDBClient,
    SyncDistributedLock,
    SyncDistributedSemaphore,
    distributed_lock,
    distributed_semaphore,
)
from dynalease.fair import SyncFairLock
from dynalease.lock import current_guard

LEASE_S = 3.0
BOUND_S = 10 * LEASE_S


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "holder")


def holder(client: DynamoDBClient, table: str, key: str) -> dict[str, Any]:
    item = client.sync_get_item(table, {"key": key}, consistent_read=True)
    assert item is not None
    return dict(item["holder"])


def test_metadata_set_and_updated_while_held_costs_no_request(
    client: DynamoDBClient, table: str
) -> None:
    guard = SyncDistributedLock(
        client, table=table, key="import", lease_duration=LEASE_S, metadata={"batch": 0}
    )
    with guard:
        first = holder(client, table, "import")
        assert first["pid"] == os.getpid() and first["host"] == os.uname().nodename
        assert first["metadata"] == {"batch": 0}
        guard.set_metadata({"batch": 1, "of": 4})
        deadline = time.monotonic() + BOUND_S
        while holder(client, table, "import")["metadata"] != {"batch": 1, "of": 4}:
            assert time.monotonic() < deadline, "the next renewal did not carry the metadata"
            time.sleep(0.1)
        after = holder(client, table, "import")
        assert after["acquired_at"] == first["acquired_at"]  # the rest is kept
    metrics = guard.metrics
    # requests per cycle: the acquire, one write per renewal, the release; no read
    assert metrics.read_requests == 0
    assert metrics.write_requests == 2 + metrics.renewals


def test_a_semaphore_permit_row_names_its_holder(client: DynamoDBClient, table: str) -> None:
    with SyncDistributedSemaphore(
        client, table=table, key="api", permits=2, metadata={"who": "worker-1"}
    ) as permit:
        assert permit.permit_key is not None
        assert holder(client, table, permit.permit_key)["metadata"] == {"who": "worker-1"}


def test_a_fair_lock_row_names_its_holder(client: DynamoDBClient, table: str) -> None:
    with SyncFairLock(client, table=table, key="report", metadata={"who": "worker-2"}):
        assert holder(client, table, "report")["metadata"] == {"who": "worker-2"}


def test_the_decorators_take_their_guards_metadata(client: DynamoDBClient, table: str) -> None:
    """Each decorator takes its guards' options: each call's row names the holder."""

    @distributed_lock(client, table=table, key="sync:{name}", metadata={"job": "sync"})
    def locked(name: str) -> dict[str, Any]:
        return holder(client, table, f"sync:{name}")

    @distributed_semaphore(client, table=table, key="api", permits=2, metadata={"job": "api"})
    def permitted() -> dict[str, Any]:
        guard = current_guard()
        assert isinstance(guard, SyncDistributedSemaphore) and guard.permit_key is not None
        return holder(client, table, guard.permit_key)

    assert locked("a")["metadata"] == {"job": "sync"}
    assert permitted()["metadata"] == {"job": "api"}
    with pytest.raises(ValueError, match="metadata"):
        distributed_lock(client, table=table, key="k", metadata={"x": "y" * 600})


def test_bad_metadata_is_refused_before_any_request(client: DynamoDBClient, table: str) -> None:
    with pytest.raises(ValueError, match="over the limit of 512"):
        SyncDistributedLock(client, table=table, key="k", metadata={"x": "y" * 600})
    with SyncDistributedLock(client, table=table, key="k") as guard:
        with pytest.raises(TypeError, match="JSON values"):
            guard.set_metadata({"when": object()})
    assert guard.metrics.write_requests == 2
