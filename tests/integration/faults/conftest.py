"""Fixtures for the fault matrix: a fault proxy in front of the moto server.

``direct`` talks to moto directly and is used to create tables and read rows as
they really are; ``matrix`` holds the proxy, a client talking through it, the
direct client and the test's table. Clients are made from one shared boto3
session, so each test does not reload botocore's service model.
"""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import botocore.config
import pytest
from support.fault_matrix import Matrix
from support.fault_proxy import FaultProxy
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "no_retries: the matrix's client has SDK retries off (matrix.no_retries)"
    )


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
    return fresh_lock_table(direct, "faults")


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
def matrix(
    request: pytest.FixtureRequest,
    proxy: FaultProxy,
    direct: DynamoDBClient,
    table: str,
    session: boto3.Session,
    transport: str | None,
) -> Matrix:
    """The proxy, a warmed client whose every request goes through it, ``direct`` and
    ``table``. The client has SDK retries as configured; in a test marked
    ``no_retries`` it has them off for item and transaction requests too."""
    retries = request.node.get_closest_marker("no_retries") is None
    if retries:
        made = DynamoDBClient.from_session(session, endpoint_url=proxy.url, transport=transport)
    else:
        config = botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"})
        items = session.client("dynamodb", endpoint_url=proxy.url, config=config)
        made = DynamoDBClient.from_client(items, transport=transport)
    return Matrix(
        proxy=proxy,
        client=_warmed(proxy, table, made),
        direct=direct,
        table=table,
        retries=retries,
    )
