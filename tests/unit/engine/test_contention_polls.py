"""The waiters' polling rule (protocol.contention_poll), on its own and in a waiting lease.

Waiters in other processes learn of a release only by reading the row. While
the key changes hands between a waiter's reads, its pause shrinks with the time
it has waited, down to ``fastest_poll`` (the bounded read rate); a row that
stays unchanged stretches the pause back to ``poll_cap``. Never past the
moment an abandoned row becomes eligible (tests in test_acquire_rules.py).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from support.lease_harness import Harness, run

from dynalease._engine import protocol as p
from dynalease._engine.states import State
from dynalease.exceptions import LockNotAcquired

#: The manual clock moves in 20 ms steps below: a read can come that much late.
STEP_S = 0.02


@pytest.mark.parametrize("lease", [0.1, 0.5, 3.0, 5.0, 30.0, 600.0, 86_400.0])
def test_every_pause_is_between_the_fastest_poll_and_the_cap(lease: float) -> None:
    fastest, cap = p.fastest_poll(lease), p.poll_cap(lease)
    assert 0.05 <= fastest <= cap <= 1.0
    pauses = [
        p.contention_poll(lease, last, unchanged, waited)
        for last in (None, fastest, cap)
        for unchanged in (False, True)
        for waited in (0.0, 0.1, 1.0, 10.0, 1_000.0)
    ]
    assert all(fastest <= pause <= cap for pause in pauses)


def test_a_key_changing_hands_is_read_more_often_the_longer_the_wait_down_to_the_fastest() -> None:
    waits = [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 60.0]
    pauses = [p.contention_poll(5.0, 0.5, False, waited) for waited in waits]
    assert pauses[0] == p.poll_cap(5.0)
    assert all(a > b for a, b in itertools.pairwise(pauses[:4]))
    assert pauses[-1] == p.fastest_poll(5.0) == pytest.approx(5.0 / 30)


def test_an_unchanged_row_stretches_the_pause_back_to_the_cap() -> None:
    fastest, cap = p.fastest_poll(5.0), p.poll_cap(5.0)
    assert p.contention_poll(5.0, fastest, True, 60.0) == pytest.approx(fastest * 1.6)
    assert p.contention_poll(5.0, cap, True, 60.0) == cap


def _reads(h: Harness, after: float = 0.0) -> list[float]:
    return [at for at in h.transport.times("GetItem") if at >= after]


def test_a_waiter_on_a_busy_key_polls_faster_as_it_waits_but_never_above_the_bound() -> None:
    async def scenario(h: Harness) -> None:
        start = h.clock.monotonic()
        h.write_lock("other-0", "v", 5000)
        lease = h.lease(lease=5.0, wait=30.0)
        task = asyncio.ensure_future(lease.acquire())
        for turn in range(1, 400):  # another process re-takes the key every 20 ms for 8 s
            await h.clock.advance(STEP_S)
            h.write_lock(f"other-{turn}", "v", 5000)
        reads = _reads(h)
        gaps = [b - a for a, b in itertools.pairwise(reads)]
        fastest = p.fastest_poll(5.0)
        assert min(gaps) >= 0.8 * fastest - STEP_S
        assert len(reads) <= 8.0 / (0.8 * fastest) + 1  # the worst-case read rate
        late = [b - a for a, b in itertools.pairwise(_reads(h, after=start + 2.0))]
        assert late and max(late) <= 1.2 * fastest + STEP_S  # at the fastest cadence by now
        h.delete_row()
        await h.clock.advance(1.0)
        await task
        assert lease.state is State.HELD
        await lease.release()

    run(scenario)


def test_a_waiter_on_a_holder_holding_on_reads_at_the_slow_cadence() -> None:
    async def scenario(h: Harness) -> None:
        start = h.clock.monotonic()
        h.write_lock("long-holder", "v", 30_000)
        lease = h.lease(lease=5.0, wait=10.0)
        task = asyncio.ensure_future(lease.acquire())
        for _ in range(400):
            await h.clock.advance(STEP_S)
        late = [b - a for a, b in itertools.pairwise(_reads(h, after=start + 2.0))]
        assert late and min(late) >= 0.8 * p.poll_cap(5.0) - STEP_S
        h.delete_row()
        await h.clock.advance(1.0)
        await task
        await lease.release()

    run(scenario)


def test_a_short_wait_on_a_long_lease_still_reads_the_row_before_giving_up() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("other", "v", 30_000)
        lease = h.lease(lease=30.0, wait=0.5)  # poll_cap is 1 s: longer than the whole wait
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.6)
        with pytest.raises(LockNotAcquired):
            await task
        reads = _reads(h)
        assert reads, "the waiter gave up without looking again"
        assert all(b - a >= 0.05 - 1e-9 for a, b in itertools.pairwise(reads))

    run(scenario)
