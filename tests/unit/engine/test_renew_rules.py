"""Validity and renewal under docs/protocol.md, and how a loss is noticed and signalled.

Each test runs one lease on the test's own event loop (see ``lease_harness``):
time moves only when the test says so, and every request is recorded with the
clock time it was sent, so timing rules are checked exactly.
"""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest
from support.lease_harness import Fault, Harness, hang, lost_answer, run
from support.manual_clock import ManualClock

from dynalease._engine import protocol as p
from dynalease._engine.clock import Stamp
from dynalease._engine.states import State
from dynalease.exceptions import LockLost, RequestFailedError, ThrottledError

# --- validity ------------------------------------------------------------------------------


def test_validity_is_measured_from_when_the_acquire_was_sent() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", before=1.0, after=1.0))
        lease = h.lease(lease=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(2.0)
        await task
        assert lease.time_left() == pytest.approx(9.0 - 2.0)
        await h.clock.advance(6.99)
        lease.raise_if_lost()

    run(scenario)


def test_a_renewal_counts_from_its_send_time_and_the_next_one_follows_a_third_later() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["UpdateItem"] = Fault("UpdateItem", before=0.5, after=0.5)
        lease = h.lease(lease=9)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(4.0)  # renewal sent at 3, confirmed at 4
        assert lease.counters().renewals == 1
        assert lease.time_left() == pytest.approx(8.1 - 1.0)
        await h.clock.advance(3.0)
        assert [t - start for t in h.transport.times("UpdateItem")] == pytest.approx([3.0, 6.0])

    run(scenario)


def test_a_wall_clock_jump_ends_a_held_lease_and_signals_it_promptly() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=30)
        await lease.acquire()
        await h.clock.advance(2.0)
        h.clock.jump_wall(60.0)
        await h.clock.advance(1.0)  # the renewal loop looks at least once a second
        assert lease.lost_signal.done() and lease.state is State.LOST
        with pytest.raises(LockLost, match="expired"):
            lease.raise_if_lost()

    run(scenario)


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


# --- request timeouts and budgets ----------------------------------------------------------


def test_a_renewal_request_is_bounded_by_the_validity_left() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["UpdateItem"] = hang("UpdateItem", commit=False)
        lease = h.lease(lease=3)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(2.2)
        # Renewal at 1 s times out after lease/3 = 1 s; its strong read shows it not applied.
        assert h.transport.times("GetItem")[0] - start == pytest.approx(2.0)
        lease.raise_if_lost()
        await h.clock.advance(0.51)  # retry at 2.25 s: bounded by the 0.45 s left
        assert lease.state is State.LOST
        assert h.transport.times("UpdateItem")[1] - start == pytest.approx(2.25)

    run(scenario)


# --- renewal -------------------------------------------------------------------------------


def test_renewals_are_sent_every_third_of_the_lease() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(4.5)
        times = [t - start for t in h.transport.times("UpdateItem")]
        assert times == pytest.approx([1.0, 2.0, 3.0, 4.0])

    run(scenario)


@pytest.mark.parametrize(("lease", "retry"), [(6.0, 0.5), (24.0, 1.0)])
def test_a_failed_renewal_is_retried_every_twelfth_of_the_lease_capped_at_one_second(
    lease: float, retry: float
) -> None:
    async def scenario(h: Harness) -> None:
        throttled = ThrottledError("slow down", operation="UpdateItem")
        h.transport.always["UpdateItem"] = Fault("UpdateItem", commit=False, error=throttled)
        acquiring = h.lease(lease=lease)
        start = h.clock.monotonic()
        await acquiring.acquire()
        await h.clock.advance(lease * 0.9 - 0.001)
        acquiring.raise_if_lost()
        times = [t - start for t in h.transport.times("UpdateItem")]
        assert times[0] == pytest.approx(lease / 3)
        assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx(
            [retry] * (len(times) - 1)
        )
        assert times[-1] > lease * 0.9 - retry - 1e-6  # kept retrying to the end
        await h.clock.advance(0.002)
        with pytest.raises(LockLost):
            acquiring.raise_if_lost()
        assert acquiring.counters().renewals == 0

    run(scenario)


def test_an_unconfirmed_renewal_never_extends_validity() -> None:
    async def scenario(h: Harness) -> None:
        # Applied, answer lost, and the strong read fails too: it cannot be confirmed.
        h.transport.always["UpdateItem"] = lost_answer("UpdateItem")
        h.transport.always["GetItem"] = Fault(
            "GetItem", error=ThrottledError("slow down", operation="GetItem")
        )
        lease = h.lease(lease=12)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(10.79)
        assert lease.time_left() == pytest.approx(0.01)
        await h.clock.advance(0.02)
        assert lease.state is State.LOST
        assert h.clock.monotonic() - start == pytest.approx(10.81)

    run(scenario)


def test_an_applied_renewal_found_later_counts_from_its_own_send_time() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(lost_answer("UpdateItem"))
        h.transport.faults.append(
            Fault("GetItem", error=ThrottledError("slow down", operation="GetItem"))
        )
        lease = h.lease(lease=12)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(5.0)
        # The retry at 5 s fails its condition; the returned row shows the version
        # sent at 4 s, so validity runs from 4 s, not from the retry.
        assert lease.counters().renewals == 1
        assert lease.time_left() == pytest.approx(10.8 - 1.0)
        await h.clock.advance(3.0)
        assert h.transport.times("UpdateItem")[-1] - start == pytest.approx(8.0)

    run(scenario)


def test_a_renewal_whose_strong_read_shows_our_old_version_is_retried_not_lost() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("UpdateItem", commit=False, error=RequestFailedError("reset"))
        )
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(1.1)
        assert lease.state is State.HELD and lease.counters().renewals == 0
        await h.clock.advance(0.25)  # retried after min(3/12, 1 s)
        assert lease.counters().renewals == 1
        lease.raise_if_lost()

    run(scenario)


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


# --- late successes ------------------------------------------------------------------------


def test_a_renewal_that_lands_after_the_loss_does_not_revive_the_guard() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["UpdateItem"] = Fault("UpdateItem", before=4.0)
        h.transport.always["GetItem"] = Fault(
            "GetItem", error=ThrottledError("slow down", operation="GetItem")
        )
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(2.8)
        assert lease.state is State.LOST
        await h.clock.advance(5.0)  # the first renewal reached the table at 5 s and succeeded
        assert lease.state is State.LOST and lease.counters().renewals == 0
        assert lease.time_left() == 0
        with pytest.raises(LockLost):
            lease.raise_if_lost()

    run(scenario)


# --- the lost signal -----------------------------------------------------------------------


def test_a_takeover_is_signalled_to_the_holder_and_its_callback() -> None:
    told: list[LockLost] = []
    called = threading.Event()

    def on_lost(error: LockLost) -> None:
        told.append(error)
        called.set()

    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3, on_lost=on_lost)
        await lease.acquire()
        h.write_lock("successor", "v9", 3_000)
        await h.clock.advance(1.0)  # the next renewal finds the successor
        assert lease.lost_signal.done()

    run(scenario)
    assert called.wait(5)
    assert "another owner" in str(told[0]) and told[0].key == "k"
