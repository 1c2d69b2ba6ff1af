"""A user's botocore hooks and tracers see only the requests the user made.

The lean path finds where its lock requests go from botocore's endpoint ruleset, without
sending anything through a botocore client: no phantom ``GetItem`` reaches a
``before-call``/``after-call`` handler, nor a tracer that wraps ``_make_api_call`` (X-Ray,
OpenTelemetry's botocore instrumentation).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.client
import pytest

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._transport.lean import LeanTransport


@pytest.fixture
def table(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    name = f"probe-{uuid.uuid4().hex[:10]}"
    DynamoDBClient(region="us-east-1", endpoint_url=endpoint).sync_create_table(name, wait=True)
    return name


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every botocore API call in the process, as a tracer that wraps it records them."""
    calls: list[str] = []
    original = botocore.client.BaseClient._make_api_call

    def recording(self: Any, operation: str, params: dict[str, Any]) -> Any:
        calls.append(f"{operation} {params.get('TableName')}")
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    yield calls


def _hooked(events: Any) -> list[str]:
    seen: list[str] = []

    def before(model: Any, params: dict[str, Any], **_: Any) -> None:
        seen.append(f"before-call {model.name}")

    def after(model: Any, **_: Any) -> None:
        seen.append(f"after-call {model.name}")

    events.register("before-call.dynamodb", before)
    events.register("after-call.dynamodb", after)
    return seen


def _lock_cycle(client: DynamoDBClient, table: str) -> None:
    with SyncDistributedLock(client, table=table, key=f"k-{uuid.uuid4().hex[:6]}"):
        pass
    transport = client._lock_store.transport
    assert isinstance(transport, LeanTransport) and transport.route is not None


def test_hooks_on_the_users_session_see_no_request_dynalease_made_to_find_its_endpoint(
    endpoint: str, table: str, traced: list[str]
) -> None:
    session = boto3.Session(region_name="us-east-1")
    seen = _hooked(session.events)  # every client of the session inherits them
    client = DynamoDBClient.from_session(session, endpoint_url=endpoint, transport="lean")
    _lock_cycle(client, table)
    assert seen == []
    assert traced == []
    client.sync_put_item(table, {"key": "mine"})  # the user's own request is seen
    assert seen == ["before-call PutItem", "after-call PutItem"]
    assert traced == [f"PutItem {table}"]


def test_hooks_on_the_users_client_see_no_request_dynalease_made_to_find_its_endpoint(
    endpoint: str, table: str, traced: list[str]
) -> None:
    mine = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
    seen = _hooked(mine.meta.events)
    client = DynamoDBClient.from_client(mine, transport="lean")
    _lock_cycle(client, table)
    assert seen == []
    assert traced == []
