"""Acquiring under docs/protocol.md: budgets, contention, observation, ambiguous and late writes.

Each test runs one lease on the test's own event loop (see ``lease_harness``):
time moves only when the test says so, and every request is recorded with the
clock time it was sent, so timing rules are checked exactly.
"""

from __future__ import annotations

import asyncio

import pytest
from support.lease_harness import TABLE, Fault, Harness, hang, lost_answer, run

from dynalease._engine import protocol as p
from dynalease._engine.observations import Observations
from dynalease._engine.states import State
from dynalease.exceptions import LockLost, LockNotAcquired, RequestFailedError, ThrottledError

# --- request timeouts and budgets ----------------------------------------------------------


def test_a_request_never_outlives_the_time_left_in_the_wait() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = hang("PutItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        lease = h.lease(lease=30, wait=7)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire())
        assert h.transport.times("GetItem")[0] - start == pytest.approx(5.0)
        assert h.clock.monotonic() - start == pytest.approx(7.0)  # the read got 2 s, not 5
        assert lease.counters().wait_ms == pytest.approx(7000)

    run(scenario)


def test_zero_wait_makes_one_attempt_without_sleeping() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        lease = h.lease(wait=0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="wait_timeout=0"):
            await lease.acquire()  # no clock advance: it must not sleep
        assert h.clock.monotonic() == start
        assert h.transport.operations() == ["PutItem"]  # the failed create returned the row
        assert lease.counters().wait_timeouts == 1  # a failed single attempt, as pydynox counts

    run(scenario)


def test_zero_wait_does_not_retry_a_throttled_attempt() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("PutItem", commit=False, error=ThrottledError("slow down", operation="PutItem"))
        )
        lease = h.lease(wait=0)
        with pytest.raises(LockNotAcquired) as raised:
            await lease.acquire()
        assert isinstance(raised.value.__cause__, ThrottledError)
        assert h.transport.operations() == ["PutItem"]

    run(scenario)


@pytest.mark.parametrize(("lease", "budget"), [(1.0, 0.6), (5.0, 3.0), (30.0, 5.0)])
def test_zero_wait_has_a_network_budget_of_sixty_percent_of_the_lease_capped_at_five_seconds(
    lease: float, budget: float
) -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = hang("PutItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        acquiring = h.lease(lease=lease, wait=0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="network budget"):
            await h.clock.run(acquiring.acquire())
        assert h.clock.monotonic() - start == pytest.approx(budget)

    run(scenario)


def test_a_caller_can_cut_the_single_attempt_network_budget_but_not_raise_it() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = hang("PutItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        cut = h.lease(lease=30, wait=0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="network budget"):
            # 0.4 s: what a Lambda invocation can still afford
            await h.clock.run(cut.acquire(attempt_cap=0.4))
        assert h.clock.monotonic() - start == pytest.approx(0.4)

        kept = h.lease(lease=1, wait=0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="network budget"):
            # 60 s: larger than 0.6 x lease, so the rule still wins
            await h.clock.run(kept.acquire(attempt_cap=60.0))
        assert h.clock.monotonic() - start == pytest.approx(0.6)

    run(scenario)


# --- contention and observation ------------------------------------------------------------


def test_a_missing_row_means_the_create_is_retried_at_once() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        lease = h.lease(wait=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.3)
        h.delete_row()  # the holder released
        await h.clock.run(task)
        last_read = h.transport.times("GetItem")[-1]
        assert h.transport.operations()[-2:] == ["GetItem", "PutItem"]
        assert h.transport.times("PutItem")[-1] == last_read  # no pause in between
        assert h.owner_of() == lease.owner

    run(scenario)


def test_a_takeover_that_finds_the_row_gone_creates_it_at_once() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 1_000)
        lease = h.lease(lease=30, wait=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.settle()
        h.transport.faults.append(Fault("PutItem", before=0.5))  # the takeover, in flight
        await h.clock.advance(1.2)  # the takeover was sent at 1 s
        h.delete_row()  # ...and the row vanishes before it arrives
        await h.clock.run(task)
        assert h.transport.operations()[-3:] == ["PutItem", "GetItem", "PutItem"]
        assert h.transport.times("PutItem")[-1] == h.transport.times("GetItem")[-1]
        assert h.owner_of() == lease.owner

    run(scenario)


def test_takeover_waits_for_the_stored_lease_even_when_ours_is_shorter() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 10_000)
        lease = h.lease(lease=1, wait=20)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        takeover = h.transport.times("PutItem")[-1] - start
        assert 10.0 <= takeover <= 10.0 + 0.1 * 1.2 + 1e-6  # within one capped poll
        assert h.owner_of() == lease.owner and lease.state is State.HELD

    run(scenario)


def test_a_changed_version_restarts_the_observation() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("alive", "v1", 2_000)
        lease = h.lease(lease=30, wait=20)
        start = h.clock.monotonic()
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(1.5)
        h.write_lock("alive", "v2", 2_000)  # the holder renewed
        await h.clock.advance(2.0)
        assert not task.done()  # 3.5 s after the first sighting, 2 s after the renewal
        await h.clock.run(task)
        assert h.transport.times("PutItem")[-1] - start >= 3.5

    run(scenario)


@pytest.mark.parametrize(
    "change", [("other", "v1", 2_000), ("alive", "v2", 2_000), ("alive", "v1", 2_001)]
)
def test_observation_compares_owner_version_and_lease(change: tuple[str, str, int]) -> None:
    seen = Observations()
    assert seen.observe((TABLE, "k"), ("alive", "v1", 2_000), 10.0) == 10.0
    assert seen.observe((TABLE, "k"), ("alive", "v1", 2_000), 11.0) == 10.0
    assert seen.observe((TABLE, "k"), change, 12.0) == 12.0


def test_observations_are_kept_per_table_and_key() -> None:
    seen, identity = Observations(), ("alive", "v1", 2_000)
    assert seen.observe(("a", "k"), identity, 1.0) == 1.0
    assert seen.observe(("b", "k"), identity, 2.0) == 2.0
    assert seen.observe(("a", "j"), identity, 3.0) == 3.0
    assert [seen.observe(r, identity, 9.0) for r in (("a", "k"), ("b", "k"), ("a", "j"))] == [
        1.0,
        2.0,
        3.0,
    ]


def test_observation_uses_only_the_monotonic_clock() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        lease = h.lease(lease=30, wait=10)
        start = h.clock.monotonic()
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.5)
        h.clock.jump_wall(3_600.0)  # the wall clock leaps an hour: no earlier takeover
        await h.clock.advance(1.4)
        assert not task.done() and h.owner_of() == "crashed"
        h.clock.jump_wall(-7_200.0)  # nor does a leap backwards delay it
        await h.clock.run(task, limit=1.0)
        assert h.transport.times("PutItem")[-1] - start >= 2.0

    run(scenario)


def test_a_fresh_client_cannot_skip_observation_of_an_old_row() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        await h.clock.advance(3_600.0)  # the row is an hour old; nobody has watched it
        lease = h.lease(wait=0, observations=Observations())
        with pytest.raises(LockNotAcquired):
            await lease.acquire()
        assert h.owner_of() == "crashed"

    run(scenario)


def test_the_cache_holds_4096_observations_and_evicts_the_least_recently_used() -> None:
    seen = Observations()
    identity = ("o", "v", 1_000)
    for index in range(p.OBSERVATION_CAPACITY):
        seen.observe(("t", str(index)), identity, float(index))
    assert len(seen) == 4096
    seen.observe(("t", "0"), identity, 5_000.0)  # touched: now the most recent
    seen.observe(("t", "new"), identity, 5_001.0)
    assert len(seen) == 4096
    assert seen.observe(("t", "0"), identity, 6_000.0) == 0.0  # kept its first sighting
    assert seen.observe(("t", "1"), identity, 6_000.0) == 6_000.0  # evicted: starts over


def test_eviction_from_the_cache_delays_recovery() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        first = h.lease(wait=1)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(first.acquire())
        for index in range(p.OBSERVATION_CAPACITY):  # other keys' contention fills the cache
            h.observations.observe((TABLE, f"other-{index}"), ("x", "y", 1_000), 0.0)
        await h.clock.advance(1.5)  # 2.5 s after the first sighting, which is gone
        second = h.lease(wait=0)
        with pytest.raises(LockNotAcquired):
            await second.acquire()
        await h.clock.advance(2.01)
        third = h.lease(wait=0)
        await third.acquire()
        assert h.owner_of() == third.owner

    run(scenario)


def test_a_release_in_this_client_wakes_its_waiter_at_once() -> None:
    async def scenario(h: Harness) -> None:
        holder, waiter = h.lease(lease=30), h.lease(lease=30, wait=30)
        await holder.acquire()
        task = asyncio.ensure_future(waiter.acquire())
        await h.clock.advance(5.0)  # polls have backed off to their cap
        await holder.release()
        await h.clock.settle()
        assert task.done() and waiter.state is State.HELD

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


# --- ambiguous writes ----------------------------------------------------------------------


def test_an_ambiguous_takeover_is_reconciled_by_a_strong_read() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 1_000)
        lease = h.lease(lease=30, wait=5)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.settle()
        h.transport.faults.append(lost_answer("PutItem"))  # the takeover's answer is lost
        await h.clock.advance(1.5)
        await task
        assert h.transport.operations()[-2:] == ["PutItem", "GetItem"]
        assert h.owner_of() == lease.owner and lease.counters().request_failures == 1

    run(scenario)


def test_an_ambiguous_takeover_that_was_not_applied_is_retried() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 1_000)
        lease = h.lease(lease=30, wait=5)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.settle()
        h.transport.faults.append(Fault("PutItem", commit=False, error=RequestFailedError("x")))
        await h.clock.advance(1.5)
        await task
        assert h.transport.operations().count("PutItem") == 3  # create, lost try, retry
        assert h.owner_of() == lease.owner

    run(scenario)


def test_an_ambiguous_create_is_reconciled_within_the_wait() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(hang("PutItem"))  # applied, answer never comes
        lease = h.lease(lease=30, wait=35)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        assert h.transport.operations() == ["PutItem", "GetItem"]
        # Validity counts from the create's send time, not from the read 5 s later.
        assert h.clock.monotonic() - start == pytest.approx(5.0)
        assert lease.time_left() == pytest.approx(27.0 - 5.0)

    run(scenario)


# --- late successes ------------------------------------------------------------------------


def test_a_create_that_lands_after_the_wait_ran_out_is_deleted() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", before=1.0))
        lease = h.lease(lease=30, wait=0.5)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire(), limit=0.9)
        assert h.row() is None
        await h.clock.advance(1.0)  # it lands at 1 s
        assert h.row() is None and lease.state is State.NOT_ACQUIRED
        assert h.transport.times("DeleteItem")[-1] >= h.transport.times("PutItem")[0] + 1.0

    run(scenario)


def test_a_create_that_lands_late_with_a_lost_answer_is_deleted() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("PutItem", before=1.0, error=RequestFailedError("reset", operation="PutItem"))
        )
        lease = h.lease(lease=30, wait=0.5)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire(), limit=0.9)
        await h.clock.advance(1.0)
        assert h.row() is None

    run(scenario)


def test_a_cancelled_acquisition_deletes_a_create_that_lands_afterwards() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", before=0.5, after=0.5))
        lease = h.lease()
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert lease.state is State.CANCELLED
        await h.clock.advance(1.0)  # the create reached the table at 0.5 s
        assert h.row() is None and lease.state is State.CANCELLED
        with pytest.raises(LockLost, match="cancelled"):
            lease.raise_if_lost()

    run(scenario)


# --- errors are never contention -----------------------------------------------------------


def test_throttling_during_acquisition_is_retried_within_the_wait() -> None:
    async def scenario(h: Harness) -> None:
        throttled = ThrottledError("slow down", operation="PutItem")
        h.transport.faults += [Fault("PutItem", commit=False, error=throttled)] * 2
        lease = h.lease(wait=10)
        await h.clock.run(lease.acquire())
        assert lease.state is State.HELD and lease.counters().request_failures == 2

    run(scenario)
