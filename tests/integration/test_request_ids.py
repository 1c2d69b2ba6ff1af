"""Every error made from a DynamoDB answer carries the answer's AWS request id.

Against the moto server (which sends ``x-amzn-RequestId`` as DynamoDB does), on the
lean path and on botocore's: the item helpers' errors, a lock request's error, and
the lock outcomes made from the lock's last answer. The id shows in ``str(error)``,
so a log line can be traced to the request in AWS support or CloudTrail.
"""

from __future__ import annotations

import uuid

import pytest
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.exceptions import (
    DynaleaseError,
    LockLost,
    LockNotAcquired,
    TableNotFoundError,
    ValidationError,
)
from dynalease.lock import SyncDistributedLock

PATHS = pytest.mark.parametrize("transport", ["lean", "boto"])


@pytest.fixture
def make_client(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)

    def make(transport: str) -> DynamoDBClient:
        return DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport=transport)

    return make


def _shows_its_request_id(error: DynaleaseError) -> None:
    assert error.request_id, f"no request id on {error!r}"
    assert error.request_id in str(error)


@PATHS
def test_an_item_helpers_error_carries_the_answers_request_id(
    make_client: object, transport: str
) -> None:
    client = make_client(transport)  # type: ignore[operator]
    with pytest.raises(TableNotFoundError) as missing:
        client.sync_get_item(f"missing-{uuid.uuid4().hex[:8]}", {"key": "k"})
    _shows_its_request_id(missing.value)
    table = fresh_lock_table(client, "ids")
    with pytest.raises(ValidationError) as invalid:
        client.sync_get_item(table, {"no-such-key-attribute": "k"})
    _shows_its_request_id(invalid.value)


@PATHS
def test_a_lock_requests_error_carries_the_answers_request_id(
    make_client: object, transport: str
) -> None:
    client = make_client(transport)  # type: ignore[operator]
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TableNotFoundError) as raised:
        with SyncDistributedLock(client, table=missing, key="k", wait_timeout=0):
            pass
    _shows_its_request_id(raised.value)


@PATHS
def test_a_lock_not_acquired_carries_the_last_answers_request_id(
    make_client: object, transport: str
) -> None:
    client = make_client(transport)  # type: ignore[operator]
    table = fresh_lock_table(client, "ids")
    with SyncDistributedLock(client, table=table, key="held"):
        other = make_client(transport)  # type: ignore[operator]
        with pytest.raises(LockNotAcquired) as raised:
            with SyncDistributedLock(other, table=table, key="held", wait_timeout=0):
                pass
    _shows_its_request_id(raised.value)


@PATHS
def test_a_lock_lost_carries_the_last_answers_request_id(
    make_client: object, transport: str
) -> None:
    client = make_client(transport)  # type: ignore[operator]
    table = fresh_lock_table(client, "ids")
    guard = SyncDistributedLock(client, table=table, key="taken", lease_duration=2)
    with pytest.raises(LockLost) as raised:
        with guard:
            # Someone deletes the row by hand: the release's answer says it is gone.
            client.sync_delete_item(table, {"key": "taken"})
    _shows_its_request_id(raised.value)


@PATHS
def test_a_lock_error_reworded_with_advice_shows_its_request_id_once(
    make_client: object, transport: str
) -> None:
    client = make_client(transport)  # type: ignore[operator]
    table = f"wrong-schema-{uuid.uuid4().hex[:8]}"
    client.sync_create_table(table, partition_key=("pk", "S"), wait=True)
    with pytest.raises(ValidationError) as raised:
        with SyncDistributedLock(client, table=table, key="k", wait_timeout=0):
            pass
    _shows_its_request_id(raised.value)
    assert str(raised.value).count(str(raised.value.request_id)) == 1
