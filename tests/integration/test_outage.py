"""An outage is not contention, with a real DynamoDBClient on both request paths.

An endpoint nobody listens on (a closed loopback port) refuses every connection;
one that accepts connections and never answers (a listening socket nobody
reads) times every request out. Either way the lock raises ``LockUnavailable``
within its budget, naming the last failure; a key held by another owner on a
real (moto) table is plain ``LockNotAcquired``.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator

import pytest

from dynalease import DynamoDBClient
from dynalease.exceptions import LockNotAcquired, LockUnavailable
from dynalease.lock import DistributedLock, SyncDistributedLock
from dynalease.middleware import key_hash

TRANSPORTS = ["lean", "boto"]
#: Past each budget, for a loaded two-core machine (botocore's first client build, thread
#: hand-overs): several times the budgets, and still far from what they prevent, the OS's
#: minutes-long timeouts or a wait that never ends. The exact budgets are the engine's unit
#: tests', on a manual clock.
SLACK_S = 10.0


def _client(url: str, transport: str) -> DynamoDBClient:
    return DynamoDBClient(
        region="us-east-1",
        endpoint_url=url,
        access_key="testing",
        secret_key="testing",
        transport=transport,
    )


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wait", [0.0, 1.0], ids=["wait0", "wait1"])
def test_a_refused_endpoint_is_lock_unavailable_within_the_budget(
    refusing_url: str, transport: str, wait: float
) -> None:
    client = _client(refusing_url, transport)
    # The transport's one-time setup first, as the middleware does: on a loaded machine
    # botocore's client build alone could spend the 1 s wait before any request (then,
    # rightly, no outage is reported).
    client._prepare_locks()
    guard = SyncDistributedLock(
        client, table="outage-locks", key="k", lease_duration=10, wait_timeout=wait
    )
    start = time.monotonic()
    with pytest.raises(LockUnavailable, match=r"last failure: .+\)") as caught:
        with guard:
            raise AssertionError("must not be acquired")
    elapsed = time.monotonic() - start
    budget = wait if wait else 5.0  # the single attempt's network budget, min(0.6 x 10 s, 5 s)
    assert elapsed < budget + SLACK_S
    assert isinstance(caught.value, LockNotAcquired)
    message = str(caught.value)
    assert "not contention" in message and f"key_hash={key_hash('k')}" in message
    assert guard.metrics.wait_timeouts == 1
    assert guard.metrics.request_failures >= 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_endpoint_that_never_answers_is_lock_unavailable_within_the_budget(
    silent_url: str, transport: str
) -> None:
    client = _client(silent_url, transport)
    client._prepare_locks()  # as above: the wait is for requests, not the client's build

    async def main() -> None:
        guard = DistributedLock(
            client, table="outage-locks", key="k", lease_duration=3, wait_timeout=1.5
        )
        start = time.monotonic()
        with pytest.raises(LockUnavailable, match="ran out"):
            async with guard:
                raise AssertionError("must not be acquired")
        assert time.monotonic() - start < 1.5 + SLACK_S
        assert guard.metrics.wait_timeouts == 1

    asyncio.run(main())


def test_a_key_held_by_another_owner_is_plain_lock_not_acquired(client: DynamoDBClient) -> None:
    table = f"outage-{uuid.uuid4().hex[:12]}"
    client.sync_create_table(table, partition_key=("key", "S"), wait=True)
    with SyncDistributedLock(client, table=table, key="k", lease_duration=10):
        for wait in (0.0, 0.3):
            guard = SyncDistributedLock(
                client, table=table, key="k", lease_duration=10, wait_timeout=wait
            )
            with pytest.raises(LockNotAcquired, match="held by another owner") as caught:
                with guard:
                    raise AssertionError("must not be acquired")
            assert type(caught.value) is LockNotAcquired
            assert guard.metrics.wait_timeouts == 1
