"""A lease's tally and the LockMetrics snapshot it makes."""

from __future__ import annotations

import dataclasses

from dynalease._engine.counters import Tally
from dynalease.metrics import LockMetrics


def test_a_snapshot_carries_every_count_of_the_tally() -> None:
    tally = Tally()
    for number, name in enumerate(Tally.__annotations__, start=1):
        setattr(tally, name, number * 10)
    metrics = tally.snapshot(lost=True)
    expected = {
        name: getattr(tally, name)
        for name in (field.name for field in dataclasses.fields(LockMetrics))
        if name not in {"write_requests", "consumed_wcu", "lost"}
    }
    assert {name: getattr(metrics, name) for name in expected} == expected
    assert metrics.write_requests == tally.write_requests + tally.caller_writes
    assert metrics.consumed_wcu == tally.consumed_wcu + tally.caller_wcu
    assert metrics.lost is True
    assert set(expected) | {"write_requests", "consumed_wcu", "lost"} == {
        field.name for field in dataclasses.fields(LockMetrics)
    }


def test_tallies_count_apart() -> None:
    first, second = Tally(), Tally()
    first.renewals += 1
    first.wait_ms += 2.5
    assert (first.renewals, first.wait_ms) == (1, 2.5)
    assert second.snapshot(lost=False) == LockMetrics()


def test_every_snapshot_is_a_new_frozen_lock_metrics() -> None:
    tally = Tally()
    first = tally.snapshot(lost=False)
    tally.renewals += 1
    second = tally.snapshot(lost=False)
    assert isinstance(first, LockMetrics) and first is not second
    assert (first.renewals, second.renewals) == (0, 1)
    assert first == LockMetrics()
