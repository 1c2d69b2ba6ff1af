"""Protocol rules driven with a manual clock against the in-memory table (see lease_harness)."""

from __future__ import annotations

import asyncio

import pytest
from lease_harness import Fault, Harness, lost_answer, run

from dynalease._engine import protocol as p
from dynalease._engine.clock import ManualClock, Stamp
from dynalease._engine.lease import Lease
from dynalease._engine.observations import Observations
from dynalease._engine.states import State
from dynalease.exceptions import LockLost, LockNotAcquired, MalformedLockRow, ThrottledError


def test_an_uncontended_acquire_and_release_make_two_writes() -> None:
    async def scenario(h: Harness) -> Lease:
        lease = h.lease()
        await lease.acquire()
        await lease.release()
        assert h.row() is None
        return lease

    counters = run(scenario).counters()
    assert counters.write_requests == 2 and counters.read_requests == 0


def test_validity_ends_at_ninety_percent_without_a_confirmed_renewal() -> None:
    stamp = Stamp(100.0, 5000.0)
    clock = ManualClock(start=100.0, wall_start=5000.0)
    assert stamp.remaining(clock, p.validity_span(10)) == pytest.approx(9.0)
    clock._now = 108.99
    assert stamp.remaining(clock, p.validity_span(10)) > 0
    clock._now = 109.0
    assert stamp.remaining(clock, p.validity_span(10)) == 0


def test_a_wall_clock_jump_backwards_or_forwards_ends_validity_early() -> None:
    clock = ManualClock(start=0.0, wall_start=1000.0)
    stamp = Stamp.now(clock)
    clock.jump_wall(-1)
    assert stamp.remaining(clock, 9.0) == 0
    clock.jump_wall(1 + 9)
    assert stamp.remaining(clock, 9.0) == 0


def test_renewal_runs_every_third_of_the_lease_and_keeps_the_guard_valid() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(10)
        lease.raise_if_lost()
        assert lease.counters().renewals == 10
        await lease.release()
        assert lease.counters().write_requests == lease.counters().renewals + 2

    run(scenario)


def test_takeover_waits_for_the_stored_lease_observed_unchanged() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2000)
        lease = h.lease(lease=30, wait=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(1.9)
        assert not task.done()
        await h.clock.advance(0.5)
        await task
        assert lease.state is State.HELD and lease.counters().wait_ms >= 2000
        assert h.owner_of() == lease.owner
        await lease.release()

    run(scenario)


def test_a_short_wait_gives_up_but_the_client_keeps_its_observation() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2000)
        first = h.lease(wait=1)
        task = asyncio.ensure_future(first.acquire())
        await h.clock.advance(1.5)
        with pytest.raises(LockNotAcquired):
            await task
        await h.clock.advance(1.0)
        second = h.lease(wait=0)
        await second.acquire()
        assert second.state is State.HELD
        await second.release()

    run(scenario)


def test_repeated_zero_wait_calls_on_one_client_accumulate_their_observation() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2000)
        for _ in range(4):  # each fails at once, but the first sighting is kept
            with pytest.raises(LockNotAcquired):
                await h.lease(wait=0).acquire()
            await h.clock.advance(0.5)
        last = h.lease(wait=0)
        await last.acquire()
        assert h.owner_of() == last.owner

    run(scenario)


def test_a_renewal_rejected_after_takeover_marks_the_guard_lost() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3)
        await lease.acquire()
        h.write_lock("successor", "v9", 3000)
        await h.clock.advance(1.1)
        with pytest.raises(LockLost):
            lease.raise_if_lost()
        assert lease.lost_signal.done()
        with pytest.raises(LockLost):
            await lease.release()
        assert h.owner_of() == "successor"

    run(scenario)


def test_a_malformed_row_is_never_taken_over() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("x", "v", 1000, protocol=2)
        lease = h.lease(wait=5)
        with pytest.raises(MalformedLockRow, match="protocol"):
            await h.clock.run(lease.acquire())
        assert h.owner_of() == "x"

    run(scenario)


@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem", "DeleteItem"])
def test_a_lost_response_is_reconciled_by_a_strong_read(operation: str) -> None:
    async def scenario(h: Harness) -> Lease:
        h.transport.faults.append(lost_answer(operation))
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(1.05)  # one renewal
        lease.raise_if_lost()
        await lease.release()
        assert h.row() is None
        assert "GetItem" in h.transport.operations()
        return lease

    counters = run(scenario).counters()
    assert counters.request_failures == 1 and not counters.lost


def test_a_failed_renewal_is_retried_and_the_lease_is_lost_at_ninety_percent() -> None:
    async def scenario(h: Harness) -> None:
        throttled = ThrottledError("throttled", operation="UpdateItem")
        h.transport.always["UpdateItem"] = Fault("UpdateItem", commit=False, error=throttled)
        lease = h.lease(lease=12)
        await lease.acquire()
        await h.clock.advance(10.79)
        lease.raise_if_lost()
        # renewals start at 4 s and retry every min(12/12, 1 s) = 1 s
        assert h.transport.operations().count("UpdateItem") == 7
        await h.clock.advance(0.02)
        with pytest.raises(LockLost):
            lease.raise_if_lost()

    run(scenario)


def test_a_lease_on_its_own_observation_cache_sees_nothing_of_another() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2000)
        watcher = h.lease(wait=1)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(watcher.acquire())
        await h.clock.advance(1.5)
        stranger = h.lease(wait=0, observations=Observations())  # another client
        with pytest.raises(LockNotAcquired):
            await stranger.acquire()

    run(scenario)
