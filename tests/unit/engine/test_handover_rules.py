"""A guard is handed to its body only with validity to spare, and never past its caller's
deadline (docs/locks.md, "Hand-over"; N1 and N4 of the security review).

Every acquisition that wins ends in ``Acquirer.complete``: with less validity left than
``protocol.handover_margin`` (a tenth of the lease, at least 50 ms), or after the
invocation's deadline, the row is deleted and the caller gets the error instead of a
guard. A deadline that has passed sends nothing; a wait never outlasts it. Driven on a
manual clock, so each bound is exact.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.lease_harness import TABLE, Fault, Harness, hang, run

from dynalease._engine import protocol as p
from dynalease._engine.deadline import TIME_LEFT
from dynalease._engine.lease import Lease, LeaseSpec
from dynalease._engine.permits import PermitTarget
from dynalease._engine.states import Event, State
from dynalease._engine.store import LockStore
from dynalease._engine.targets import KeysTarget
from dynalease.exceptions import LockNotAcquired, LockUnavailable
from dynalease.keys import permit_keys

LEASE_S = 3.0  # validity 2.7 s, margin 0.3 s, request timeout 1 s


@pytest.fixture
def time_left() -> Iterator[list[float]]:
    """The invocation's remaining seconds at the next acquisition, as the middleware sets it."""
    remaining = [0.0]
    token = TIME_LEFT.set(lambda: remaining[0])
    yield remaining
    TIME_LEFT.reset(token)


def test_the_margin_is_a_tenth_of_the_lease_and_at_least_50_ms() -> None:
    assert p.handover_margin(30.0) == pytest.approx(3.0)
    assert p.handover_margin(3.0) == pytest.approx(0.3)
    assert p.handover_margin(0.2) == pytest.approx(0.05)
    assert p.handover_margin(0.1) < p.validity_span(0.1)  # the shortest lease can be held


@pytest.mark.parametrize(("took", "held"), [(2.3, True), (2.5, False), (2.8, False)])
def test_a_blocking_create_answered_too_late_is_refused_and_its_row_deleted(
    took: float, held: bool
) -> None:
    """2.3 s leaves 0.4 s of 2.7 (held); 2.5 s leaves 0.2 s, under the 0.3 s margin."""

    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", took=took))
        lease = h.lease(lease=LEASE_S)
        if held:
            assert lease.caller.acquire_blocking() is None
            assert lease.state is State.HELD
            return
        with pytest.raises(LockUnavailable, match=r"under the hand-over margin of 0\.3 s"):
            lease.caller.acquire_blocking()
        assert h.owner_of() == lease.owner  # written, not handed over
        lease.caller.abandon_first(Event.GAVE_UP)  # what ``hold`` schedules on the loop
        await h.clock.advance(0.1)
        assert lease.state is State.NOT_ACQUIRED and h.row() is None
        assert h.transport.operations() == ["PutItem", "DeleteItem"]
        assert lease.counters().wait_timeouts == 1

    run(scenario, blocking=True)


def _slowly_reconciled(h: Harness, write: str, reads: tuple[str, str]) -> None:
    """The write lands but its answer never comes (1 s), nor the first read's (1 s); the
    next read answers after 0.9 s: ours, found 2.9 s after the write was sent."""
    h.transport.faults += [hang(write), hang(reads[0]), Fault(reads[1], after=0.9)]


async def _refused_and_deleted(h: Harness, lease: Lease, keys: tuple[str, ...]) -> None:
    with pytest.raises(LockUnavailable, match="hand-over margin"):
        await h.clock.run(lease.acquire())
    assert lease.state is State.NOT_ACQUIRED and lease.time_left() == 0
    await h.clock.advance(1.0)
    assert [h.row(key) for key in keys] == [None] * len(keys)


def test_a_lock_adopted_after_a_slow_reconciliation_is_refused_and_its_row_deleted() -> None:
    async def scenario(h: Harness) -> None:
        _slowly_reconciled(h, "PutItem", ("GetItem", "GetItem"))
        lease = h.lease(lease=LEASE_S)
        await _refused_and_deleted(h, lease, ("k",))
        assert h.transport.operations()[-1] == "DeleteItem"

    run(scenario)


def test_a_multi_key_lock_adopted_too_late_is_refused_and_every_row_deleted() -> None:
    async def scenario(h: Harness) -> None:
        _slowly_reconciled(h, "TransactWriteItems", ("BatchGetItem", "BatchGetItem"))
        keys = ("a", "b", "c")
        lease = Lease(
            store=LockStore(h.transport),
            clock=h.clock,
            observations=h.observations,
            target=KeysTarget(keys),
            spec=LeaseSpec(TABLE, LEASE_S, 10.0),
        )
        await _refused_and_deleted(h, lease, keys)

    run(scenario)


def test_a_semaphore_permit_adopted_too_late_is_refused_and_its_row_deleted() -> None:
    async def scenario(h: Harness) -> None:
        _slowly_reconciled(h, "PutItem", ("GetItem", "BatchGetItem"))
        permits = permit_keys("pool", 2)
        lease = Lease(
            store=LockStore(h.transport),
            clock=h.clock,
            observations=h.observations,
            target=PermitTarget("pool", permits),
            spec=LeaseSpec(TABLE, LEASE_S, 10.0),
        )
        await _refused_and_deleted(h, lease, permits)

    run(scenario)


# --- the caller's deadline (N4) ----------------------------------------------------


def test_a_deadline_already_passed_refuses_without_a_request(time_left: list[float]) -> None:
    time_left[0] = 0.0

    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=30.0)
        with pytest.raises(LockNotAcquired, match="deadline had passed, so no request was made"):
            await h.clock.run(lease.acquire())
        assert h.transport.sent == [] and lease.state is State.NOT_ACQUIRED

    run(scenario)


def test_a_sync_guard_past_its_deadline_sends_nothing_from_the_callers_thread(
    time_left: list[float],
) -> None:
    time_left[0] = -1.0

    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=30.0, wait=0)
        first = lease.caller.acquire_blocking()
        assert first is not None and not first.sent
        with pytest.raises(LockNotAcquired, match="no request was made"):
            await h.clock.run(lease.acquire(first))
        assert h.transport.sent == []

    run(scenario, blocking=True)


def test_a_wait_on_a_held_key_ends_at_the_deadline(time_left: list[float]) -> None:
    time_left[0] = 1.0

    async def scenario(h: Harness) -> None:
        h.write_lock("someone", "v1", 30_000)
        lease = h.lease(lease=30.0, wait=35.0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="deadline came before the wait_timeout"):
            await h.clock.run(lease.acquire())
        assert h.clock.monotonic() - start <= 1.0
        assert max(h.transport.times("GetItem")) < start + 1.0

    run(scenario)


def test_a_create_confirmed_after_the_deadline_is_refused_and_its_row_deleted(
    time_left: list[float],
) -> None:
    time_left[0] = 0.5

    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", took=0.6))
        lease = h.lease(lease=30.0)
        with pytest.raises(LockNotAcquired, match="after the invocation's deadline") as raised:
            lease.caller.acquire_blocking()
        assert not isinstance(raised.value, LockUnavailable)
        lease.caller.abandon_first(Event.GAVE_UP)
        await h.clock.advance(0.1)
        assert h.row() is None

    run(scenario, blocking=True)
