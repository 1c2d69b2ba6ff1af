"""The release's decision on plain values: no I/O, no clock (``release_rules.decide``)."""

from __future__ import annotations

from typing import Any

from dynalease._engine import protocol as p
from dynalease._engine.release_rules import (
    DELETED,
    TAKEN_OVER,
    Action,
    Check,
    Delete,
    Deleted,
    Deletion,
    Done,
    Failed,
    GiveUp,
    Lose,
    Outcome,
    Pause,
    Refused,
    Rows,
    Spent,
    Unknown,
    Unread,
    decide,
)

ONE, THREE = ("a",), ("a", "b", "c")


def row(owner: str) -> dict[str, Any]:
    return {p.KEY_ATTR: {"S": "a"}, p.OWNER_ATTR: {"S": owner}}


def same(action: Action, expected: Action) -> bool:
    """``action`` is ``expected``, class by class: named tuples without fields (``Done()``,
    ``GiveUp()``) are all equal to ``()``, so ``==`` alone cannot tell them apart."""
    return repr(action) == repr(expected)


def after(step: Action, outcome: Outcome, keys: tuple[str, ...] = ONE, **state: Any) -> Action:
    deletion = Deletion(keys, "me", **state)
    deletion.end(step, outcome)
    return decide(deletion)


def test_a_confirmed_delete_ends_the_release_and_a_spent_budget_gives_up() -> None:
    assert same(after(Delete(ONE), Deleted()), Done())
    assert same(after(Delete(THREE), Spent(), THREE), GiveUp())
    assert same(after(Check(ONE, "unknown"), Spent()), GiveUp())


def test_an_unknown_outcome_is_read_back_and_a_row_still_ours_is_deleted_after_a_pause() -> None:
    assert same(after(Delete(THREE), Unknown(), THREE), Check(THREE, "unknown"))
    check = Check(THREE, "unknown")
    assert same(after(check, Rows({"a": None, "b": None, "c": None}), THREE), Done())
    ours = Rows({"a": row("me"), "b": row("me"), "c": row("me")})
    assert same(after(check, ours, THREE), Pause(Delete(THREE)))
    assert same(after(check, Rows({"a": None, "b": row("me"), "c": None}), THREE), Delete(("b",)))
    assert same(after(check, Unread(), THREE), Pause(Delete(THREE)))


def test_a_definite_failure_pauses_while_time_is_left() -> None:
    assert same(after(Delete(ONE), Failed(time_left=True)), Pause(Delete(ONE)))
    assert same(after(Delete(ONE), Failed(time_left=False)), GiveUp())
    assert same(after(Pause(Delete(ONE)), Unread()), Delete(ONE))


def test_a_refused_delete_records_who_took_the_row_and_deletes_the_rest() -> None:
    assert same(after(Delete(ONE), Refused(row("other"))), Lose(TAKEN_OVER, Done()))
    assert same(after(Delete(ONE), Refused(None)), Check(ONE, "refused"))
    assert same(after(Check(ONE, "refused"), Rows({"a": None})), Lose(DELETED, Done()))
    rows = Rows({"a": row("me"), "b": row("other"), "c": row("me")})
    assert same(after(Check(THREE, "refused"), rows, THREE), Lose(TAKEN_OVER, Delete(("a", "c"))))


def test_a_refusal_is_no_loss_after_an_unknown_outcome_or_outside_a_release() -> None:
    assert same(after(Delete(ONE), Refused(row("other")), uncertain=True), Done())
    assert same(after(Delete(ONE), Refused(row("other")), releasing=False), Done())
