"""OpenTelemetry metrics of guards, read with the SDK's in-memory reader (MemoryBackend).

Nothing is recorded, and nothing of OpenTelemetry is touched, until a meter provider is
set; then each acquisition, release, takeover and loss is counted with its table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from support.tracing import recording_metrics

from dynalease import DynamoDBClient, SyncDistributedLock, _meters
from dynalease.admin import break_lock
from dynalease.exceptions import LockLost, LockNotAcquired
from dynalease.testing import MemoryBackend

TABLE = "locks"


@pytest.fixture
def client() -> Iterator[DynamoDBClient]:
    with MemoryBackend() as backend:
        backend.client.sync_create_table(TABLE, partition_key=("key", "S"))
        yield backend.client


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    yield from recording_metrics(monkeypatch)


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Each metric's data points, by name."""
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def total(reader: InMemoryMetricReader, name: str, **attributes: str) -> float:
    return sum(
        getattr(point, "value", getattr(point, "count", 0))
        for point in points(reader).get(name, [])
        if all(point.attributes.get(f"dynalease.{k}") == v for k, v in attributes.items())
    )


def test_without_a_meter_provider_nothing_is_metered(client: DynamoDBClient) -> None:
    guard = SyncDistributedLock(client, table=TABLE, key="k")
    assert _meters.acquiring(guard._lease) is _meters._UNMETERED


def test_a_cycle_records_the_wait_the_acquisition_and_the_hold(
    client: DynamoDBClient, reader: InMemoryMetricReader
) -> None:
    with SyncDistributedLock(client, table=TABLE, key="k"):
        pass
    assert total(reader, "dynalease.lock.acquisitions", outcome="acquired", table=TABLE) == 1
    assert total(reader, "dynalease.lock.wait", outcome="acquired") == 1  # one sample
    assert total(reader, "dynalease.lock.hold", table=TABLE) == 1
    assert total(reader, "dynalease.lock.contended") == 0
    assert total(reader, "dynalease.lock.takeovers") == 0


def test_contention_takeovers_and_losses_are_counted(
    client: DynamoDBClient, reader: InMemoryMetricReader
) -> None:
    with SyncDistributedLock(client, table=TABLE, key="busy"):
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(client, table=TABLE, key="busy", wait_timeout=0):
                pass
    assert total(reader, "dynalease.lock.acquisitions", outcome="contention") == 1

    client.sync_put_item(  # a dead holder's row with a 0.1 s lease
        TABLE,
        {"key": "dead", "owner": str(uuid.uuid4()), "version": "v", "lease_ms": 100, "protocol": 1},
    )
    with SyncDistributedLock(client, table=TABLE, key="dead", wait_timeout=10):
        pass
    assert total(reader, "dynalease.lock.contended") == 1
    assert total(reader, "dynalease.lock.takeovers") == 1

    guard = SyncDistributedLock(client, table=TABLE, key="broken", lease_duration=1.5)
    with pytest.raises(LockLost):
        with guard:
            break_lock(client, table=TABLE, key="broken")
            assert guard.wait_lost(15)  # its next renewal (every 0.5 s) finds the row gone
    assert total(reader, "dynalease.lock.losses", table=TABLE) == 1
