"""moto's TransactWriteItems as the in-process backend and the local server run it.

A failed transaction must leave every item as before (DynamoDB's promise), and
a transaction must cost what it touches, not the size of its tables: moto
deep-copies every table a transaction names and keeps every copied item alive,
which made the local server grow by gigabytes under ``check_in`` (issue 30).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from moto.dynamodb.models.dynamo_type import Item

from dynalease.exceptions import DynamoDBError
from dynalease.testing._moto import InProcessDynamoDB


def _table(db: InProcessDynamoDB, name: str, *, sort_key: bool = False) -> None:
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    if sort_key:
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        attributes.append({"AttributeName": "sk", "AttributeType": "S"})
    db.call(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": schema,
            "AttributeDefinitions": attributes,
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def _s(value: str) -> dict[str, str]:
    return {"S": value}


@pytest.fixture
def db() -> InProcessDynamoDB:
    db = InProcessDynamoDB()
    _table(db, "locks")
    _table(db, "results", sort_key=True)
    for key in ("a", "b", "c"):
        db.call("PutItem", {"TableName": "locks", "Item": {"pk": _s(key), "n": {"N": "1"}}})
    db.call(
        "PutItem",
        {
            "TableName": "results",
            "Item": {"pk": _s("r"), "sk": _s("1"), "m": {"M": {"x": _s("y")}}},
        },
    )
    return db


def _update(table: str, key: dict[str, Any], expression: str, values: dict[str, Any]) -> Any:
    return {
        "Update": {
            "TableName": table,
            "Key": key,
            "UpdateExpression": expression,
            "ExpressionAttributeValues": values,
        }
    }


def _changes_then(last: dict[str, Any]) -> list[dict[str, Any]]:
    """Every kind of change, on both tables, before ``last``, which makes the whole fail."""
    return [
        {"Put": {"TableName": "locks", "Item": {"pk": _s("new"), "n": {"N": "9"}}}},
        {"Put": {"TableName": "locks", "Item": {"pk": _s("a"), "n": {"N": "9"}}}},
        _update("locks", {"pk": _s("b")}, "SET n = n + :one", {":one": {"N": "1"}}),
        {"Delete": {"TableName": "locks", "Key": {"pk": _s("c")}}},
        _update("results", {"pk": _s("r"), "sk": _s("1")}, "SET m.x = :z", {":z": _s("z")}),
        {"Put": {"TableName": "results", "Item": {"pk": _s("r"), "sk": _s("2")}}},
        last,
    ]


@pytest.mark.parametrize(
    ("last", "code"),
    [
        (  # a failed condition: the everyday cancelled check_in
            {
                "ConditionCheck": {
                    "TableName": "locks",
                    "Key": {"pk": _s("missing")},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            "TransactionCanceledException",
        ),
        (  # the same item twice
            {"Delete": {"TableName": "locks", "Key": {"pk": _s("a")}}},
            "ValidationException",
        ),
        (  # an item that does not fit the table
            {"Put": {"TableName": "locks", "Item": {"pk": {"N": "1"}}}},
            "ValidationException",
        ),
    ],
)
def test_a_failed_transaction_leaves_every_item_as_before(
    db: InProcessDynamoDB, last: dict[str, Any], code: str
) -> None:
    before = db.tables()
    with pytest.raises(DynamoDBError) as failed:
        db.call("TransactWriteItems", {"TransactItems": _changes_then(last)})
    assert failed.value.code == code
    assert db.tables() == before


def test_a_committed_transaction_keeps_all_its_changes(db: InProcessDynamoDB) -> None:
    last = {
        "ConditionCheck": {
            "TableName": "locks",
            "Key": {"pk": _s("zz")},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }
    db.call("TransactWriteItems", {"TransactItems": _changes_then(last)})
    locks = {item["pk"]["S"]: item.get("n") for item in db.tables()["locks"]}
    assert locks == {"a": {"N": "9"}, "b": {"N": "2"}, "new": {"N": "9"}}
    results = sorted((i["sk"]["S"], i.get("m")) for i in db.tables()["results"])
    assert results == [("1", {"M": {"x": _s("z")}}), ("2", None)]


def _check_in(db: InProcessDynamoDB, n: int, *, cancelled: bool) -> None:
    condition = "attribute_not_exists(pk)" if cancelled else "attribute_exists(pk)"
    items = [
        {
            "ConditionCheck": {
                "TableName": "locks",
                "Key": {"pk": _s("a")},
                "ConditionExpression": condition,
            }
        },
        {"Put": {"TableName": "results", "Item": {"pk": _s("grow"), "sk": _s(f"{n:06d}")}}},
    ]
    try:
        db.call("TransactWriteItems", {"TransactItems": items})
    except DynamoDBError:
        assert cancelled


def test_a_transaction_costs_what_it_touches_not_its_tables_size(db: InProcessDynamoDB) -> None:
    padding = "x" * 200
    for n in range(3000):
        db.call(
            "PutItem",
            {
                "TableName": "results",
                "Item": {"pk": _s("big"), "sk": _s(f"{n:06d}"), "p": _s(padding)},
            },
        )
    _check_in(db, 0, cancelled=False)  # warm: moto's parsers and caches
    tracemalloc.start()
    try:
        _check_in(db, 1, cancelled=False)
        _check_in(db, 2, cancelled=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A copy of the 3,000-item table is several MB; a transaction's own work is ~100 KB.
    assert peak < 1_000_000, peak


def test_the_objects_a_request_makes_are_not_kept(db: InProcessDynamoDB) -> None:
    tracked: list[Any] = Item.instances_tracked  # type: ignore[attr-defined]
    before = len(tracked)
    for n in range(50):
        _check_in(db, n, cancelled=n % 2 == 1)
        db.call("PutItem", {"TableName": "locks", "Item": {"pk": _s("a"), "n": {"N": str(n)}}})
    assert len(tracked) == before
