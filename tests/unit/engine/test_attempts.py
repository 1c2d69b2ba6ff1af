"""The acquire decision on plain values, and the paths that no longer depend on the clock.

``attempts.decide`` reads an explicit state and returns the next action, with no
I/O and no clock, as tenacity's ``iter()`` does; the lock and the semaphore share
it and differ only in their rules.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from support.lease_harness import Harness, run

from dynalease._engine import protocol as p
from dynalease._engine.attempts import (
    BUDGET,
    HELD,
    RAN_OUT,
    Attempt,
    Create,
    Failed,
    GiveUp,
    Look,
    Looked,
    Read,
    Seen,
    Sleep,
    Slept,
    Spent,
    TakeOver,
    TakeOverAll,
    decide,
)
from dynalease._engine.pacing import Sighting, Unread
from dynalease._engine.permits import PermitTarget
from dynalease._engine.protocol import LockRow
from dynalease._engine.targets import KeysTarget, KeyTarget

LOCK = KeyTarget("k").rules
PERMITS = PermitTarget("k", ("p1", "p2")).rules
ROW = LockRow("k", "someone", "v1", 30_000)


def attempt(**changes: Any) -> Attempt:
    state = Attempt(30.0, 1_035.0, False, 1_000.0, "k", 0.025, 0.025, now=1_000.0)
    for name, value in changes.items():
        setattr(state, name, value)
    return state


def held(eligible: float, key: str = "k") -> Looked:
    return Looked(None, [], [Sighting(key, ROW, eligible, False)], ("someone",))


def test_a_lock_looks_at_the_row_its_create_showed_and_a_semaphore_reads_every_permit() -> None:
    rows = {"k": ROW.to_item()}
    assert decide(attempt(step=Create("k"), outcome=Seen(rows)), LOCK) == Look(rows)
    assert type(decide(attempt(step=Create("k"), outcome=Seen(rows)), PERMITS)) is Read
    assert decide(attempt(step=Read(), outcome=Seen(rows)), PERMITS) == Look(rows)


def test_a_free_row_is_created_a_stale_one_taken_over_a_held_one_waited_for() -> None:
    free = Looked(None, ["k"], [], ())
    assert decide(attempt(step=Look({}), outcome=free), LOCK) == Create("k")
    stale = decide(attempt(step=Look({}), outcome=held(eligible=999.0)), LOCK)
    assert stale == TakeOver("k", ROW)
    wait = decide(attempt(step=Look({}), outcome=held(eligible=1_010.0)), LOCK)
    assert isinstance(wait, Sleep) and wait.wake and type(wait.then) is Read
    assert 0 < wait.seconds <= p.poll_cap(30.0) * 1.2


def test_a_single_attempt_gives_up_on_a_held_row_and_a_wait_that_ran_out_says_so() -> None:
    single = attempt(step=Look({}), outcome=held(eligible=1_010.0), single=True)
    assert decide(single, LOCK) == GiveUp(HELD, ("someone",))
    waited = Sleep(0.5, Read(), wake=True, holders=("someone",))
    out = attempt(outcome=Slept(None, time_left=False))
    out.begin(waited)
    assert decide(out, LOCK) == GiveUp(RAN_OUT, ("someone",))
    woken = attempt(step=waited, outcome=Slept("k", time_left=False))
    assert decide(woken, LOCK) == Create("k")


@pytest.mark.parametrize(
    ("rules", "step", "unknown", "expected"),
    [
        (LOCK, Create("k"), False, Create("k")),  # a lock sends its create again
        (LOCK, Create("k"), True, Read()),  # an unknown outcome is followed by a read
        (LOCK, TakeOver("k", ROW), False, Read()),
        (PERMITS, Create("k"), False, Read()),  # a semaphore reads every permit
    ],
)
def test_a_failed_request_is_followed_by_a_pause_and_the_rules_next_step(
    rules: Any, step: Any, unknown: bool, expected: Any
) -> None:
    action = decide(attempt(step=step, outcome=Failed(unknown)), rules)
    assert isinstance(action, Sleep) and not action.wake and action.then == expected


def test_the_deadline_during_a_poll_of_held_rows_is_still_a_wait_that_ran_out() -> None:
    polling = attempt()
    polling.begin(Sleep(0.5, Read(), wake=True, holders=("someone",)))
    polling.begin(Read())  # the sleep ended a hair before the deadline
    polling.outcome = Spent()  # and no time was left to send the read
    assert decide(polling, LOCK) == GiveUp(RAN_OUT, ("someone",))
    polling.begin(Sleep(0.1, Read()))  # after a failed poll: a backoff pause, no wake
    polling.outcome = Slept(None, time_left=False)
    assert decide(polling, LOCK) == GiveUp(RAN_OUT, ("someone",))
    polling.begin(TakeOver("k", ROW))  # a write: no longer waiting on held rows
    polling.outcome = Spent()
    assert decide(polling, LOCK) == GiveUp(BUDGET)


def test_a_spent_budget_gives_up_and_a_definite_failure_ends_a_single_attempt() -> None:
    assert decide(attempt(outcome=Spent()), LOCK) == GiveUp(BUDGET)
    single = attempt(step=Read(), outcome=Failed(False), single=True)
    assert decide(single, LOCK) == GiveUp(BUDGET)
    assert decide(single, PERMITS) == GiveUp(BUDGET)


# --- the same paths on the manual clock as on the system clock --------------------


def test_requests_on_the_manual_clock_are_bounded_by_the_transport() -> None:
    async def scenario(h: Harness) -> None:
        bounded: list[float] = []
        handle_async = h.transport.handle_async

        async def recording(request: Any) -> Any:
            bounded.append(request.timeout)
            return await handle_async(request)

        h.transport.handle_async = recording  # type: ignore[method-assign]
        lease = h.lease(lease=30.0)
        await lease.acquire()
        await lease.release()
        assert bounded == [p.request_timeout(30.0, 35.0), p.request_timeout(30.0, 10.0)]

    run(scenario)


def test_renewals_on_the_manual_clock_start_only_when_the_first_one_is_due() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3.0)
        await lease.acquire()
        await h.clock.advance(0.9)
        assert lease.renewer.task is None  # deferred: a short hold costs no task
        await h.clock.advance(0.2)
        assert lease.renewer.task is not None
        assert h.transport.operations() == ["PutItem", "UpdateItem"]
        await lease.release()

    run(scenario)


# --- a multi-key guard: every row at once ------------------------------------------

KEYS = KeysTarget(("a", "b", "c")).rules


def test_a_multi_key_guard_looks_at_every_row_read_after_a_refused_transaction() -> None:
    # The write step reads every row (a transaction's refusal shows none), then looks.
    rows: dict[str, Any] = {"a": None, "b": ROW.to_item(), "c": None}
    assert decide(attempt(step=Create("a"), outcome=Seen(rows)), KEYS) == Look(rows)
    assert decide(attempt(step=Read(), outcome=Seen(rows)), KEYS) == Look(rows)


def test_a_multi_key_guard_writes_only_when_every_row_is_free_or_stale() -> None:
    free = Looked(None, ["a", "b", "c"], [], ())
    assert decide(attempt(step=Look({}), outcome=free), KEYS) == Create("k")
    stale_b = Sighting("b", ROW, 999.0, False)
    some_stale = Looked(None, ["a", "c"], [stale_b], ("someone",))
    assert decide(attempt(step=Look({}), outcome=some_stale), KEYS) == TakeOverAll("k", {"b": ROW})
    live_c = Sighting("c", ROW._replace(key="c"), 1_010.0, False)
    one_live = Looked(None, ["a"], [stale_b, live_c], ("someone", "someone"))
    waiting = decide(attempt(step=Look({}), outcome=one_live), KEYS)
    assert isinstance(waiting, Sleep) and waiting.wake and type(waiting.then) is Read
    assert waiting.seconds <= 10.0 and waiting.holders == ("someone",)
    single = decide(attempt(step=Look({}), outcome=one_live, single=True), KEYS)
    assert single == GiveUp(HELD, ("someone",))


def test_a_refused_takeover_of_every_row_is_followed_by_a_look_at_the_rows_read() -> None:
    step = TakeOverAll("k", {"b": ROW})
    rows: dict[str, Any] = {"a": None, "b": ROW.to_item(), "c": None}
    assert decide(attempt(step=step, outcome=Seen(rows)), KEYS) == Look(rows)
    again = decide(attempt(step=step, outcome=Failed(unknown=False)), KEYS)
    assert isinstance(again, Sleep) and type(again.then) is Read


def test_the_attempt_counts_unconnected_requests_and_grows_a_series_after_a_full_pause() -> None:
    state = attempt(step=Create("k"))
    state.end(Failed(unknown=False, code="EndpointConnectionError"))
    state.end(Failed(unknown=False, code="EndpointConnectionError"))
    assert state.refused == 2
    state.end(Failed(unknown=True))
    assert state.refused == -1
    poll, backoff = state.poll, state.backoff
    state.begin(Sleep(0.1, Read(), grow="poll"))
    state.end(Slept(None, time_left=True))
    assert state.poll > poll and state.backoff == backoff
    state.begin(Sleep(0.1, Read(), wake=True, grow="backoff"))
    state.end(Slept("k", time_left=True))  # woken: the series stays
    assert state.backoff == backoff


def test_the_decision_is_deterministic_given_the_attempts_random_source() -> None:
    looked = Looked(None, ["a", "b", "c", "d"], [], ())
    choices = set()
    for _ in range(5):
        state = attempt(step=Look({}), outcome=looked)
        state.rng = random.Random(7)
        choices.add(decide(state, LOCK))
    assert len(choices) == 1


def test_a_batch_read_asks_again_only_for_its_unread_keys_after_a_growing_pause() -> None:
    unread = Unread(30.0, random.Random(1))
    assert unread.again(("a", "b"), ()) is None
    asked = unread.again(("a", "b", "c"), ("c", "x"))
    assert asked is not None and asked[0] == ("c",) and 0.02 <= asked[1] <= 0.03
    again = unread.again(("c",), ("c",))
    assert again is not None and again[1] > asked[1]
