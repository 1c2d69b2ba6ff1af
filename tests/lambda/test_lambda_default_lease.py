"""The middleware's defaults in functions of every timeout, under the local control plane.

Real parts: awslambdaric runs ``plane_task/holders.py:defaults`` (``lock_handler`` with no
lease, wait or reserve set), the runtime's context counts down from the timeout of each
invocation as Lambda's does, the plane kills the runtime at that timeout, and the locks
live on the moto server. With the defaults the lease is the invocation's remaining time,
at most 30 s, so no timeout is too short to lock (docs/lambda.md, "The budget").
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.lambda_plane import ControlPlane
from support.tables import fresh_lock_table
from test_recovery import TASK, make_layer

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine.protocol import cleanup_budget

TIMEOUTS = (1.0, 3.0, 6.0, 10.0, 15.0, 30.0, 900.0)
#: Short enough to wait out: a contended invocation gives up after 40% of its time.
WAITED_OUT = (1.0, 3.0, 6.0, 10.0)


@pytest.fixture(scope="module")
def module_env(endpoint: str) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL_DYNAMODB=endpoint,
    )
    os.environ.pop("AWS_PROFILE", None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def table(module_env: None, other_client: DynamoDBClient) -> str:
    return fresh_lock_table(other_client, "defaults")


@pytest.fixture(scope="module")
def plane(table: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One function (one warm sandbox) invoked with a different timeout each time."""
    if importlib.util.find_spec("awslambdaric") is None:
        pytest.skip("awslambdaric (dev extra) is not installed: pip install -e '.[dev]'")
    directory = tmp_path_factory.mktemp("defaults")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
    environment["DYNALEASE_TABLE"] = table
    with ControlPlane(
        task=TASK,
        handler="holders.defaults",
        layer=make_layer(directory / "layer", extension=True),
        environment=environment,
        timeout=3.0,
        journal=directory / "journal",
        logs=directory / "logs",
    ) as plane:
        yield plane


def _key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("timeout", TIMEOUTS)
def test_an_uncontended_invocation_locks_runs_and_releases_at_every_timeout(
    timeout: float, plane: ControlPlane, other_client: DynamoDBClient, table: str
) -> None:
    key = _key()
    invocation = plane.invoke({"key": key}, timeout=timeout)
    assert invocation.status == "ok", invocation.payload
    lease_ms, remaining_ms = invocation.payload["lease_ms"], invocation.payload["remaining_ms"]
    # The lease on the row is the time the invocation had left when it acquired (so it
    # covers what the body has left), never more than 30 s.
    assert min(remaining_ms, 30_000) <= lease_ms <= min(timeout, 30.0) * 1000
    if timeout >= 31:
        assert lease_ms == 30_000
    assert other_client.sync_get_item(table, {"key": key}) is None  # released


def _wait_of(message: str) -> float:
    found = re.search(r"the wait_timeout of ([0-9.e+-]+) s ran out", message)
    assert found, message
    return float(found.group(1))


@pytest.mark.parametrize("timeout", WAITED_OUT)
def test_a_contended_invocation_waits_what_its_time_allows_and_keeps_the_cleanup_back(
    timeout: float, plane: ControlPlane, other_client: DynamoDBClient, table: str
) -> None:
    key = _key()
    with SyncDistributedLock(other_client, table=table, key=key, lease_duration=60, wait_timeout=0):
        invocation = plane.invoke({"key": key}, timeout=timeout)
    # It gave up by itself, before the plane's kill at the timeout.
    assert invocation.status == "ok", invocation.payload
    wait = _wait_of(invocation.payload["contended"])
    # The lease was the remaining time r (under 30 s here), its cleanup budget 0.6 r, so
    # the wait was exactly the other 0.4 r: the budget the middleware computes.
    lease = wait / 0.4
    assert lease <= timeout
    assert wait == pytest.approx(lease - cleanup_budget(lease), rel=1e-3)
    # Nothing was waited past the usable time: at most the cleanup budget was left, and
    # some time was left (the invocation returned its answer before its timeout).
    assert 0 < invocation.payload["remaining_ms"] <= cleanup_budget(lease) * 1000


@pytest.mark.parametrize("timeout", [15.0, 30.0, 900.0])
def test_a_contended_invocation_gets_the_lock_when_the_holder_releases(
    timeout: float, plane: ControlPlane, other_client: DynamoDBClient, table: str
) -> None:
    key = _key()
    holder = SyncDistributedLock(
        other_client, table=table, key=key, lease_duration=60, wait_timeout=0
    )
    holder.__enter__()
    released = threading.Timer(1.5, holder.__exit__, (None, None, None))
    released.start()
    try:
        invocation = plane.invoke({"key": key}, timeout=timeout)
    finally:
        released.join()
    assert invocation.status == "ok", invocation.payload
    payload: dict[str, Any] = invocation.payload
    assert "lease_ms" in payload, payload  # it waited and ran, not gave up
    assert min(payload["remaining_ms"], 30_000) <= payload["lease_ms"] <= min(timeout, 30) * 1000
