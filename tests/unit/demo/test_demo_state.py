"""The demo's bookkeeping: events folded into holders, takeovers and percentiles."""

from __future__ import annotations

from dynalease_dev.demo.state import RELEASED_ROW, DemoState, percentile


def _crashed() -> DemoState:
    state = DemoState(started=0.0)
    state.apply("w1", {"event": "waiting", "key": "k"}, 1.0)
    state.apply("w1", {"event": "acquired", "key": "k", "owner": "o1", "wait_ms": 3}, 1.1)
    state.apply("w2", {"event": "waiting", "key": "k"}, 1.2)
    state.killed("w1", 2.0)
    return state


def test_a_takeover_by_a_ledger_worker_is_attributed_by_its_owner_token() -> None:
    state = _crashed()
    state.apply("w2", {"event": "acquired", "key": "k", "owner": "o2", "wait_ms": 4000}, 5.0)
    state.taken_over("o2", 5.05)
    assert state.crash is not None and state.crash.takeover_after_s == 3.05
    assert state.successor() == "w2"
    assert state.crash.ledger_after
    assert state.takeovers == 1


def test_an_unreported_owner_is_the_worker_whose_acquisition_followed_the_kill() -> None:
    state = _crashed()
    state.taken_over("audit-owner", 5.0)  # an audit call does not report its owner
    state.apply("w2", {"event": "acquired", "key": "k", "wait_ms": 3900}, 5.2)
    assert state.successor() == "w2"
    assert state.crash is not None and not state.crash.ledger_after


def test_an_owner_no_worker_reported_is_a_lambda_handler() -> None:
    state = _crashed()
    state.taken_over("lambda-owner", 5.0)
    state.apply("w2", {"event": "acquired", "key": "k", "wait_ms": 9000}, 9.0)  # much later
    assert state.successor() == "a Lambda handler"
    released = _crashed()
    released.taken_over(RELEASED_ROW, 5.0)
    assert released.successor() == "another owner"


def test_percentiles_use_the_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.95) == 95.0
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([], 0.5) is None
