"""dynalease.fencing's request and statement building: pure logic, checked before any I/O."""

from __future__ import annotations

from typing import Any

import pytest

from dynalease.fencing import fence_dynamodb_write, fenced_update_statement

CHECK = "(attribute_not_exists(#dynalease_fence) OR #dynalease_fence <= :dynalease_fence)"


def test_a_put_stores_the_token_and_is_conditioned_on_it() -> None:
    request = {"TableName": "orders", "Item": {"id": {"S": "1"}}}
    fenced = fence_dynamodb_write(request, 7)
    assert fenced["Item"] == {"id": {"S": "1"}, "fence": {"N": "7"}}
    assert fenced["ConditionExpression"] == CHECK
    assert fenced["ExpressionAttributeNames"] == {"#dynalease_fence": "fence"}
    assert fenced["ExpressionAttributeValues"] == {":dynalease_fence": {"N": "7"}}
    assert request == {"TableName": "orders", "Item": {"id": {"S": "1"}}}  # not changed


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("SET #s = :s", "SET #s = :s, #dynalease_fence = :dynalease_fence"),
        ("set a = :a REMOVE b", "set a = :a, #dynalease_fence = :dynalease_fence REMOVE b"),
        ("REMOVE b SET a = :a", "REMOVE b SET a = :a, #dynalease_fence = :dynalease_fence"),
        ("ADD n :one", "SET #dynalease_fence = :dynalease_fence ADD n :one"),
        (
            "SET a = if_not_exists(a, :z)",
            "SET a = if_not_exists(a, :z), #dynalease_fence = :dynalease_fence",
        ),
    ],
)
def test_an_update_sets_the_token_in_its_one_set_clause(expression: str, expected: str) -> None:
    request = {
        "TableName": "t",
        "Key": {"id": {"S": "1"}},
        "UpdateExpression": expression,
        "ConditionExpression": "attribute_exists(id)",
    }
    fenced = fence_dynamodb_write(request, 3, attribute="token", plain_values=True)
    assert fenced["UpdateExpression"] == expected
    assert fenced["ConditionExpression"] == f"(attribute_exists(id)) AND {CHECK}"
    assert fenced["ExpressionAttributeNames"] == {"#dynalease_fence": "token"}
    assert fenced["ExpressionAttributeValues"] == {":dynalease_fence": 3}


@pytest.mark.parametrize(
    ("request_", "token", "error", "match"),
    [
        ({"TableName": "t", "Item": {}}, 0, ValueError, "1 or more"),
        ({"TableName": "t", "Item": {}}, True, TypeError, "must be an int"),
        ({"TableName": "t", "Item": {}}, "3", TypeError, "must be an int"),
        ({"TableName": "t", "Key": {}}, 1, ValueError, "UpdateExpression"),
        ({"TableName": "t", "Key": {}, "AttributeUpdates": {}}, 1, ValueError, "legacy"),
        (
            {"TableName": "t", "Item": {}, "ExpressionAttributeValues": {":dynalease_fence": 1}},
            1,
            ValueError,
            "rename",
        ),
    ],
)
def test_bad_requests_and_tokens_are_refused(
    request_: dict[str, Any], token: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        fence_dynamodb_write(request_, token)


@pytest.mark.parametrize(
    ("style", "sql_markers", "parameters"),
    [
        ("qmark", ("?", "?", "?", "?"), ["done", 5, 7, 5]),
        ("format", ("%s", "%s", "%s", "%s"), ["done", 5, 7, 5]),
        ("numeric", (":1", ":2", ":3", ":4"), ["done", 5, 7, 5]),
        ("named", (":p1", ":p2", ":p3", ":p4"), {"p1": "done", "p2": 5, "p3": 7, "p4": 5}),
        (
            "pyformat",
            ("%(p1)s", "%(p2)s", "%(p3)s", "%(p4)s"),
            {"p1": "done", "p2": 5, "p3": 7, "p4": 5},
        ),
    ],
)
def test_the_sql_statement_in_every_paramstyle(
    style: str, sql_markers: tuple[str, ...], parameters: Any
) -> None:
    sql, values = fenced_update_statement(
        "app.jobs", set={"state": "done"}, where={"id": 7}, token=5, paramstyle=style
    )
    a, b, c, d = sql_markers
    assert sql == (
        f'UPDATE "app"."jobs" SET "state" = {a}, "fence" = {b} '
        f'WHERE "id" = {c} AND ("fence" IS NULL OR "fence" <= {d})'
    )
    assert values == parameters


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"table": "jobs; DROP TABLE x"}, "plain SQL identifier"),
        ({"set": {"a b": 1}}, "plain SQL identifier"),
        ({"set": {}}, "at least one column"),
        ({"where": {}}, "name the row"),
        ({"set": {"fence": 1}}, "must not write"),
        ({"paramstyle": "dollar"}, "paramstyle must be"),
        ({"token": -1}, "1 or more"),
    ],
)
def test_bad_statements_are_refused(options: dict[str, Any], match: str) -> None:
    arguments: dict[str, Any] = {"table": "jobs", "set": {"a": 1}, "where": {"id": 1}, "token": 1}
    with pytest.raises((ValueError, TypeError), match=match):
        fenced_update_statement(**{**arguments, **options})
