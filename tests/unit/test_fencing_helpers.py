"""dynalease.fencing's request and statement building: pure logic, checked before any I/O."""

from __future__ import annotations

from typing import Any

import pytest

from dynalease.fencing import (
    fence_dynamodb_delete,
    fence_dynamodb_write,
    fenced_update_statement,
)

CHECK = "(attribute_not_exists(#dynalease_fence) OR #dynalease_fence <= :dynalease_fence)"
FENCE = "#dynalease_fence = :dynalease_fence"
UNMARK = "REMOVE #dynalease_tombstone"


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
        ("SET #s = :s", f"SET #s = :s, {FENCE} {UNMARK}"),
        ("set a = :a REMOVE b", f"set a = :a, {FENCE} REMOVE b, #dynalease_tombstone"),
        ("REMOVE b SET a = :a", f"REMOVE b, #dynalease_tombstone SET a = :a, {FENCE}"),
        ("ADD n :one", f"SET {FENCE} ADD n :one {UNMARK}"),
        ("SET a = if_not_exists(a, :z)", f"SET a = if_not_exists(a, :z), {FENCE} {UNMARK}"),
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
    assert fenced["ExpressionAttributeNames"] == {
        "#dynalease_fence": "token",
        "#dynalease_tombstone": "fence_tombstone",
    }
    assert fenced["ExpressionAttributeValues"] == {":dynalease_fence": 3}


@pytest.mark.parametrize(
    "expression",
    ["SET #s = :set", "SET #s = :add", "SET #set = :remove ADD #add :delete", "SET #s = :x-set"],
)
def test_placeholders_named_like_clause_keywords_are_not_clauses(expression: str) -> None:
    request = {"TableName": "t", "Key": {"id": {"S": "1"}}, "UpdateExpression": expression}
    fenced = fence_dynamodb_write(request, 3)["UpdateExpression"]
    set_clause = expression.split(" ADD ")[0]
    assert fenced.startswith(f"{set_clause}, {FENCE}")
    assert fenced.endswith(f"{expression[len(set_clause) :]} {UNMARK}")


def test_a_delete_becomes_a_fenced_put_of_a_tombstone() -> None:
    request = {
        "TableName": "orders",
        "Key": {"id": {"S": "7"}},
        "ConditionExpression": "#s = :done",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":done": {"S": "done"}},
        "ReturnValues": "ALL_OLD",
    }
    fenced = fence_dynamodb_delete(request, 4)
    assert fenced == {
        "TableName": "orders",
        "Item": {"id": {"S": "7"}, "fence": {"N": "4"}, "fence_tombstone": {"BOOL": True}},
        "ConditionExpression": f"(#s = :done) AND {CHECK}",
        "ExpressionAttributeNames": {"#s": "status", "#dynalease_fence": "fence"},
        "ExpressionAttributeValues": {":done": {"S": "done"}, ":dynalease_fence": {"N": "4"}},
        "ReturnValues": "ALL_OLD",
    }
    plain = fence_dynamodb_delete(
        {"Key": {"id": "7"}}, 5, attribute="token", tombstone="gone", plain_values=True
    )
    assert plain["Item"] == {"id": "7", "token": 5, "gone": True}
    assert request["Key"] == {"id": {"S": "7"}}  # not changed


@pytest.mark.parametrize(
    ("request_", "error", "match"),
    [
        ({"TableName": "t"}, TypeError, "with a Key"),
        ({"TableName": "t", "Key": {}, "Expected": {}}, ValueError, "Expected"),
        ({"TableName": "t", "Key": {}, "ReturnValues": "ALL_NEW"}, ValueError, "ALL_OLD"),
        (
            {"Key": {}, "ExpressionAttributeNames": {"#dynalease_fence": "x"}},
            ValueError,
            "rename",
        ),
    ],
)
def test_bad_delete_requests_are_refused(
    request_: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        fence_dynamodb_delete(request_, 1)


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
        f'WHERE "id" = {c} AND ("fence" IS NULL OR (CAST("fence" AS BIGINT) <= {d} '
        'AND CAST(CAST("fence" AS BIGINT) AS TEXT) = CAST("fence" AS TEXT)))'
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
