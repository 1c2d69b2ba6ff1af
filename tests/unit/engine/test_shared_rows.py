"""The reader's decision (``_engine/shared_rows.choose``) and the requests it sends, as values."""

from __future__ import annotations

import pytest

from dynalease._engine import shared_rows as s
from dynalease._engine.protocol import FENCED_PROTOCOL, LockRow

ME = "me-token"
SHARED = LockRow("cfg", s.SHARED_OWNER, "v1", 6000)
WRITER_HELD = LockRow("cfg", "writer-token", "v2", 6000)
PYDYNOX = LockRow("cfg", "pydynox-token", "v3", 6000)
WAITING_WRITER = LockRow(s.writer_key("cfg"), "writer-token", "v4", 6000, FENCED_PROTOCOL, 7)


@pytest.mark.parametrize(
    ("main", "readers", "main_stale", "writer", "writer_stale", "expected"),
    [
        # No one: join (creating the shared row).
        (None, frozenset(), False, None, False, s.Join()),
        # Other readers in: join them.
        (SHARED, frozenset({"other"}), False, None, False, s.Join()),
        # Our earlier join landed after all.
        (SHARED, frozenset({ME, "other"}), False, None, False, s.Joined()),
        # A waiting (or holding) writer stops new readers, even with readers in.
        (SHARED, frozenset({"other"}), False, WAITING_WRITER, False, s.Wait(writer=True)),
        (None, frozenset(), False, WAITING_WRITER, False, s.Wait(writer=True)),
        # A writer row unchanged for its lease: its writer died; free it (counter kept).
        (SHARED, frozenset(), False, WAITING_WRITER, True, s.FreeWriter(WAITING_WRITER)),
        # A writer or pydynox holds the lock row: wait, or take it over once abandoned.
        (WRITER_HELD, frozenset(), False, None, False, s.Wait(writer=False)),
        (PYDYNOX, frozenset(), False, None, False, s.Wait(writer=False)),
        (PYDYNOX, frozenset(), True, None, False, s.Join(PYDYNOX)),
        # Every reader of a shared row died: a new reader set over it.
        (SHARED, frozenset({"dead"}), True, None, False, s.Join(SHARED)),
    ],
)
def test_a_reader_chooses_from_both_rows(
    main: LockRow | None,
    readers: frozenset[str],
    main_stale: bool,
    writer: LockRow | None,
    writer_stale: bool,
    expected: s.Choice,
) -> None:
    assert s.choose(ME, main, readers, main_stale, writer, writer_stale) == expected


def test_a_join_adds_to_a_live_reader_set_and_checks_that_no_writer_waits() -> None:
    update, check = s.join_actions("locks", "cfg", ME, "v9", 6000, None)
    params = update["Update"]
    assert params["UpdateExpression"].endswith("ADD #r :me")
    assert params["ConditionExpression"] == "attribute_not_exists(#k) OR #o = :shared"
    assert params["ExpressionAttributeValues"][":me"] == {"SS": [ME]}
    assert check["ConditionCheck"]["Key"] == {"key": {"S": "dynalease-writer:cfg"}}
    assert check["ConditionCheck"]["ConditionExpression"] == "attribute_not_exists(#o)"


def test_a_join_over_an_abandoned_row_starts_a_new_reader_set_on_its_exact_version() -> None:
    update, _ = s.join_actions("locks", "cfg", ME, "v9", 6000, PYDYNOX)
    params = update["Update"]
    assert "#r = :me" in params["UpdateExpression"] and "ADD" not in params["UpdateExpression"]
    assert params["ConditionExpression"] == "#o = :oo AND #v = :ov"
    values = params["ExpressionAttributeValues"]
    assert (values[":oo"], values[":ov"]) == ({"S": "pydynox-token"}, {"S": "v3"})


def test_renewal_and_leaving_hold_only_while_we_are_among_the_readers() -> None:
    renew = s.renew_params("locks", "cfg", ME, "v10", 6000)
    leave = s.leave_params("locks", "cfg", ME)
    for params in (renew, leave):
        assert params["ConditionExpression"] == "#o = :shared AND contains(#r, :me)"
    assert leave["ReturnValues"] == "ALL_NEW"  # the last reader out sees an empty set
    drop = s.drop_params("locks", "cfg")
    assert drop["ConditionExpression"] == "#o = :shared AND attribute_not_exists(#r)"


def test_only_the_attribute_names_an_expression_uses_are_sent() -> None:
    for params in (
        s.renew_params("locks", "cfg", ME, "v", 1000),
        s.drop_params("locks", "cfg"),
        s.free_writer_params("locks", WAITING_WRITER),
    ):
        text = params["ConditionExpression"] + params.get("UpdateExpression", "")
        assert all(name in text for name in params["ExpressionAttributeNames"])
