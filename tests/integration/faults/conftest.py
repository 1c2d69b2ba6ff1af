"""Fixtures for the fault matrix: a fault proxy in front of the moto server.

``direct`` talks to moto directly and is used to create tables and read rows as
they really are; ``faulty`` talks through ``proxy``. Clients are made from one
shared boto3 session, so each test does not reload botocore's service model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.config
import pytest
from support.fault_proxy import FaultProxy

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock


@pytest.fixture(scope="module")
def session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


@pytest.fixture(scope="module")
def direct(session: boto3.Session, endpoint: str) -> DynamoDBClient:
    """A client talking to moto without the proxy."""
    return DynamoDBClient.from_session(session, endpoint_url=endpoint)


@pytest.fixture
def proxy(endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(endpoint) as running:
        yield running
    assert not running.errors, f"the fault proxy failed: {running.errors!r}"


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str | None:
    """The lock request path under test (parametrize indirectly with "lean"/"boto");
    None: the default, ``DYNALEASE_TRANSPORT`` or lean."""
    choice: str | None = getattr(request, "param", None)
    return choice


@pytest.fixture
def table(direct: DynamoDBClient) -> str:
    """A fresh lock table, created directly on moto."""
    name = f"faults-{uuid.uuid4().hex[:12]}"
    direct.sync_create_table(name, partition_key=("key", "S"), wait=True)
    return name


def _warmed(proxy: FaultProxy, table: str, client: DynamoDBClient) -> DynamoDBClient:
    """Make one lock round trip and one item read before any rule is installed.

    A client builds its HTTP clients on first use, inside the first request's
    timeout; with the matrix's one-second leases (a 0.33 s request timeout) that
    first request could time out on a busy machine and blur what a test counts.
    """
    with SyncDistributedLock(client, table=table, key="warm-up", lease_duration=10):
        pass
    client.sync_get_item(table, {"key": "warm-up"})
    proxy.log.clear()
    return client


@pytest.fixture
def faulty(
    proxy: FaultProxy, table: str, session: boto3.Session, transport: str | None
) -> DynamoDBClient:
    """A client whose every request goes through the proxy (SDK retries as configured)."""
    made = DynamoDBClient.from_session(session, endpoint_url=proxy.url, transport=transport)
    return _warmed(proxy, table, made)


@pytest.fixture
def no_retries(
    proxy: FaultProxy, table: str, session: boto3.Session, transport: str | None
) -> DynamoDBClient:
    """Like ``faulty`` but with SDK retries off for item and transaction requests too."""
    config = botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"})
    items = session.client("dynamodb", endpoint_url=proxy.url, config=config)
    made = DynamoDBClient.from_client(items, transport=transport)
    return _warmed(proxy, table, made)


@pytest.fixture
def row(direct: DynamoDBClient, table: str) -> Callable[[str], dict[str, Any] | None]:
    """Read a lock row straight from moto with a strongly consistent read."""

    def read(key: str) -> dict[str, Any] | None:
        return direct.sync_get_item(table, {"key": key}, consistent_read=True)

    return read
