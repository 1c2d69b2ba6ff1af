"""Fair waiting's decision (``_engine/queue_rows.choose``) and requests, as values."""

from __future__ import annotations

import pytest

from dynalease._engine import queue_rows as q


@pytest.mark.parametrize(
    ("tokens", "stale", "expected"),
    [
        (["me"], [False], q.Head()),
        (["a", "me"], [False, False], q.Wait(1)),
        (["a", "b", "me"], [False, False, False], q.Wait(2)),
        # The first dead waiter ahead is removed; live ones are never overtaken.
        (["a", "b", "me"], [False, True, False], q.Remove(1, "b", None)),
        (["a", "me", "c"], [True, False, True], q.Remove(0, "a", None)),
        # Waiters behind us never matter.
        (["me", "c"], [False, True], q.Head()),
        # Our beats stopped landing and someone removed us.
        (["a"], [False], q.Out()),
    ],
)
def test_a_waiter_goes_only_when_first(
    tokens: list[str], stale: list[bool], expected: q.Choice
) -> None:
    assert q.choose("me", tokens, stale) == expected


def test_the_queue_row_reads_back_in_arrival_order_with_each_beat() -> None:
    item = {
        "key": {"S": q.queue_key("k")},
        "q": {"L": [{"S": "a"}, {"S": "b"}]},
        "b_a": {"S": "v1"},
        "b_b": {"S": "v2"},
    }
    assert q.queue_of(item) == (["a", "b"], {"a": "v1", "b": "v2"})
    assert q.queue_of(None) == ([], {})


def test_a_dead_waiter_is_removed_only_at_its_place_and_beat() -> None:
    params = q.remove_params("locks", "k", 2, "dead", "v7")
    assert params["UpdateExpression"] == "REMOVE #q[2], #b"
    assert params["ConditionExpression"] == "#q[2] = :token AND #b = :beat"
    assert params["ExpressionAttributeNames"] == {"#q": "q", "#b": "b_dead"}


def test_joining_appends_to_the_list_and_returns_the_queue() -> None:
    params = q.join_params("locks", "k", "me", "v1")
    assert "list_append(if_not_exists(#q, :empty), :me)" in params["UpdateExpression"]
    assert params["ReturnValues"] == "ALL_NEW"
