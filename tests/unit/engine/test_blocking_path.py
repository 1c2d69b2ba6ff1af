"""Sync guards send their first create and their delete from the caller's own thread.

``CallerPath.acquire_blocking`` and ``CallerPath.release_blocking`` spare the
two hand-overs to the runtime thread that a sync lock would otherwise cost;
anything but a clean answer is handed to the engine, which goes on from that
outcome exactly as if it had sent the request itself. These tests drive that
hand-over on a manual clock with scripted faults
(``lease_harness.BlockingFaultyTransport``), and the runtime's deferred start of
renewals on a real loop.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from typing import Any

import pytest
from support.lease_harness import Fault, Harness, lost_answer, run

from dynalease._engine import protocol as p
from dynalease._engine.runtime import Runtime
from dynalease._engine.scheduling import deferred_renewals
from dynalease._engine.states import State
from dynalease.exceptions import LockLost, LockNotAcquired, ThrottledError


def test_a_clean_blocking_create_holds_the_lease_with_one_write() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3.0)
        assert lease.caller.acquire_blocking() is None
        assert lease.state is State.HELD and h.owner_of() == lease.owner
        assert h.transport.operations() == ["PutItem"]
        counters = lease.counters()
        assert (counters.write_requests, counters.read_requests) == (1, 0)
        assert lease.renewer.renewal_due() == pytest.approx(h.clock.monotonic() + 1.0)
        lease.renewer.start_renewing()
        await h.clock.advance(1.05)
        assert h.transport.operations() == ["PutItem", "UpdateItem"]
        await lease.release()
        assert h.row() is None

    run(scenario, blocking=True)


def test_a_held_row_found_by_the_blocking_create_is_used_without_reading_it_again() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("someone", "v1", 30_000)
        lease = h.lease(wait=0)
        first = lease.caller.acquire_blocking()
        assert first is not None
        with pytest.raises(LockNotAcquired, match="held by another owner"):
            await lease.acquire(first)
        # The failed condition returned the row: no GetItem, and no second create.
        assert h.transport.operations() == ["PutItem"]
        counters = lease.counters()
        assert counters.conditional_failures == 1 and counters.write_requests == 1

    run(scenario, blocking=True)


def test_an_abandoned_row_found_by_the_blocking_create_is_taken_over_after_its_lease() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        lease = h.lease(wait=10)
        first = lease.caller.acquire_blocking()
        assert first is not None
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire(first))
        assert lease.state is State.HELD and h.owner_of() == lease.owner
        assert h.transport.times("PutItem")[-1] - start >= 2.0  # observed for its stored lease
        assert lease.counters().wait_ms >= 2_000
        await lease.release()

    run(scenario, blocking=True)


def test_a_blocking_create_whose_answer_was_lost_is_reconciled_by_the_engine() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(lost_answer("PutItem"))
        lease = h.lease()
        first = lease.caller.acquire_blocking()
        assert first is not None  # committed, but the caller could not know
        await lease.acquire(first)
        assert lease.state is State.HELD and h.owner_of() == lease.owner
        assert h.transport.operations() == ["PutItem", "GetItem"]
        counters = lease.counters()
        assert counters.request_failures == 1 and counters.write_requests == 1
        await lease.release()

    run(scenario, blocking=True)


def test_a_blocking_create_applied_after_the_engine_gave_up_is_deleted_when_it_lands() -> None:
    async def scenario(h: Harness) -> None:
        # The answer is not back in time; the write itself lands 2 s after it was sent.
        h.transport.faults.append(Fault("PutItem", before=2.0))
        throttled = ThrottledError("slow down", operation="PutItem")
        h.transport.always["PutItem"] = Fault("PutItem", commit=False, error=throttled)
        lease = h.lease(lease=3.0, wait=0)
        first = lease.caller.acquire_blocking()
        assert first is not None and first.late is not None
        with pytest.raises(LockNotAcquired, match="network budget"):
            await h.clock.run(lease.acquire(first))
        assert h.row() is None  # not landed yet
        await h.clock.advance(2.5)
        assert h.row() is None  # landed, then deleted by the guard that gave up
        assert h.transport.operations()[-1] == "DeleteItem"

    run(scenario, blocking=True)


def test_a_blocking_create_throttled_is_retried_by_the_engine() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("PutItem", commit=False, error=ThrottledError("slow down", operation="PutItem"))
        )
        lease = h.lease()
        first = lease.caller.acquire_blocking()
        assert first is not None
        await h.clock.run(lease.acquire(first))
        assert lease.state is State.HELD
        assert h.transport.operations() == ["PutItem", "PutItem"]
        await lease.release()

    run(scenario, blocking=True)


def test_an_interrupt_during_the_blocking_create_cleans_up_what_it_wrote() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.interrupt = True  # Ctrl-C after the create was applied
        lease = h.lease()
        with pytest.raises(KeyboardInterrupt):
            lease.caller.acquire_blocking()
        assert h.owner_of() == lease.owner
        lease.caller.abandon_first()
        await h.clock.advance(0.1)
        assert lease.state is State.CANCELLED and h.row() is None

    run(scenario, blocking=True)


def test_a_clean_blocking_release_needs_no_runtime_unless_someone_waits() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        assert lease.caller.acquire_blocking() is None
        assert lease.caller.release_blocking() is None
        assert lease.state is State.RELEASED and h.row() is None
        assert lease.caller.after_blocking_release() is False  # no renewal task, no waiter

        second = h.lease()
        assert second.caller.acquire_blocking() is None
        waiter = h.observations.wait(("locks", "k"), asyncio.get_running_loop().create_future())
        assert second.caller.release_blocking() is None
        assert second.caller.after_blocking_release() is True
        second.caller.released_elsewhere()
        assert waiter.done()  # the waiting guard of this client is woken at once

    run(scenario, blocking=True)


def test_a_blocking_release_whose_answer_was_lost_is_confirmed_by_a_read() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        assert lease.caller.acquire_blocking() is None
        h.transport.faults.append(lost_answer("DeleteItem"))
        first = lease.caller.release_blocking()
        assert first is not None and lease.state is State.RELEASING
        await lease.release(first)
        assert lease.state is State.RELEASED and h.row() is None
        assert h.transport.operations() == ["PutItem", "DeleteItem", "GetItem"]

    run(scenario, blocking=True)


def test_an_interrupted_blocking_release_is_finished_by_the_engine() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        assert lease.caller.acquire_blocking() is None
        h.transport.faults.append(Fault("DeleteItem", commit=False))
        h.transport.interrupt = True  # Ctrl-C before the delete was applied
        with pytest.raises(KeyboardInterrupt):
            lease.caller.release_blocking()
        assert h.owner_of() == lease.owner
        await h.clock.run(lease.release(lease.caller.interrupted_release()))
        assert lease.state is State.RELEASED and h.row() is None

    run(scenario, blocking=True)


def test_a_blocking_release_after_a_takeover_reports_the_loss_and_spares_the_successor() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=1.0)
        assert lease.caller.acquire_blocking() is None
        h.write_lock("successor", "v9", 30_000)
        first = lease.caller.release_blocking()
        assert first is not None
        with pytest.raises(LockLost, match="another owner"):
            await lease.release(first)
        assert h.owner_of() == "successor"

    run(scenario, blocking=True)


def test_a_blocking_release_of_an_expired_guard_raises_lock_lost() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=1.0)
        assert lease.caller.acquire_blocking() is None
        await h.clock.advance(0.95)  # past 90% with no renewal task running
        assert lease.caller.release_blocking() is None
        assert lease.state is State.LOST and h.row() is None
        assert "expired" in str(lease.lost_error())

    run(scenario, blocking=True)


# --- deferred start of renewals ------------------------------------------------------


class _FakeLease:
    def __init__(self, due: float) -> None:
        self.due = due
        self.state = State.HELD
        self.started = 0.0
        self.checks = 0

    def renewal_due(self) -> float:
        return self.due

    def start_renewing(self) -> None:
        self.started = time.monotonic()

    def check_validity(self, monotonic: float, wall: float) -> None:
        self.checks += 1


def test_deferred_renewals_start_when_due_and_skip_released_leases() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        deferred = deferred_renewals(loop)
        posts = 0
        post = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any) -> Any:
            nonlocal posts
            posts += 1
            return post(callback, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        now = time.monotonic()
        due, released, later = (_FakeLease(now + d) for d in (0.15, 0.2, 0.25))
        for lease in (due, released, later):
            deferred.add(lease)  # type: ignore[arg-type]
        assert posts == 1  # later leases need the loop no sooner than the first
        released.state = State.RELEASED
        await asyncio.sleep(0.4)
        assert due.started >= due.due and later.started >= later.due
        assert released.started == 0.0  # released before due: never reached the loop
        assert len(deferred) == 0

    asyncio.run(scenario())


def test_before_the_loop_runs_the_runtimes_thread_checks_waiting_leases_until_one_is_due() -> None:
    # A sync hold of a few seconds: its validity is checked each second without the
    # loop (no asyncio import); the loop starts when the first renewal falls due.
    runtime = Runtime()  # a runtime of its own, its loop not started
    deferred = deferred_renewals(runtime)
    lease = _FakeLease(time.monotonic() + 1.6)
    deferred.add(lease)  # type: ignore[arg-type]
    time.sleep(1.3)  # one sweep (at 1 s), on the runtime's thread
    assert lease.checks == 1 and not runtime.started
    deadline = time.monotonic() + 10
    while not lease.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease.started >= lease.due and runtime.started
    assert len(deferred) == 0


def test_deferred_leases_are_checked_for_validity_every_watch_interval() -> None:
    async def scenario() -> None:
        deferred = deferred_renewals(asyncio.get_running_loop())
        waiting = _FakeLease(math.inf)  # never due within the test
        deferred.add(waiting)  # type: ignore[arg-type]
        await asyncio.sleep(1.3)  # WATCH_INTERVAL_S is 1 s
        assert waiting.checks == 1 and waiting.started == 0.0
        waiting.state = State.LOST
        await asyncio.sleep(1.0)
        assert len(deferred) == 0

    asyncio.run(scenario())


def test_deferred_renewals_do_not_keep_a_released_guards_lease_alive() -> None:
    async def scenario() -> None:
        deferred = deferred_renewals(asyncio.get_running_loop())
        lease = _FakeLease(math.inf)
        deferred.add(lease)  # type: ignore[arg-type]
        freed = weakref.ref(lease)
        del lease  # the guard and its lease are dropped
        assert freed() is None
        await asyncio.sleep(1.1)  # the next sweep forgets the entry
        assert len(deferred) == 0

    asyncio.run(scenario())


def test_blocking_requests_use_the_engine_request_timeout() -> None:
    seen: list[float] = []

    async def scenario(h: Harness) -> None:
        handle = h.transport.handle

        def recording(request: Any) -> Any:
            seen.append(request.timeout)
            return handle(request)

        h.transport.handle = recording  # type: ignore[method-assign]
        lease = h.lease(lease=30.0, wait=0.5)
        assert lease.caller.acquire_blocking() is None
        assert lease.caller.release_blocking() is None

    run(scenario, blocking=True)
    assert seen[0] == pytest.approx(p.request_timeout(30.0, 0.5))
    assert seen[1] == pytest.approx(p.request_timeout(30.0, p.cleanup_budget(30.0)))


def test_many_leases_due_one_after_another_are_still_swept_once_per_interval() -> None:
    # 1,000 async guards acquired over a few seconds fall due one after another;
    # every start must not also re-check (and re-sort) every waiting lease.
    async def scenario() -> None:
        deferred = deferred_renewals(asyncio.get_running_loop())
        now = time.monotonic()
        starting = [_FakeLease(now + 0.01 * i) for i in range(1, 51)]
        waiting = _FakeLease(math.inf)
        for lease in [waiting, *starting]:
            deferred.add(lease)  # type: ignore[arg-type]
        await asyncio.sleep(0.8)
        assert all(lease.started >= lease.due for lease in starting)
        assert waiting.checks <= 1  # one sweep at most in 0.8 s, not one per start
        assert len(deferred) == 1

    asyncio.run(scenario())
