"""In-process hand-over and the shared validity watch, on a manual clock.

A release wakes only the longest-waiting guard of the same client; waiters of a
key held in this process poll at the slowest cadence; a recovering guard wakes
exactly when the abandoned row becomes eligible; and any number of held leases
share one validity watch instead of waking once a second each.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from support.lease_harness import Harness, run

from dynalease._engine import protocol as p
from dynalease._engine.scheduling import WATCH_INTERVAL_S
from dynalease._engine.states import State
from dynalease.exceptions import LockLost


def test_a_release_wakes_only_the_longest_waiter_which_takes_the_lock_at_once() -> None:
    async def scenario(h: Harness) -> None:
        holder = h.lease(lease=3.0)
        await holder.acquire()
        waiters = [h.lease(lease=3.0) for _ in range(3)]
        tasks = []
        for waiter in waiters:
            tasks.append(asyncio.ensure_future(waiter.acquire()))
            await h.clock.settle()
        await h.clock.advance(0.01)
        before = len(h.transport.sent)
        await holder.release()
        await h.clock.settle()
        after = h.transport.operations()[before:]
        # The delete, then one create by the first waiter: nobody else tries.
        assert after == ["DeleteItem", "PutItem"]
        assert waiters[0].state is State.HELD
        assert [w.state for w in waiters[1:]] == [State.ACQUIRING, State.ACQUIRING]
        for current, following in itertools.pairwise(waiters):
            await current.release()
            await h.clock.settle()
            assert following.state is State.HELD  # each release hands over in turn
        await waiters[-1].release()
        await asyncio.gather(*tasks)

    run(scenario)


def test_waiters_of_a_key_held_in_this_process_poll_only_at_the_slowest_cadence() -> None:
    async def scenario(h: Harness) -> None:
        holder = h.lease(lease=3.0)
        await holder.acquire()
        waiter = h.lease(lease=3.0)
        task = asyncio.ensure_future(waiter.acquire())
        await h.clock.settle()
        start = len(h.transport.sent)
        await h.clock.advance(2.0)
        reads = [sent.at for sent in h.transport.sent[start:] if sent.operation == "GetItem"]
        gaps = [b - a for a, b in itertools.pairwise(reads)]
        assert reads, "the waiter still checks the row now and then"
        assert all(gap >= 0.8 * p.poll_cap(3.0) for gap in gaps)
        assert len(reads) <= 2.0 / (0.8 * p.poll_cap(3.0)) + 1
        await holder.release()
        await task
        assert waiter.state is State.HELD
        await waiter.release()

    run(scenario)


def test_a_woken_waiter_that_is_cancelled_hands_the_wake_to_the_next() -> None:
    async def scenario(h: Harness) -> None:
        holder = h.lease(lease=3.0)
        await holder.acquire()
        first, second = h.lease(lease=3.0), h.lease(lease=3.0)
        first_task = asyncio.ensure_future(first.acquire())
        await h.clock.settle()
        second_task = asyncio.ensure_future(second.acquire())
        await h.clock.settle()
        resource = (holder.table, holder.key)
        h.observations.released(resource)  # as if the holder had released...
        first_task.cancel()  # ...and the woken waiter was cancelled before it ran
        await h.clock.settle()
        await holder.release()
        await h.clock.settle()
        assert second.state is State.HELD
        await second.release()
        await asyncio.gather(first_task, second_task, return_exceptions=True)

    run(scenario)


def test_recovery_takes_over_exactly_when_the_abandoned_row_becomes_eligible() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed-owner", "v1", 3000)
        lease = h.lease(lease=3.0, wait=10.0)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        assert lease.state is State.HELD
        # Polls carry jitter, but the last pause is cut at eligibility, never beyond it.
        assert h.clock.monotonic() - start == 3.0
        await lease.release()

    run(scenario)


def test_many_held_leases_share_one_validity_watch() -> None:
    async def scenario(h: Harness) -> None:
        leases = [h.lease(key=f"k{i}", lease=30.0) for i in range(50)]
        for lease in leases:
            await lease.acquire()
        # Renewal tasks start when the first renewal is due (deferred renewals).
        await h.clock.advance(p.renew_interval(30.0))
        pending: Any = h.clock._sleepers  # (wake time, order, future)
        sleeping = [entry for entry in pending if not entry[2].done()]
        # One renewal sleep per lease plus one watch, not a one-second wake per lease.
        assert len(sleeping) == len(leases) + 1
        assert sum(1 for entry in sleeping if entry[0] - h.clock.monotonic() <= 1.0) == 1
        h.clock.jump_wall(-5.0)  # a backward wall jump ends every lease within the watch
        await h.clock.advance(WATCH_INTERVAL_S)
        assert all(lease.state is State.LOST for lease in leases)
        assert all(lease.lost_signal.done() for lease in leases)
        for lease in leases:
            with contextlib.suppress(LockLost):
                await lease.release()

    run(scenario)
