"""A multi-key lease on a manual clock: lost answers of its transactions are reconciled
by reading every row, as a single lock reconciles its one row."""

from __future__ import annotations

import asyncio

import pytest
from support.lease_harness import TABLE, Harness, lost_answer, run

from dynalease._engine import protocol as p
from dynalease._engine.lease import Lease, LeaseSpec
from dynalease._engine.states import State
from dynalease._engine.store import LockStore
from dynalease._engine.targets import KeysTarget
from dynalease.exceptions import LockLost

KEYS = ("a", "b", "c")


def multi(h: Harness, *, lease: float = 3.0, wait: float = 10.0) -> Lease:
    return Lease(
        store=LockStore(h.transport),
        clock=h.clock,
        observations=h.observations,
        target=KeysTarget(KEYS),
        spec=LeaseSpec(TABLE, lease, wait),
    )


def test_a_transaction_whose_answer_is_lost_is_won_when_every_row_shows_our_version() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(lost_answer("TransactWriteItems"))
        lease = multi(h)
        await lease.acquire()
        assert lease.state is State.HELD
        assert h.transport.operations() == ["TransactWriteItems", "BatchGetItem"]
        assert {h.owner_of(key) for key in KEYS} == {lease.owner}
        await lease.release()
        assert [h.row(key) for key in KEYS] == [None, None, None]

    run(scenario)


def test_a_renewal_whose_answer_is_lost_is_confirmed_by_reading_every_row() -> None:
    async def scenario(h: Harness) -> None:
        lease = multi(h)
        await lease.acquire()
        h.transport.faults.append(lost_answer("TransactWriteItems"))
        await h.clock.advance(1.1)  # the renewal at 1 s: applied, answer lost
        assert lease.state is State.HELD and lease.counters().renewals == 1
        versions = {h.row(key)[p.VERSION_ATTR]["S"] for key in KEYS}  # type: ignore[index]
        assert versions == {lease.version}
        await lease.release()

    run(scenario)


def test_a_release_whose_answer_is_lost_is_confirmed_when_every_row_is_gone() -> None:
    async def scenario(h: Harness) -> None:
        lease = multi(h)
        await lease.acquire()
        h.transport.faults.append(lost_answer("TransactWriteItems"))
        await lease.release()  # no LockLost, no LockReleaseError: the rows are gone
        assert lease.state is State.RELEASED
        assert h.transport.operations()[-2:] == ["TransactWriteItems", "BatchGetItem"]

    run(scenario)


def test_a_row_taken_by_another_owner_loses_the_guard_and_the_others_are_still_deleted() -> None:
    async def scenario(h: Harness) -> None:
        lease = multi(h)
        await lease.acquire()
        h.write_lock("intruder", "v9", 3000, key="b")
        with pytest.raises(LockLost, match="lock on 3 keys"):
            await lease.release()
        assert (h.row("a"), h.owner_of("b"), h.row("c")) == (None, "intruder", None)

    run(scenario)


def test_a_waiter_of_this_client_on_any_of_the_keys_is_woken_by_the_release() -> None:
    async def scenario(h: Harness) -> None:
        holder = multi(h, lease=30.0)
        await holder.acquire()
        waiter = h.lease(key="c", lease=30.0, wait=20.0)
        waiting = asyncio.ensure_future(waiter.acquire())
        await h.clock.advance(2.0)  # waiting on a row held here: polled at the slowest pace
        assert not waiting.done()
        released_at = h.clock.monotonic()
        await holder.release()
        await h.clock.advance(0.0)
        for _ in range(20):  # the woken waiter's create, on this loop, with no clock time
            await asyncio.sleep(0)
        assert waiting.done() and h.clock.monotonic() == pytest.approx(released_at)
        await waiting
        assert h.owner_of("c") == waiter.owner
        await waiter.release()

    run(scenario)
