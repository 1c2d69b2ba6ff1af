"""Semaphore permits on the manual clock: which requests an acquisition sends, and when.

Each test runs one permit lease on the test's own event loop (``lease_harness``);
other holders are rows written straight into the in-memory table.
"""

from __future__ import annotations

import asyncio

import pytest
from support.lease_harness import FOREVER, TABLE, Fault, Harness, lost_answer, run

from dynalease._engine import permits
from dynalease._engine.states import State
from dynalease.exceptions import LockNotAcquired, ThrottledError
from dynalease.keys import permit_keys

KEYS = permit_keys("k", 3)


@pytest.fixture(autouse=True)
def first_permit_is_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every acquisition at permit 1, so tests can say which permit is tried first."""
    monkeypatch.setattr(permits.random, "randrange", lambda n: 0)


def hold(h: Harness, *keys: str, lease_ms: int = 30_000) -> None:
    for index, key in enumerate(keys):
        h.write_lock(f"other-{index}", f"v-{index}", lease_ms, key=key)


def test_an_uncontended_acquisition_is_one_write() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.permit_lease()
        await lease.acquire()
        assert h.transport.operations() == ["PutItem"]
        assert lease.key == KEYS[0] and h.owner_of(KEYS[0]) == lease.owner
        assert lease.counters().write_requests == 1 and lease.counters().read_requests == 0
        await lease.release()
        assert h.row(KEYS[0]) is None

    run(scenario)


def test_a_taken_first_permit_costs_one_batch_read_and_the_free_one_is_created() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, KEYS[0], KEYS[1])
        lease = h.permit_lease()
        await lease.acquire()
        assert h.transport.operations() == ["PutItem", "BatchGetItem", "PutItem"]
        batch = h.transport.sent[1].params["RequestItems"][TABLE]
        assert batch["ConsistentRead"] is True
        assert [k["key"]["S"] for k in batch["Keys"]] == list(KEYS)
        assert lease.key == KEYS[2] and h.owner_of(KEYS[2]) == lease.owner

    run(scenario)


def test_while_all_permits_are_held_each_poll_is_one_batch_read() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, *KEYS)
        lease = h.permit_lease(lease=30, wait=3)
        start = h.clock.monotonic()
        with pytest.raises(
            LockNotAcquired, match=r"semaphore key_hash=\w+ in table.*none of its 3 permits"
        ):
            await h.clock.run(lease.acquire())
        assert h.clock.monotonic() - start == pytest.approx(3.0)  # the budget, no more
        operations = h.transport.operations()
        assert operations[0] == "PutItem" and set(operations[1:]) == {"BatchGetItem"}
        assert len(operations) > 3  # polled several times within the wait
        metrics = lease.counters()
        assert metrics.read_requests == len(operations) - 1 and metrics.write_requests == 1
        assert lease.state is State.NOT_ACQUIRED

    run(scenario)


def test_zero_wait_makes_one_create_and_one_batch_read() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, *KEYS)
        lease = h.permit_lease(wait=0)
        with pytest.raises(LockNotAcquired, match="wait_timeout=0"):
            await lease.acquire()
        assert h.transport.operations() == ["PutItem", "BatchGetItem"]

    run(scenario)


def test_an_abandoned_permit_is_taken_over_only_after_its_stored_lease_was_observed() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, *KEYS, lease_ms=10_000)
        lease = h.permit_lease(lease=30, wait=60)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        took = h.transport.times("PutItem")[-1]
        assert took - start >= 10.0  # first seen at the first batch read, just after start
        assert took - start < 10.0 + 1.5  # and not much later: polls stop at eligibility
        assert h.owner_of(lease.key) == lease.owner
        takeover = h.transport.sent[-1].params
        assert takeover["ConditionExpression"] == "#o = :o AND #v = :v"
        assert sum(h.owner_of(key) == lease.owner for key in KEYS) == 1

    run(scenario)


def test_a_permit_renewed_by_its_holder_is_never_taken_over() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, *KEYS, lease_ms=10_000)
        lease = h.permit_lease(lease=30, wait=25)
        running = asyncio.ensure_future(lease.acquire())
        for step in range(6):  # every 5 s each holder writes a new version
            await h.clock.advance(5)
            for index, key in enumerate(KEYS):
                h.write_lock(f"other-{index}", f"v-{index}-{step}", 10_000, key=key)
        assert running.done()
        with pytest.raises(LockNotAcquired):
            await running
        assert {h.owner_of(key) for key in KEYS} == {"other-0", "other-1", "other-2"}

    run(scenario)


def test_unprocessed_keys_are_asked_for_again() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, KEYS[0], KEYS[1])
        h.db.batch_limit = 2  # DynamoDB reads two, leaves the third unprocessed
        lease = h.permit_lease()
        await h.clock.run(lease.acquire())
        assert h.transport.operations() == ["PutItem", "BatchGetItem", "BatchGetItem", "PutItem"]
        again = h.transport.sent[2].params["RequestItems"][TABLE]["Keys"]
        assert [k["key"]["S"] for k in again] == [KEYS[2]]
        assert lease.key == KEYS[2]

    run(scenario)


def test_a_create_with_a_lost_answer_is_found_ours_by_the_batch_read() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(lost_answer("PutItem"))  # applied, answer lost
        lease = h.permit_lease()
        await h.clock.run(lease.acquire())
        assert lease.state is State.HELD and lease.key == KEYS[0]
        assert h.owner_of(KEYS[0]) == lease.owner
        assert [h.owner_of(key) for key in KEYS[1:]] == [None, None]

    run(scenario)


def test_renewal_and_release_go_to_the_permit_held() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, KEYS[0])
        lease = h.permit_lease(lease=3)
        await h.clock.run(lease.acquire())
        held = lease.key
        assert held != KEYS[0]
        await h.clock.advance(1.1)  # past lease / 3: one renewal
        renewal = [s for s in h.transport.sent if s.operation == "UpdateItem"]
        assert renewal and renewal[0].params["Key"] == {"key": {"S": held}}
        await lease.release()
        assert h.row(held) is None and h.owner_of(KEYS[0]) == "other-0"

    run(scenario)


def test_permit_keys_cannot_be_lock_keys() -> None:
    from dynalease.keys import validate_key

    assert permit_keys("job", 2) == ("dynalease-permit:1:job", "dynalease-permit:2:job")
    with pytest.raises(ValueError, match="reserved for semaphore permit rows"):
        validate_key("dynalease-permit:1:job")
    with pytest.raises(ValueError, match="reserved"):
        permit_keys("dynalease-permit:1:job", 2)
    with pytest.raises(ValueError, match="between 1 and 100"):
        permit_keys("job", 0)
    with pytest.raises(ValueError, match="between 1 and 100"):
        permit_keys("job", 101)
    with pytest.raises(TypeError, match="permits must be an int"):
        permit_keys("job", True)
    with pytest.raises(ValueError, match="too long for a semaphore"):
        permit_keys("x" * 2040, 3)


def test_a_create_with_an_unknown_outcome_is_retried_on_the_same_permit() -> None:
    async def scenario(h: Harness) -> None:
        # The first create reaches the table only after 8 s, and its answer never comes.
        h.transport.faults.append(Fault("PutItem", before=8.0, after=FOREVER))
        lease = h.permit_lease(lease=30, wait=20)
        await h.clock.run(lease.acquire(), limit=60)
        assert lease.state is State.HELD and lease.key == KEYS[0]
        creates = [
            s.params["Item"]["key"]["S"] for s in h.transport.sent if s.operation == "PutItem"
        ]
        assert creates[:2] == [KEYS[0], KEYS[0]]  # not a second row on another permit
        await h.clock.advance(10)  # the late create lands now: its condition fails
        assert [h.owner_of(key) for key in KEYS] == [lease.owner, None, None]
        await lease.release()

    run(scenario)


def test_a_guard_that_gives_up_deletes_a_create_that_lands_late() -> None:
    async def scenario(h: Harness) -> None:
        hold(h, KEYS[1], KEYS[2])
        h.transport.faults.append(Fault("PutItem", before=6.0))  # reaches the table at 6 s
        lease = h.permit_lease(lease=30, wait=4)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire(), limit=5)
        assert lease.state is State.NOT_ACQUIRED and h.row(KEYS[0]) is None
        await h.clock.advance(3)  # it lands after the guard gave up
        assert h.row(KEYS[0]) is None  # deleted again by the guard's cleanup
        deletes = [s for s in h.transport.sent if s.operation == "DeleteItem"]
        assert deletes and deletes[-1].params["Key"] == {"key": {"S": KEYS[0]}}
        assert [h.owner_of(key) for key in KEYS[1:]] == ["other-0", "other-1"]

    run(scenario)


def test_a_denied_batch_read_names_the_grant_semaphores_need() -> None:
    from dynalease._transport.errors import map_error_code
    from dynalease.exceptions import AccessDeniedError

    error = map_error_code("AccessDeniedException", "not authorized", "BatchGetItem", 400, {})
    assert isinstance(error, AccessDeniedError)
    assert "LockTable.grant_semaphore" in str(error)
    plain = map_error_code("AccessDeniedException", "not authorized", "GetItem", 400, {})
    assert "grant_semaphore" not in str(plain)


def test_a_release_in_this_client_hands_its_permit_to_one_waiter_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starts = iter([0, 1, 0, 1])
    monkeypatch.setattr(permits.random, "randrange", lambda n: next(starts))

    async def scenario(h: Harness) -> None:
        holders = [h.permit_lease(permits=2, lease=30) for _ in range(2)]
        for holder in holders:
            await holder.acquire()
        waiters = [h.permit_lease(permits=2, lease=30) for _ in range(2)]
        tasks = []
        for waiter in waiters:
            tasks.append(asyncio.ensure_future(waiter.acquire()))
            await h.clock.advance(0.01)
        await h.clock.advance(0.5)  # both poll, all permits held
        before = len(h.transport.sent)
        await holders[1].release()
        await h.clock.settle()
        after = h.transport.operations()[before:]
        assert after == ["DeleteItem", "PutItem"]  # no poll needed: one waiter took it
        [first] = [w for w in waiters if w.state is State.HELD]
        [second] = [w for w in waiters if w.state is State.ACQUIRING]
        assert first.key == holders[1].key
        await holders[0].release()
        await h.clock.settle()
        assert second.state is State.HELD and second.key == holders[0].key
        for waiter in waiters:
            await waiter.release()
        await asyncio.gather(*tasks)

    run(scenario)


def test_zero_wait_does_not_retry_a_throttled_create() -> None:
    async def scenario(h: Harness) -> None:
        throttled = ThrottledError("slow down", operation="PutItem")
        h.transport.faults.append(Fault("PutItem", commit=False, error=throttled))
        lease = h.permit_lease(wait=0)
        with pytest.raises(LockNotAcquired) as raised:
            await lease.acquire()
        assert isinstance(raised.value.__cause__, ThrottledError)
        assert h.transport.operations() == ["PutItem"]

    run(scenario)
