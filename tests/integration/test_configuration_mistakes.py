"""A wrong endpoint or Region fails fast and says where, on both request paths.

An endpoint that refuses every connection (a closed loopback port) or whose
host name does not resolve stops an acquisition after the first second and a
few requests, not after the whole ``wait_timeout``; a table looked for in the
wrong Region names that Region and the endpoint, and points to
``dynalease doctor``.
"""

from __future__ import annotations

import time

import pytest

from dynalease import DynamoDBClient
from dynalease.exceptions import LockUnavailable, TableNotFoundError
from dynalease.lock import SyncDistributedLock

TRANSPORTS = ["lean", "boto"]
#: The rule stops after about 1 s, and its message (checked) says it did; this bound is
#: for a loaded two-core machine (a resolver's answer too), well under the 35 s wait.
FAST_S = 15.0


def _client(url: str, transport: str, region: str = "us-east-1") -> DynamoDBClient:
    return DynamoDBClient(
        region,
        endpoint_url=url,
        access_key="testing",
        secret_key="testing",
        transport=transport,
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("where", ["refused", "unresolvable"])
def test_a_wrong_endpoint_is_reported_in_seconds_not_after_the_wait(
    where: str, transport: str, refusing_url: str
) -> None:
    url = refusing_url if where == "refused" else "http://dynamodb.no-such-host.invalid:8000"
    guard = SyncDistributedLock(_client(url, transport), table="locks", key="k", wait_timeout=35)
    start = time.monotonic()
    with pytest.raises(LockUnavailable) as caught:
        with guard:
            raise AssertionError("must not be acquired")
    assert time.monotonic() - start < FAST_S
    message = str(caught.value)
    assert url.split("//")[1].split(":")[0] in message, message  # names the endpoint
    assert "could connect" in message and "wait_timeout of 35 s" in message
    assert "dynalease doctor --table locks" in message
    assert guard.metrics.request_failures >= 3 and guard.metrics.wait_timeouts == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_wrong_region_names_the_region_the_endpoint_and_doctor(
    endpoint: str, client: DynamoDBClient, transport: str
) -> None:
    if not client.sync_table_exists("regional-locks"):
        client.sync_create_table("regional-locks", partition_key=("key", "S"), wait=True)
    elsewhere = _client(endpoint, transport, region="eu-west-3")
    with pytest.raises(TableNotFoundError) as caught:
        with SyncDistributedLock(elsewhere, table="regional-locks", key="k", wait_timeout=35):
            raise AssertionError("must not be acquired")
    message = str(caught.value)
    assert "'regional-locks'" in message and "'eu-west-3'" in message, message
    assert endpoint in message
    assert "dynalease doctor --table regional-locks --region eu-west-3" in message
    assert "create it first" in message
