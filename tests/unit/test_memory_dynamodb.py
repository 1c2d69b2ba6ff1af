"""The in-memory DynamoDB emulation: tables, items, expressions, transactions, threads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dynalease._memory import MemoryDynamoDB, MemoryDynamoDBError
from dynalease._memory_expr import parse_condition

TABLE = "tbl"
KEY = {"pk": {"S": "a"}}


def _create(db: MemoryDynamoDB, name: str = TABLE, *, sort: str | None = None) -> dict[str, Any]:
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    if sort:
        schema.append({"AttributeName": sort, "KeyType": "RANGE"})
        definitions.append({"AttributeName": sort, "AttributeType": "N"})
    return db.call(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": schema,
            "AttributeDefinitions": definitions,
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


@pytest.fixture
def db() -> MemoryDynamoDB:
    memory = MemoryDynamoDB()
    _create(memory)
    return memory


def call(db: MemoryDynamoDB, operation: str, **params: Any) -> dict[str, Any]:
    params.setdefault("TableName", TABLE)
    if operation in {"ListTables", "TransactWriteItems"}:
        params.pop("TableName")
    return db.call(operation, params)


def error(db: MemoryDynamoDB, operation: str, **params: Any) -> MemoryDynamoDBError:
    with pytest.raises(MemoryDynamoDBError) as caught:
        call(db, operation, **params)
    return caught.value


def get(db: MemoryDynamoDB, key: dict[str, Any] | None = None) -> dict[str, Any] | None:
    item: dict[str, Any] | None = call(db, "GetItem", Key=key or KEY).get("Item")
    return item


def put(db: MemoryDynamoDB, **attributes: Any) -> None:
    call(db, "PutItem", Item={**KEY, **attributes})


# --- tables ------------------------------------------------------------------------


def test_create_table_returns_an_active_description() -> None:
    description = _create(MemoryDynamoDB(), sort="sk")["TableDescription"]
    assert description["TableName"] == TABLE
    assert description["TableStatus"] == "ACTIVE"
    assert description["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert description["BillingModeSummary"] == {"BillingMode": "PAY_PER_REQUEST"}
    assert description["ItemCount"] == 0


def test_describe_table_reports_the_schema_and_item_count(db: MemoryDynamoDB) -> None:
    put(db)
    table = call(db, "DescribeTable")["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert table["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert table["ItemCount"] == 1


def test_creating_an_existing_table_is_resource_in_use(db: MemoryDynamoDB) -> None:
    with pytest.raises(MemoryDynamoDBError) as caught:
        _create(db)
    assert caught.value.code == "ResourceInUseException"


@pytest.mark.parametrize("operation", ["DescribeTable", "DeleteTable", "DescribeTimeToLive"])
def test_table_operations_on_a_missing_table_are_resource_not_found(operation: str) -> None:
    assert error(MemoryDynamoDB(), operation).code == "ResourceNotFoundException"


@pytest.mark.parametrize("operation", ["GetItem", "PutItem", "DeleteItem", "UpdateItem"])
def test_item_operations_on_a_missing_table_are_resource_not_found(operation: str) -> None:
    params: dict[str, Any] = {"Item": KEY} if operation == "PutItem" else {"Key": KEY}
    assert error(MemoryDynamoDB(), operation, **params).code == "ResourceNotFoundException"


@pytest.mark.parametrize(
    "changes",
    [
        {"TableName": "ab"},
        {"TableName": "bad name"},
        {"KeySchema": [{"AttributeName": "pk", "KeyType": "RANGE"}]},
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "pk", "KeyType": "RANGE"},
            ]
        },
        {"KeySchema": []},
        {"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "BOOL"}]},
        {"AttributeDefinitions": [{"AttributeName": "other", "AttributeType": "S"}]},
        {
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "extra", "AttributeType": "S"},
            ]
        },
        {"BillingMode": "FREE"},
        {"BillingMode": "PROVISIONED"},
        {"ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}},
        {"GlobalSecondaryIndexes": []},
    ],
)
def test_create_table_rejects_invalid_definitions(changes: dict[str, Any]) -> None:
    params = {
        "TableName": TABLE,
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
        **changes,
    }
    with pytest.raises(MemoryDynamoDBError) as caught:
        MemoryDynamoDB().call("CreateTable", params)
    assert caught.value.code == "ValidationException"


def test_provisioned_tables_report_their_throughput() -> None:
    description = MemoryDynamoDB().call(
        "CreateTable",
        {
            "TableName": TABLE,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 3},
        },
    )["TableDescription"]
    assert description["BillingModeSummary"] == {"BillingMode": "PROVISIONED"}
    assert description["ProvisionedThroughput"]["ReadCapacityUnits"] == 5
    assert description["ProvisionedThroughput"]["WriteCapacityUnits"] == 3


def test_list_tables_is_sorted_and_pages(db: MemoryDynamoDB) -> None:
    _create(db, "zeta")
    _create(db, "alpha")
    assert call(db, "ListTables") == {"TableNames": ["alpha", "tbl", "zeta"]}
    first = call(db, "ListTables", Limit=2)
    assert first == {"TableNames": ["alpha", "tbl"], "LastEvaluatedTableName": "tbl"}
    assert call(db, "ListTables", ExclusiveStartTableName="tbl") == {"TableNames": ["zeta"]}


def test_a_deleted_table_is_gone_with_its_items(db: MemoryDynamoDB) -> None:
    put(db)
    assert call(db, "DeleteTable")["TableDescription"]["TableStatus"] == "DELETING"
    assert error(db, "GetItem", Key=KEY).code == "ResourceNotFoundException"
    _create(db)
    assert get(db) is None


def test_describe_time_to_live_is_always_disabled(db: MemoryDynamoDB) -> None:
    assert call(db, "DescribeTimeToLive") == {
        "TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}
    }


def test_unknown_operations_are_rejected(db: MemoryDynamoDB) -> None:
    assert error(db, "Scan").code == "UnknownOperationException"


@pytest.mark.parametrize(
    "params",
    [
        {"Item": KEY, "ConditionExpresion": "attribute_exists(pk)"},
        {"Item": KEY, "Expected": {"pk": {"Exists": False}}},
        {"Item": KEY, "ReturnValues": "ALL_NEW"},
    ],
)
def test_unknown_legacy_and_invalid_parameters_are_rejected(
    db: MemoryDynamoDB, params: dict[str, Any]
) -> None:
    assert error(db, "PutItem", **params).code == "ValidationException"


def test_reset_drops_every_table(db: MemoryDynamoDB) -> None:
    put(db)
    db.reset()
    assert db.tables() == {}
    assert call(db, "ListTables") == {"TableNames": []}


# --- items -------------------------------------------------------------------------

EVERY_TYPE = {
    "s": {"S": "text"},
    "empty": {"S": ""},
    "n": {"N": "12"},
    "b": {"B": b"\x00\x01"},
    "t": {"BOOL": True},
    "null": {"NULL": True},
    "l": {"L": [{"S": "x"}, {"N": "1"}]},
    "m": {"M": {"inner": {"M": {"deep": {"BOOL": False}}}}},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2"]},
    "bs": {"BS": [b"a", b"b"]},
}


def test_put_then_get_round_trips_every_attribute_type(db: MemoryDynamoDB) -> None:
    put(db, **EVERY_TYPE)
    assert get(db) == {**KEY, **EVERY_TYPE}


def test_get_of_a_missing_item_returns_no_item(db: MemoryDynamoDB) -> None:
    assert call(db, "GetItem", Key=KEY, ConsistentRead=True) == {}


def test_put_replaces_the_whole_item(db: MemoryDynamoDB) -> None:
    put(db, a={"S": "1"}, b={"S": "2"})
    put(db, c={"S": "3"})
    assert get(db) == {**KEY, "c": {"S": "3"}}


def test_numbers_are_stored_in_canonical_form(db: MemoryDynamoDB) -> None:
    put(db, a={"N": "1.50"}, b={"N": "1e2"}, c={"N": "-0.0"}, d={"N": "007"})
    assert get(db) == {
        **KEY,
        "a": {"N": "1.5"},
        "b": {"N": "100"},
        "c": {"N": "0"},
        "d": {"N": "7"},
    }


def test_binary_given_as_text_is_stored_as_bytes(db: MemoryDynamoDB) -> None:
    put(db, b={"B": "abc"}, ba={"B": bytearray(b"x")})
    assert get(db) == {**KEY, "b": {"B": b"abc"}, "ba": {"B": b"x"}}


def test_composite_keys_store_items_separately_and_match_numbers_by_value() -> None:
    db = MemoryDynamoDB()
    _create(db, sort="sk")
    call(db, "PutItem", Item={**KEY, "sk": {"N": "1.0"}, "v": {"S": "one"}})
    call(db, "PutItem", Item={**KEY, "sk": {"N": "2"}, "v": {"S": "two"}})
    assert get(db, {**KEY, "sk": {"N": "1"}}) == {**KEY, "sk": {"N": "1"}, "v": {"S": "one"}}
    assert len(db.tables()[TABLE]) == 2


@pytest.mark.parametrize(
    "value",
    [
        {"N": "NaN"},
        {"N": "abc"},
        {"N": " 1"},
        {"N": "1" * 39},
        {"N": "1e126"},
        {"N": "1e-131"},
        {"N": 5},
        {},
        {"S": "x", "N": "1"},
        {"X": "x"},
        {"S": 1},
        {"NULL": False},
        {"BOOL": "yes"},
        {"SS": []},
        {"SS": ["a", "a"]},
        {"NS": ["1", "1.0"]},
        {"L": [{}]},
        {"M": {"k": {"N": "x"}}},
    ],
)
def test_invalid_attribute_values_are_rejected(db: MemoryDynamoDB, value: Any) -> None:
    assert error(db, "PutItem", Item={**KEY, "v": value}).code == "ValidationException"


@pytest.mark.parametrize(
    "key",
    [
        {},
        {"pk": {"N": "1"}},
        {"pk": {"S": ""}},
        {"pk": {"S": "a"}, "extra": {"S": "b"}},
        {"other": {"S": "a"}},
        {"pk": {"S": "x" * 2049}},
    ],
)
def test_keys_must_match_the_schema(db: MemoryDynamoDB, key: dict[str, Any]) -> None:
    assert error(db, "GetItem", Key=key).code == "ValidationException"
    assert error(db, "DeleteItem", Key=key).code == "ValidationException"
    assert error(db, "UpdateItem", Key=key).code == "ValidationException"


@pytest.mark.parametrize("item", [{}, {"pk": {"N": "1"}}, {"pk": {"S": ""}}, {"v": {"S": "x"}}])
def test_put_items_must_carry_a_valid_key(db: MemoryDynamoDB, item: dict[str, Any]) -> None:
    assert error(db, "PutItem", Item=item).code == "ValidationException"


def test_items_larger_than_400_kb_are_rejected(db: MemoryDynamoDB) -> None:
    big = {"S": "x" * (400 * 1024)}
    assert error(db, "PutItem", Item={**KEY, "big": big}).code == "ValidationException"


def test_items_are_copied_in_and_out(db: MemoryDynamoDB) -> None:
    item = {**KEY, "l": {"L": [{"S": "x"}]}, "ss": {"SS": ["a"]}}
    call(db, "PutItem", Item=item)
    item["l"]["L"].append({"S": "changed"})
    item["ss"]["SS"].append("changed")
    read = get(db)
    assert read == {**KEY, "l": {"L": [{"S": "x"}]}, "ss": {"SS": ["a"]}}
    assert read is not None
    read["l"]["L"].clear()
    assert get(db) == {**KEY, "l": {"L": [{"S": "x"}]}, "ss": {"SS": ["a"]}}


def test_tables_returns_a_deep_copy_for_debugging(db: MemoryDynamoDB) -> None:
    put(db, m={"M": {"k": {"S": "v"}}})
    view = db.tables()
    assert view == {TABLE: [{**KEY, "m": {"M": {"k": {"S": "v"}}}}]}
    view[TABLE][0]["m"]["M"].clear()
    assert get(db) == {**KEY, "m": {"M": {"k": {"S": "v"}}}}


def test_projection_expression_returns_only_the_named_paths(db: MemoryDynamoDB) -> None:
    put(
        db,
        a={"S": "1"},
        b={"S": "2"},
        l={"L": [{"S": "x"}, {"S": "y"}, {"S": "z"}]},
        m={"M": {"keep": {"N": "1"}, "drop": {"N": "2"}}},
    )
    response = call(
        db,
        "GetItem",
        Key=KEY,
        ProjectionExpression="#a, l[2], l[0], m.keep, missing",
        ExpressionAttributeNames={"#a": "a"},
    )
    assert response["Item"] == {
        "a": {"S": "1"},
        "l": {"L": [{"S": "x"}, {"S": "z"}]},
        "m": {"M": {"keep": {"N": "1"}}},
    }


@pytest.mark.parametrize("projection", ["a, a", "m, m.x", "m.x, m[0]", "a,", ""])
def test_invalid_projection_expressions_are_rejected(db: MemoryDynamoDB, projection: str) -> None:
    failure = error(db, "GetItem", Key=KEY, ProjectionExpression=projection)
    assert failure.code == "ValidationException"


# --- conditions --------------------------------------------------------------------


def test_conditional_put_attribute_not_exists_succeeds_once_then_fails_with_the_old_item(
    db: MemoryDynamoDB,
) -> None:
    params: dict[str, Any] = {
        "ConditionExpression": "attribute_not_exists(#k)",
        "ExpressionAttributeNames": {"#k": "pk"},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    call(db, "PutItem", Item={**KEY, "owner": {"S": "first"}}, **params)
    failure = error(db, "PutItem", Item={**KEY, "owner": {"S": "second"}}, **params)
    assert failure.code == "ConditionalCheckFailedException"
    assert failure.item == {**KEY, "owner": {"S": "first"}}
    assert get(db) == {**KEY, "owner": {"S": "first"}}


def test_a_failed_condition_without_all_old_returns_no_item(db: MemoryDynamoDB) -> None:
    put(db)
    failure = error(db, "PutItem", Item=KEY, ConditionExpression="attribute_not_exists(pk)")
    assert failure.code == "ConditionalCheckFailedException"
    assert failure.item is None


def test_all_old_on_a_missing_item_returns_no_item(db: MemoryDynamoDB) -> None:
    failure = error(
        db,
        "DeleteItem",
        Key=KEY,
        ConditionExpression="attribute_exists(pk)",
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    assert failure.code == "ConditionalCheckFailedException"
    assert failure.item is None


def test_conditional_update_on_a_missing_item_fails_and_does_not_create_it(
    db: MemoryDynamoDB,
) -> None:
    failure = error(
        db,
        "UpdateItem",
        Key=KEY,
        UpdateExpression="SET #v = :new",
        ConditionExpression="#o = :o AND #v = :v",
        ExpressionAttributeNames={"#o": "owner", "#v": "version"},
        ExpressionAttributeValues={":o": {"S": "me"}, ":v": {"S": "v1"}, ":new": {"S": "v2"}},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    assert failure.code == "ConditionalCheckFailedException"
    assert failure.item is None
    assert get(db) is None


def test_conditional_update_applies_when_owner_and_version_match(db: MemoryDynamoDB) -> None:
    put(db, owner={"S": "me"}, version={"S": "v1"})
    params: dict[str, Any] = {
        "Key": KEY,
        "UpdateExpression": "SET #v = :new",
        "ConditionExpression": "#o = :o AND #v = :v",
        "ExpressionAttributeNames": {"#o": "owner", "#v": "version"},
        "ExpressionAttributeValues": {
            ":o": {"S": "me"},
            ":v": {"S": "v1"},
            ":new": {"S": "v2"},
        },
    }
    call(db, "UpdateItem", **params)
    assert get(db) == {**KEY, "owner": {"S": "me"}, "version": {"S": "v2"}}
    assert error(db, "UpdateItem", **params).code == "ConditionalCheckFailedException"


def test_delete_with_a_condition_only_deletes_when_it_holds(db: MemoryDynamoDB) -> None:
    put(db, owner={"S": "me"})
    params: dict[str, Any] = {
        "Key": KEY,
        "ConditionExpression": "#o = :o",
        "ExpressionAttributeNames": {"#o": "owner"},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    failure = error(db, "DeleteItem", ExpressionAttributeValues={":o": {"S": "you"}}, **params)
    assert failure.code == "ConditionalCheckFailedException"
    assert failure.item == {**KEY, "owner": {"S": "me"}}
    assert get(db) is not None
    call(db, "DeleteItem", ExpressionAttributeValues={":o": {"S": "me"}}, **params)
    assert get(db) is None


def test_delete_of_a_missing_item_succeeds_without_a_condition(db: MemoryDynamoDB) -> None:
    assert call(db, "DeleteItem", Key=KEY, ReturnValues="ALL_OLD") == {}


def test_put_and_delete_return_the_old_item_with_all_old(db: MemoryDynamoDB) -> None:
    assert call(db, "PutItem", Item={**KEY, "v": {"N": "1"}}, ReturnValues="ALL_OLD") == {}
    replaced = call(db, "PutItem", Item={**KEY, "v": {"N": "2"}}, ReturnValues="ALL_OLD")
    assert replaced == {"Attributes": {**KEY, "v": {"N": "1"}}}
    deleted = call(db, "DeleteItem", Key=KEY, ReturnValues="ALL_OLD")
    assert deleted == {"Attributes": {**KEY, "v": {"N": "2"}}}


CONDITION_ITEM = {
    "n": {"N": "10"},
    "s": {"S": "banana"},
    "b": {"B": b"\x01\x02\x03"},
    "t": {"BOOL": True},
    "nul": {"NULL": True},
    "l": {"L": [{"S": "x"}, {"N": "2"}]},
    "m": {"M": {"inner": {"S": "deep"}, "list": {"L": [{"N": "1"}]}}},
    "ss": {"SS": ["red", "green"]},
    "ns": {"NS": ["1", "2"]},
}

CONDITIONS = [
    ("n = :n10", True),
    ("n = :s9", False),  # mismatched types are simply unequal
    ("n <> :n9", True),
    ("n <> :n10", False),
    ("n <> :s9", True),
    ("missing <> :n10", True),  # a missing attribute is unequal to everything
    ("missing <> other_missing", True),
    ("missing = :n10", False),
    ("n > :n9", True),  # numbers compare numerically, not as text
    ("n < :n9", False),
    ("n >= :n10 AND n <= :n10", True),
    ("s < :s9", False),
    ("s > :sa", True),
    ("b > :b1", True),
    ("n < :s9", False),  # mismatched types compare false
    ("missing < :n10", False),
    ("missing >= :n10", False),
    ("l < :n10", False),  # an item attribute of an unordered type compares false
    ("n BETWEEN :n9 AND :n10", True),
    ("n BETWEEN :n11 AND :n12", False),
    ("missing BETWEEN :n9 AND :n10", False),
    ("n IN (:n9, :n10)", True),
    ("n IN (:n9, :s9)", False),
    ("s IN (:sa, :banana)", True),
    ("attribute_exists(n)", True),
    ("attribute_exists(missing)", False),
    ("attribute_not_exists(missing)", True),
    ("attribute_exists(nul)", True),  # NULL is a value, so the attribute exists
    ("attribute_exists(m.inner)", True),
    ("attribute_exists(m.nope)", False),
    ("attribute_exists(m.list[0])", True),
    ("attribute_exists(m.list[5])", False),
    ("attribute_exists(l[1])", True),
    ("attribute_exists(s.inner)", False),
    ("attribute_exists(s[0])", False),
    ("attribute_type(n, :typeN)", True),
    ("attribute_type(s, :typeN)", False),
    ("attribute_type(missing, :typeN)", False),
    ("begins_with(s, :ban)", True),
    ("begins_with(s, :sa)", False),
    ("begins_with(b, :b1)", True),
    ("begins_with(n, :ban)", False),
    ("contains(s, :nan)", True),
    ("contains(s, :sx)", False),
    ("contains(ss, :red)", True),
    ("contains(ss, :sa)", False),
    ("contains(ns, :n1)", True),
    ("contains(l, :sx)", True),
    ("contains(l, :n1)", False),
    ("contains(missing, :sx)", False),
    ("size(s) = :n6", True),
    ("size(l) = :n2", True),
    ("size(m) = :n2", True),
    ("size(ss) = :n2", True),
    ("size(b) > :n2", True),
    ("size(missing) = :n0", False),
    ("size(n) = :n2", False),
    ("m.inner = :deep", True),
    ("m = :map", True),  # maps compare deeply
    ("ss = :ss_reordered", True),  # sets ignore order
    ("l = :list", True),
    ("t = :true", True),
    ("NOT n = :n10", False),
    ("NOT (n = :n9)", True),
    ("n = :n9 OR n = :n10", True),
    ("n = :n9 AND n = :n10 OR s = :banana", True),  # AND binds tighter than OR
    ("n = :n9 AND (n = :n10 OR s = :banana)", False),
    ("NOT n = :n9 AND s = :banana", True),
    ("((n = :n10))", True),
    ("n = :n10 and s = :banana", True),  # keywords are case-insensitive
]

CONDITION_VALUES = {
    ":n0": {"N": "0"},
    ":n1": {"N": "1"},
    ":n2": {"N": "2"},
    ":n6": {"N": "6"},
    ":n9": {"N": "9"},
    ":n10": {"N": "10.0"},
    ":n11": {"N": "11"},
    ":n12": {"N": "12"},
    ":s9": {"S": "9"},
    ":sa": {"S": "a"},
    ":sx": {"S": "x"},
    ":banana": {"S": "banana"},
    ":ban": {"S": "ban"},
    ":nan": {"S": "nan"},
    ":red": {"S": "red"},
    ":b1": {"B": b"\x01"},
    ":typeN": {"S": "N"},
    ":deep": {"S": "deep"},
    ":map": {"M": {"list": {"L": [{"N": "1"}]}, "inner": {"S": "deep"}}},
    ":ss_reordered": {"SS": ["green", "red"]},
    ":list": {"L": [{"S": "x"}, {"N": "2.0"}]},
    ":true": {"BOOL": True},
}


@pytest.mark.parametrize(("condition", "expected"), CONDITIONS)
def test_condition_expressions_evaluate_like_dynamodb(
    db: MemoryDynamoDB, condition: str, expected: bool
) -> None:
    put(db, **CONDITION_ITEM)
    parsed = parse_condition(condition)
    values = {k: v for k, v in CONDITION_VALUES.items() if k in parsed.values}
    params: dict[str, Any] = {"Item": {**KEY, **CONDITION_ITEM}, "ConditionExpression": condition}
    if values:
        params["ExpressionAttributeValues"] = values
    if expected:
        call(db, "PutItem", **params)
    else:
        assert error(db, "PutItem", **params).code == "ConditionalCheckFailedException"


def test_conditions_on_a_missing_item_see_no_attributes(db: MemoryDynamoDB) -> None:
    call(db, "PutItem", Item=KEY, ConditionExpression="attribute_not_exists(pk)")
    call(db, "DeleteItem", Key=KEY)
    failure = error(
        db,
        "PutItem",
        Item=KEY,
        ConditionExpression="pk = :a",
        ExpressionAttributeValues={":a": {"S": "a"}},
    )
    assert failure.code == "ConditionalCheckFailedException"


@pytest.mark.parametrize(
    ("condition", "values"),
    [
        ("", {}),
        ("   ", {}),
        ("a =", {}),
        ("a = :v :v", {":v": {"S": "x"}}),
        ("(a = :v", {":v": {"S": "x"}}),
        ("a == :v", {":v": {"S": "x"}}),
        ("a = :v AND", {":v": {"S": "x"}}),
        ("a $ :v", {":v": {"S": "x"}}),
        ("a[x] = :v", {":v": {"S": "x"}}),
        ("1a = :v", {":v": {"S": "x"}}),
        ("and = :v", {":v": {"S": "x"}}),  # a keyword is not an attribute name
        ("ATTRIBUTE_EXISTS(a)", {}),  # function names are case-sensitive
        ("unknown_fn(a)", {}),
        ("attribute_exists(:v)", {":v": {"S": "x"}}),
        ("attribute_exists(a, b)", {}),
        ("size(a)", {}),
        ("if_not_exists(a, :v) = :v", {":v": {"S": "x"}}),
        ("attribute_exists(a) = :v", {":v": {"S": "x"}}),
        ("a < :v", {":v": {"L": []}}),  # constants of an unordered type are invalid
        ("a BETWEEN :hi AND :lo", {":hi": {"N": "2"}, ":lo": {"N": "1"}}),
        ("attribute_type(a, :v)", {":v": {"S": "STRING"}}),
        ("attribute_type(a, :v)", {":v": {"N": "1"}}),
        ("begins_with(a, :v)", {":v": {"N": "1"}}),
        ("a IN (" + ", ".join([":v"] * 101) + ")", {":v": {"S": "x"}}),
    ],
)
def test_invalid_condition_expressions_are_validation_errors(
    db: MemoryDynamoDB, condition: str, values: dict[str, Any]
) -> None:
    params: dict[str, Any] = {"Item": KEY, "ConditionExpression": condition}
    if values:
        params["ExpressionAttributeValues"] = values
    assert error(db, "PutItem", **params).code == "ValidationException"


# --- placeholders ------------------------------------------------------------------


def test_unused_expression_attribute_values_are_rejected(db: MemoryDynamoDB) -> None:
    failure = error(
        db,
        "PutItem",
        Item=KEY,
        ConditionExpression="attribute_not_exists(pk)",
        ExpressionAttributeValues={":unused": {"S": "x"}},
    )
    assert failure.code == "ValidationException"
    assert ":unused" in failure.message


def test_unused_expression_attribute_names_are_rejected(db: MemoryDynamoDB) -> None:
    failure = error(
        db,
        "PutItem",
        Item=KEY,
        ConditionExpression="attribute_not_exists(pk)",
        ExpressionAttributeNames={"#unused": "x"},
    )
    assert failure.code == "ValidationException"
    assert "#unused" in failure.message


def test_placeholders_used_in_either_expression_count_as_used(db: MemoryDynamoDB) -> None:
    call(
        db,
        "UpdateItem",
        Key=KEY,
        UpdateExpression="SET #a = :a",
        ConditionExpression="attribute_not_exists(#k)",
        ExpressionAttributeNames={"#a": "a", "#k": "pk"},
        ExpressionAttributeValues={":a": {"S": "x"}},
    )
    assert get(db) == {**KEY, "a": {"S": "x"}}


@pytest.mark.parametrize(
    "params",
    [
        {"ConditionExpression": "a = :missing"},
        {"ConditionExpression": "#missing = :v", "ExpressionAttributeValues": {":v": {"S": "x"}}},
        {"ConditionExpression": "attribute_exists(a)", "ExpressionAttributeNames": {}},
        {"ConditionExpression": "attribute_exists(a)", "ExpressionAttributeValues": {}},
        {"ExpressionAttributeNames": {"#a": "a"}},
        {"ExpressionAttributeValues": {":a": {"S": "a"}}},
        {"ConditionExpression": "attribute_exists(#a)", "ExpressionAttributeNames": {"#a": ""}},
        {"ConditionExpression": "attribute_exists(a)", "ExpressionAttributeNames": {"a": "a"}},
        {"ConditionExpression": "a = :v", "ExpressionAttributeValues": {":v": {"N": "x"}}},
        {"ConditionExpression": 42},
    ],
)
def test_undefined_empty_and_misplaced_placeholders_are_rejected(
    db: MemoryDynamoDB, params: dict[str, Any]
) -> None:
    assert error(db, "PutItem", Item=KEY, **params).code == "ValidationException"


# --- updates -----------------------------------------------------------------------


def update(db: MemoryDynamoDB, expression: str, **values: Any) -> dict[str, Any] | None:
    params: dict[str, Any] = {"Key": KEY, "UpdateExpression": expression}
    if values:
        params["ExpressionAttributeValues"] = {f":{k}": v for k, v in values.items()}
    call(db, "UpdateItem", **params)
    return get(db)


def update_error(db: MemoryDynamoDB, expression: str, **values: Any) -> MemoryDynamoDBError:
    params: dict[str, Any] = {"Key": KEY, "UpdateExpression": expression}
    if values:
        params["ExpressionAttributeValues"] = {f":{k}": v for k, v in values.items()}
    return error(db, "UpdateItem", **params)


def test_update_creates_the_item_when_it_is_missing(db: MemoryDynamoDB) -> None:
    assert update(db, "SET a = :a", a={"S": "x"}) == {**KEY, "a": {"S": "x"}}


def test_update_without_an_expression_creates_just_the_key(db: MemoryDynamoDB) -> None:
    call(db, "UpdateItem", Key=KEY)
    assert get(db) == KEY


def test_update_set_supports_if_not_exists_and_arithmetic(db: MemoryDynamoDB) -> None:
    item = update(
        db,
        "SET c = if_not_exists(c, :zero) + :one, d = :one - :half",
        zero={"N": "0"},
        one={"N": "1"},
        half={"N": "0.5"},
    )
    assert item == {**KEY, "c": {"N": "1"}, "d": {"N": "0.5"}}
    item = update(db, "SET c = if_not_exists(c, :zero) + :one", zero={"N": "0"}, one={"N": "1"})
    assert item is not None
    assert item["c"] == {"N": "2"}


def test_update_set_values_come_from_the_item_before_the_update(db: MemoryDynamoDB) -> None:
    put(db, a={"S": "1"}, b={"S": "2"})
    assert update(db, "SET a = b, b = a") == {**KEY, "a": {"S": "2"}, "b": {"S": "1"}}


def test_update_set_reaches_nested_maps_and_list_elements(db: MemoryDynamoDB) -> None:
    put(db, m={"M": {"x": {"N": "1"}}}, l={"L": [{"S": "a"}, {"S": "b"}]})
    item = update(db, "SET m.y = :v, m.x = :v, l[1] = :v, l[9] = :w", v={"S": "v"}, w={"S": "w"})
    assert item == {
        **KEY,
        "m": {"M": {"x": {"S": "v"}, "y": {"S": "v"}}},
        "l": {"L": [{"S": "a"}, {"S": "v"}, {"S": "w"}]},  # beyond the end appends
    }


def test_update_list_append_joins_lists_either_way(db: MemoryDynamoDB) -> None:
    put(db, l={"L": [{"N": "2"}]})
    item = update(db, "SET l = list_append(:front, l)", front={"L": [{"N": "1"}]})
    assert item is not None
    assert item["l"] == {"L": [{"N": "1"}, {"N": "2"}]}
    item = update(db, "SET l = list_append(l, :back)", back={"L": [{"N": "3"}]})
    assert item is not None
    assert item["l"] == {"L": [{"N": "1"}, {"N": "2"}, {"N": "3"}]}


def test_update_remove_drops_attributes_and_list_elements_by_original_index(
    db: MemoryDynamoDB,
) -> None:
    put(
        db,
        a={"S": "1"},
        l={"L": [{"S": "x"}, {"S": "y"}, {"S": "z"}]},
        m={"M": {"k": {"S": "v"}, "keep": {"S": "v"}}},
    )
    item = update(db, "REMOVE a, l[0], l[2], m.k, missing, l[7]")
    assert item == {**KEY, "l": {"L": [{"S": "y"}]}, "m": {"M": {"keep": {"S": "v"}}}}


def test_update_add_increments_numbers_and_extends_sets(db: MemoryDynamoDB) -> None:
    put(db, n={"N": "1.5"}, ss={"SS": ["a"]})
    item = update(
        db,
        "ADD n :n, ss :ss, created :n, fresh :ns",
        n={"N": "1.5"},
        ss={"SS": ["a", "b"]},
        ns={"NS": ["1"]},
    )
    assert item == {
        **KEY,
        "n": {"N": "3"},
        "ss": {"SS": ["a", "b"]},
        "created": {"N": "1.5"},
        "fresh": {"NS": ["1"]},
    }


def test_update_delete_removes_set_members_and_the_attribute_when_empty(
    db: MemoryDynamoDB,
) -> None:
    put(db, ss={"SS": ["a", "b"]}, ns={"NS": ["1", "2"]})
    item = update(
        db, "DELETE ss :a, ns :both, missing :a", a={"SS": ["a"]}, both={"NS": ["2", "1.0"]}
    )
    assert item == {**KEY, "ss": {"SS": ["b"]}}


def test_update_clauses_may_come_in_any_order(db: MemoryDynamoDB) -> None:
    put(db, gone={"S": "x"})
    item = update(db, "add n :one remove gone SET s = :s", one={"N": "1"}, s={"S": "s"})
    assert item == {**KEY, "n": {"N": "1"}, "s": {"S": "s"}}


def test_number_arithmetic_is_exact_and_renders_without_exponent_noise(
    db: MemoryDynamoDB,
) -> None:
    put(db, a={"N": "0.1"}, big={"N": "1e2"})
    item = update(db, "SET a = a + :b, big = big - :one", b={"N": "0.2"}, one={"N": "1"})
    assert item is not None
    assert item["a"] == {"N": "0.3"}
    assert item["big"] == {"N": "99"}


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        ("SET pk = :v", {"v": {"S": "b"}}),  # key attributes cannot be updated
        ("REMOVE pk", {}),
        ("SET a = :v, a = :v", {"v": {"S": "b"}}),  # overlapping paths
        ("SET m = :v REMOVE m.x", {"v": {"S": "b"}}),
        ("SET m.x = :v, m[0] = :v", {"v": {"S": "b"}}),  # conflicting paths
        ("SET a = :v SET b = :v", {"v": {"S": "b"}}),  # a clause at most once
        ("SET a = :v + :w", {"v": {"S": "1"}, "w": {"N": "1"}}),
        ("SET a = list_append(:v, :w)", {"v": {"S": "1"}, "w": {"L": []}}),
        ("ADD a :v", {"v": {"S": "1"}}),
        ("DELETE a :v", {"v": {"N": "1"}}),
        ("ADD a b", {}),
        ("SET a = size(b)", {}),
        ("SET a = if_not_exists(:v, :v)", {"v": {"S": "1"}}),
        ("SET a = :v + :v + :v", {"v": {"N": "1"}}),
        ("SET a :v", {"v": {"N": "1"}}),
        ("UPSERT a = :v", {"v": {"N": "1"}}),
        ("", {}),
        ("SET", {}),
        ("SET a = :v,", {"v": {"N": "1"}}),
    ],
)
def test_invalid_update_expressions_are_validation_errors(
    db: MemoryDynamoDB, expression: str, values: dict[str, Any]
) -> None:
    assert update_error(db, expression, **values).code == "ValidationException"


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        ("SET a = missing", {}),
        ("SET a = missing + :one", {"one": {"N": "1"}}),
        ("SET a = s + :one", {"one": {"N": "1"}}),
        ("SET a = list_append(s, :l)", {"l": {"L": []}}),
        ("SET nope.x = :one", {"one": {"N": "1"}}),  # the parent map must exist
        ("SET s.x = :one", {"one": {"N": "1"}}),
        ("SET s[0] = :one", {"one": {"N": "1"}}),
        ("ADD s :one", {"one": {"N": "1"}}),
        ("ADD ss :ns", {"ns": {"NS": ["1"]}}),
        ("DELETE ss :ns", {"ns": {"NS": ["1"]}}),
        ("SET n = n + :tiny", {"tiny": {"N": "1e-40"}}),  # more than 38 digits
    ],
)
def test_updates_that_do_not_fit_the_stored_item_are_rejected_and_change_nothing(
    db: MemoryDynamoDB, expression: str, values: dict[str, Any]
) -> None:
    put(db, s={"S": "text"}, ss={"SS": ["a"]}, n={"N": "1"})
    before = get(db)
    assert update_error(db, expression, **values).code == "ValidationException"
    assert get(db) == before


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("NONE", None),
        ("ALL_OLD", {**KEY, "a": {"N": "1"}, "b": {"S": "keep"}, "c": {"S": "gone"}}),
        ("ALL_NEW", {**KEY, "a": {"N": "2"}, "b": {"S": "keep"}, "d": {"S": "new"}}),
        ("UPDATED_OLD", {"a": {"N": "1"}, "c": {"S": "gone"}}),
        ("UPDATED_NEW", {"a": {"N": "2"}, "d": {"S": "new"}}),
    ],
)
def test_update_return_values(
    db: MemoryDynamoDB, mode: str, expected: dict[str, Any] | None
) -> None:
    put(db, a={"N": "1"}, b={"S": "keep"}, c={"S": "gone"})
    response = call(
        db,
        "UpdateItem",
        Key=KEY,
        UpdateExpression="SET a = a + :one, d = :d REMOVE c",
        ExpressionAttributeValues={":one": {"N": "1"}, ":d": {"S": "new"}},
        ReturnValues=mode,
    )
    assert response.get("Attributes") == expected


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        ("PutItem", {"Item": KEY, "ReturnValues": "UPDATED_NEW"}),
        ("DeleteItem", {"Key": KEY, "ReturnValues": "ALL_NEW"}),
        ("UpdateItem", {"Key": KEY, "ReturnValues": "EVERYTHING"}),
        ("PutItem", {"Item": KEY, "ReturnValuesOnConditionCheckFailure": "ALL_NEW"}),
    ],
)
def test_invalid_return_values_are_rejected(
    db: MemoryDynamoDB, operation: str, params: dict[str, Any]
) -> None:
    assert error(db, operation, **params).code == "ValidationException"


# --- capacity ----------------------------------------------------------------------


def test_consumed_capacity_is_reported_as_zero_only_when_asked(db: MemoryDynamoDB) -> None:
    assert "ConsumedCapacity" not in call(db, "PutItem", Item=KEY)
    put_capacity = call(db, "PutItem", Item=KEY, ReturnConsumedCapacity="TOTAL")
    assert put_capacity["ConsumedCapacity"]["TableName"] == TABLE
    assert put_capacity["ConsumedCapacity"]["CapacityUnits"] == 0.0
    get_capacity = call(db, "GetItem", Key=KEY, ReturnConsumedCapacity="INDEXES")
    assert get_capacity["ConsumedCapacity"]["CapacityUnits"] == 0.0
    assert get_capacity["ConsumedCapacity"]["Table"]["CapacityUnits"] == 0.0
    for operation, params in [
        ("DeleteItem", {"Key": KEY}),
        ("UpdateItem", {"Key": KEY}),
    ]:
        response = call(db, operation, ReturnConsumedCapacity="TOTAL", **params)
        assert response["ConsumedCapacity"]["CapacityUnits"] == 0.0


def test_a_failed_condition_still_validates_the_capacity_mode(db: MemoryDynamoDB) -> None:
    failure = error(db, "PutItem", Item=KEY, ReturnConsumedCapacity="SOME")
    assert failure.code == "ValidationException"


def test_transactions_report_zero_capacity_per_table(db: MemoryDynamoDB) -> None:
    _create(db, "other")
    response = call(
        db,
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": KEY}},
            {"Put": {"TableName": "other", "Item": KEY}},
        ],
        ReturnConsumedCapacity="TOTAL",
    )
    assert [c["TableName"] for c in response["ConsumedCapacity"]] == [TABLE, "other"]
    assert all(c["CapacityUnits"] == 0.0 for c in response["ConsumedCapacity"])


# --- transactions ------------------------------------------------------------------


def key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}}


def test_a_transaction_applies_every_action_together(db: MemoryDynamoDB) -> None:
    call(db, "PutItem", Item={**key("update"), "n": {"N": "1"}})
    call(db, "PutItem", Item=key("delete"))
    call(db, "PutItem", Item={**key("check"), "owner": {"S": "me"}})
    call(
        db,
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {**key("put"), "v": {"S": "new"}}}},
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": key("update"),
                    "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {"Delete": {"TableName": TABLE, "Key": key("delete")}},
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": key("check"),
                    "ConditionExpression": "#o = :o",
                    "ExpressionAttributeNames": {"#o": "owner"},
                    "ExpressionAttributeValues": {":o": {"S": "me"}},
                }
            },
        ],
        ClientRequestToken="token",
    )
    assert get(db, key("put")) == {**key("put"), "v": {"S": "new"}}
    assert get(db, key("update")) == {**key("update"), "n": {"N": "2"}}
    assert get(db, key("delete")) is None
    assert get(db, key("check")) == {**key("check"), "owner": {"S": "me"}}


def test_a_transaction_with_a_failing_condition_check_applies_nothing_and_reports_reasons_in_order(
    db: MemoryDynamoDB,
) -> None:
    call(db, "PutItem", Item={**key("lock"), "owner": {"S": "someone else"}})
    before = db.tables()
    failure = error(
        db,
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": key("first")}},
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": key("lock"),
                    "ConditionExpression": "#o = :o",
                    "ExpressionAttributeNames": {"#o": "owner"},
                    "ExpressionAttributeValues": {":o": {"S": "me"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Put": {
                    "TableName": TABLE,
                    "Item": key("third"),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {"Delete": {"TableName": TABLE, "Key": key("fourth")}},
        ],
    )
    assert failure.code == "TransactionCanceledException"
    assert failure.reasons is not None
    assert [r["Code"] for r in failure.reasons] == [
        "None",
        "ConditionalCheckFailed",
        "ConditionalCheckFailed",
        "None",
    ]
    assert failure.reasons[1]["Item"] == {**key("lock"), "owner": {"S": "someone else"}}
    assert "Item" not in failure.reasons[2]
    assert "[None, ConditionalCheckFailed, ConditionalCheckFailed, None]" in failure.message
    assert db.tables() == before


def test_a_transaction_reports_data_dependent_validation_errors_as_reasons(
    db: MemoryDynamoDB,
) -> None:
    call(db, "PutItem", Item={**key("text"), "n": {"S": "not a number"}})
    failure = error(
        db,
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": key("first")}},
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": key("text"),
                    "UpdateExpression": "SET n = n + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
        ],
    )
    assert failure.code == "TransactionCanceledException"
    assert failure.reasons is not None
    assert [r["Code"] for r in failure.reasons] == ["None", "ValidationError"]
    assert get(db, key("first")) is None


def test_a_transaction_rejects_two_actions_on_the_same_item(db: MemoryDynamoDB) -> None:
    failure = error(
        db,
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {**KEY, "v": {"S": "1"}}}},
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": KEY,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ],
    )
    assert failure.code == "ValidationException"
    assert get(db) is None


def test_a_transaction_holds_between_1_and_100_items(db: MemoryDynamoDB) -> None:
    puts = [{"Put": {"TableName": TABLE, "Item": key(f"k{i}")}} for i in range(101)]
    assert error(db, "TransactWriteItems", TransactItems=[]).code == "ValidationException"
    assert error(db, "TransactWriteItems", TransactItems=puts).code == "ValidationException"
    call(db, "TransactWriteItems", TransactItems=puts[:100])
    assert len(db.tables()[TABLE]) == 100


@pytest.mark.parametrize(
    "entry",
    [
        {"Put": {"TableName": TABLE, "Item": {"pk": {"N": "1"}}}},
        {"Update": {"TableName": TABLE, "Key": KEY, "UpdateExpression": "SET"}},
        {"ConditionCheck": {"TableName": TABLE, "Key": KEY}},
        {
            "Delete": {
                "TableName": TABLE,
                "Key": KEY,
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": {":unused": {"S": "x"}},
            }
        },
        {"Delete": {"TableName": TABLE, "Key": KEY, "ReturnValues": "ALL_OLD"}},
        {"Put": {"TableName": TABLE, "Item": KEY}, "Delete": {"TableName": TABLE, "Key": KEY}},
        {"Get": {"TableName": TABLE, "Key": KEY}},
    ],
)
def test_a_transaction_with_an_invalid_request_is_a_validation_exception(
    db: MemoryDynamoDB, entry: dict[str, Any]
) -> None:
    failure = error(
        db,
        "TransactWriteItems",
        TransactItems=[{"Put": {"TableName": TABLE, "Item": key("other")}}, entry],
    )
    assert failure.code == "ValidationException"
    assert get(db, key("other")) is None


def test_a_transaction_on_a_missing_table_is_resource_not_found(db: MemoryDynamoDB) -> None:
    failure = error(
        db,
        "TransactWriteItems",
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": KEY}},
            {"Put": {"TableName": "nowhere", "Item": KEY}},
        ],
    )
    assert failure.code == "ResourceNotFoundException"
    assert get(db) is None


# --- threads and caching -----------------------------------------------------------


def test_racing_conditional_puts_from_8_threads_let_exactly_one_win_per_key(
    db: MemoryDynamoDB,
) -> None:
    keys = [f"key-{i}" for i in range(20)]
    wins: dict[str, list[int]] = {k: [] for k in keys}
    start = threading.Barrier(8)
    record = threading.Lock()

    def contend(worker: int) -> None:
        start.wait()
        for name in keys:
            try:
                db.call(
                    "PutItem",
                    {
                        "TableName": TABLE,
                        "Item": {**key(name), "owner": {"N": str(worker)}},
                        "ConditionExpression": "attribute_not_exists(#k)",
                        "ExpressionAttributeNames": {"#k": "pk"},
                    },
                )
            except MemoryDynamoDBError as failure:
                assert failure.code == "ConditionalCheckFailedException"
            else:
                with record:
                    wins[name].append(worker)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(len(winners) == 1 for winners in wins.values())
    for name, winners in wins.items():
        assert get(db, key(name)) == {**key(name), "owner": {"N": str(winners[0])}}


def test_concurrent_increments_from_8_threads_are_never_lost(db: MemoryDynamoDB) -> None:
    def bump() -> None:
        for _ in range(100):
            update(db, "ADD n :one", one={"N": "1"})

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert get(db) == {**KEY, "n": {"N": "800"}}


def test_parsed_expressions_are_cached_by_text() -> None:
    text = "attribute_not_exists(#cached) OR #cached = :v"
    first = parse_condition(text)
    assert parse_condition(text) is first
    assert first.names == frozenset({"#cached"})
    assert first.values == frozenset({":v"})
