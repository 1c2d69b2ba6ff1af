"""The arithmetic behind ``doctor --measure``'s advice."""

from __future__ import annotations

from dynalease._tooling.measure import Timings, percentile, render, shortest_lease


def test_percentiles_are_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([7.0], 0.99) == 7.0


def test_the_shortest_lease_keeps_its_request_bound_three_times_the_p99() -> None:
    assert shortest_lease(0.010) == 1.0  # never under a second
    assert shortest_lease(0.5) == 5.0  # L/3 = 1.67 s >= 3 x 0.5 s
    assert shortest_lease(0.5) / 3 >= 3 * 0.5


def test_the_table_lists_request_types_in_the_lock_cycles_order() -> None:
    timings = Timings()
    for operation in ("DeleteItem", "PutItem", "UpdateItem"):
        timings.add(operation, 0.002)
    lines = render(timings, 1).splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["acquire", "renew", "release"]
