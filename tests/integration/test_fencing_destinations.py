"""dynalease.fencing at real destinations: PostgreSQL (a cluster the tests start), SQLite, DynamoDB.

Each destination keeps the highest token it accepted and refuses a lower one;
an equal token (the same holder again) is accepted; a refused write leaves the
row exactly as it was.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from support.postgres import Cluster
from support.servers import raw_dynamodb
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.fencing import fence_dynamodb_delete, fence_dynamodb_write, fenced_update
from dynalease.lock import SyncDistributedLock

Connect = Callable[[], Any]


@pytest.fixture(params=["sqlite3", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """A connection with a table ``jobs(id, state, fence)`` holding row 1 (fence NULL)."""
    if request.param == "sqlite3":
        connection: Any = sqlite3.connect(tmp_path / "jobs.db")
        table = "jobs"
    else:
        import psycopg

        cluster: Cluster = request.getfixturevalue("postgres")
        connection = psycopg.connect(cluster.dsn)
        table = f"jobs_{uuid.uuid4().hex[:8]}"
    cursor = connection.cursor()
    cursor.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, state TEXT, fence BIGINT)")
    cursor.execute(f"INSERT INTO {table} (id, state) VALUES (1, 'new')")
    connection.commit()
    try:
        yield connection, table
    finally:
        connection.close()


def state(connection: Any, table: str) -> tuple[Any, ...]:
    cursor = connection.cursor()
    cursor.execute(f"SELECT state, fence FROM {table} WHERE id = 1")
    row = cursor.fetchone()
    cursor.close()
    return tuple(row)


def write(connection: Any, table: str, value: str, token: int) -> bool:
    accepted = fenced_update(connection, table, set={"state": value}, where={"id": 1}, token=token)
    connection.commit()
    return accepted


def test_sql_destinations_accept_increasing_tokens_and_refuse_stale_ones(database: Any) -> None:
    connection, table = database
    assert write(connection, table, "by-2", 2)
    assert state(connection, table) == ("by-2", 2)
    assert write(connection, table, "by-2-again", 2)  # the same holder writes again
    assert write(connection, table, "by-5", 5)
    assert not write(connection, table, "stale-4", 4)
    assert not write(connection, table, "stale-1", 1)
    assert state(connection, table) == ("by-5", 5)
    assert not fenced_update(connection, table, set={"state": "x"}, where={"id": 2}, token=9)


def test_a_text_fence_column_is_compared_as_a_number(database: Any) -> None:
    connection, table = database
    cursor = connection.cursor()
    cursor.execute(f"CREATE TABLE {table}_text (id INTEGER PRIMARY KEY, state TEXT, fence TEXT)")
    cursor.execute(f"INSERT INTO {table}_text (id, state) VALUES (1, 'new')")
    connection.commit()
    assert write(connection, f"{table}_text", "by-10", 10)
    assert not write(connection, f"{table}_text", "stale-9", 9)  # '10' <= '9' as text
    assert write(connection, f"{table}_text", "by-11", 11)
    assert state(connection, f"{table}_text") == ("by-11", "11")


@pytest.mark.parametrize("stored", ["junk", "12ab", ""])
def test_a_fence_that_is_not_a_whole_number_refuses_every_token(database: Any, stored: str) -> None:
    # SQLite casts 'junk' and '' to 0 and '12ab' to 12; PostgreSQL raises on them. Either
    # way the write must not land: a damaged fence fails closed.
    connection, table = database
    cursor = connection.cursor()
    cursor.execute(f"CREATE TABLE {table}_text (id INTEGER PRIMARY KEY, state TEXT, fence TEXT)")
    cursor.execute(f"INSERT INTO {table}_text (id, state, fence) VALUES (1, 'kept', '{stored}')")
    connection.commit()
    try:
        accepted = write(connection, f"{table}_text", "stale", 10**6)
    except Exception as error:  # PostgreSQL: invalid input syntax for type bigint
        assert "bigint" in str(error)
        connection.rollback()
        accepted = False
    assert not accepted
    assert state(connection, f"{table}_text") == ("kept", stored)


def test_sql_tokens_from_real_fenced_locks(database: Any, client: DynamoDBClient) -> None:
    connection, table = database
    name = fresh_lock_table(client, "fence")
    with SyncDistributedLock(client, table=name, key="job:1", fencing=True) as first:
        assert write(connection, table, "first", first.fencing_token)
    with SyncDistributedLock(client, table=name, key="job:1", fencing=True) as second:
        assert write(connection, table, "second", second.fencing_token)
    assert not write(connection, table, "first-late", first.fencing_token)
    assert state(connection, table) == ("second", second.fencing_token)


# --- DynamoDB ----------------------------------------------------------------------


@pytest.fixture
def dynamodb(endpoint: str) -> Any:
    return raw_dynamodb(endpoint)


@pytest.fixture
def orders(dynamodb: Any) -> str:
    name = f"orders_{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def refused(call: Callable[[], Any]) -> bool:
    try:
        call()
    except ClientError as error:
        assert error.response["Error"]["Code"] == "ConditionalCheckFailedException"
        return True
    return False


def test_dynamodb_puts_and_updates_are_fenced(dynamodb: Any, orders: str) -> None:
    def put(value: str, token: int) -> Any:
        request = {"TableName": orders, "Item": {"id": {"S": "o1"}, "state": {"S": value}}}
        return lambda: dynamodb.put_item(**fence_dynamodb_write(request, token))

    def update(value: str, token: int) -> Any:
        request = {
            "TableName": orders,
            "Key": {"id": {"S": "o1"}},
            "UpdateExpression": "SET #s = :s ADD hits :one",
            "ConditionExpression": "attribute_exists(id)",
            "ExpressionAttributeNames": {"#s": "state"},
            "ExpressionAttributeValues": {":s": {"S": value}, ":one": {"N": "1"}},
        }
        return lambda: dynamodb.update_item(**fence_dynamodb_write(request, token))

    def item() -> dict[str, Any]:
        answer = dynamodb.get_item(TableName=orders, Key={"id": {"S": "o1"}}, ConsistentRead=True)
        return dict(answer["Item"])

    assert not refused(put("put-by-3", 3))
    assert not refused(put("put-by-3-again", 3))
    assert refused(put("stale-put-2", 2))
    assert item() == {"id": {"S": "o1"}, "state": {"S": "put-by-3-again"}, "fence": {"N": "3"}}
    assert not refused(update("update-by-4", 4))
    assert refused(update("stale-update-3", 3))
    assert item() == {
        "id": {"S": "o1"},
        "state": {"S": "update-by-4"},
        "fence": {"N": "4"},
        "hits": {"N": "1"},
    }


def test_a_boto3_table_resource_takes_plain_values(endpoint: str, orders: str) -> None:
    table = boto3.resource(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).Table(orders)
    request = {"Item": {"id": "o2", "state": "by-6"}}
    table.put_item(**fence_dynamodb_write(request, 6, plain_values=True))
    stale = {"Item": {"id": "o2", "state": "by-5"}}
    assert refused(lambda: table.put_item(**fence_dynamodb_write(stale, 5, plain_values=True)))
    assert table.get_item(Key={"id": "o2"}, ConsistentRead=True)["Item"] == {
        "id": "o2",
        "state": "by-6",
        "fence": 6,
    }


def test_a_fenced_delete_keeps_the_fence_so_a_stale_write_stays_refused(
    dynamodb: Any, orders: str
) -> None:
    key = {"id": {"S": "o7"}}

    def put(value: str, token: int) -> Any:
        request = {"TableName": orders, "Item": {**key, "state": {"S": value}}}
        return lambda: dynamodb.put_item(**fence_dynamodb_write(request, token))

    def update(value: str, token: int) -> Any:
        request = {
            "TableName": orders,
            "Key": key,
            "UpdateExpression": "SET #s = :s",
            "ExpressionAttributeNames": {"#s": "state"},
            "ExpressionAttributeValues": {":s": {"S": value}},
        }
        return lambda: dynamodb.update_item(**fence_dynamodb_write(request, token))

    def delete(token: int) -> Any:
        request = {"TableName": orders, "Key": key}
        return lambda: dynamodb.put_item(**fence_dynamodb_delete(request, token))

    def item() -> dict[str, Any]:
        answer = dynamodb.get_item(TableName=orders, Key=key, ConsistentRead=True)
        return dict(answer["Item"])

    assert not refused(put("packed by A", 1))
    assert not refused(put("shipped by B", 2))
    assert refused(delete(1))  # a stale delete is refused like a stale write
    assert not refused(delete(2))  # B completes the order and removes it
    tombstone = {**key, "fence": {"N": "2"}, "fence_tombstone": {"BOOL": True}}
    assert item() == tombstone
    assert refused(put("packed by A (late)", 1))  # A resumes after a pause: refused
    assert refused(update("packed by A (late)", 1))
    assert item() == tombstone
    assert not refused(update("reopened by C", 3))  # a newer owner writes again: live
    assert item() == {**key, "fence": {"N": "3"}, "state": {"S": "reopened by C"}}
    assert not refused(delete(3))
    assert not refused(put("recreated by D", 4))
    assert item() == {**key, "fence": {"N": "4"}, "state": {"S": "recreated by D"}}
