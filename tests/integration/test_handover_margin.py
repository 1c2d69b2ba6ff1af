"""No face hands its body a guard with less validity than the hand-over margin.

The rule lives in one place of the engine (``Acquirer.complete``, unit-tested on a
manual clock in ``tests/unit/engine/test_handover_rules.py``); these tests check that
every face goes through it, over HTTP to the moto server through the fault proxy. Each
acquisition's write lands but its answer never comes (one request timeout, lease/3),
nor the first read's (another); the next read answers after 0.9 s. The row is ours,
found at least 2.9 s after the write was sent: past the 2.7 s validity of a 3 s lease,
however slow the machine (a slower run only finds it later). The face must raise
``LockUnavailable``, never run its body, and the row must go.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from support.fault_proxy import FaultProxy
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.exceptions import LockUnavailable
from dynalease.keys import permit_keys
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock
from dynalease.rwlock import SyncReadLock
from dynalease.semaphore import DistributedSemaphore

pytestmark = pytest.mark.timeout(90)

LEASE_S = 3.0
#: How long the background delete of a refused guard's rows may take on a loaded machine
#: (it is one DeleteItem or TransactWriteItems); the test only waits for it to be done.
CLEANUP_WAIT_S = 20.0
READS = ("GetItem", "BatchGetItem")


@pytest.fixture
def proxy(endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(endpoint) as started:
        yield started


def _slowly_reconciled(proxy: FaultProxy, write: str) -> None:
    proxy.lose_response(write, how="silence", times=1)
    proxy.lose_response(READS, how="silence", times=1)
    proxy.latency(READS, 0.9, times=1)


def _through(proxy: FaultProxy) -> DynamoDBClient:
    return DynamoDBClient(
        region="us-east-1", endpoint_url=proxy.url, access_key="testing", secret_key="testing"
    )


def _rows_go(client: DynamoDBClient, table: str, keys: tuple[str, ...]) -> None:
    deadline = time.monotonic() + CLEANUP_WAIT_S
    while time.monotonic() < deadline:
        left = [
            key for key in keys if client.sync_get_item(table, {"key": key}, consistent_read=True)
        ]
        if not left:
            return
        time.sleep(0.1)
    pytest.fail(f"rows {left} of a refused guard were not deleted")


def _sync_lock(client: DynamoDBClient, table: str, key: str) -> None:
    with SyncDistributedLock(client, table=table, key=key, lease_duration=LEASE_S, wait_timeout=10):
        pytest.fail("the body ran on a guard with too little validity left")


def _async_lock(client: DynamoDBClient, table: str, key: str) -> None:
    async def enter() -> None:
        async with DistributedLock(
            client, table=table, key=key, lease_duration=LEASE_S, wait_timeout=10
        ):
            pytest.fail("the body ran on a guard with too little validity left")

    asyncio.run(enter())


def _decorated(client: DynamoDBClient, table: str, key: str) -> None:
    @distributed_lock(client, table=table, key="{name}", lease_duration=LEASE_S, wait_timeout=10)
    def body(name: str) -> None:
        pytest.fail("the body ran on a guard with too little validity left")

    body(key)


FACES: dict[str, tuple[str, Callable[[DynamoDBClient, str, str], None]]] = {
    "sync": ("PutItem", _sync_lock),
    "async": ("PutItem", _async_lock),
    "decorator": ("PutItem", _decorated),
}


@pytest.mark.parametrize("face", list(FACES))
def test_a_lock_found_ours_too_late_is_refused_on_every_face(
    face: str, client: DynamoDBClient, proxy: FaultProxy
) -> None:
    table = fresh_lock_table(client, "handover")
    key = f"job-{uuid.uuid4().hex[:8]}"
    write, enter = FACES[face]
    _slowly_reconciled(proxy, write)
    with pytest.raises(LockUnavailable, match="hand-over margin"):
        enter(_through(proxy), table, key)
    assert [seen.operation for seen in proxy.seen()][:3] == [write, "GetItem", "GetItem"]
    _rows_go(client, table, (key,))


def test_a_multi_key_lock_found_ours_too_late_is_refused(
    client: DynamoDBClient, proxy: FaultProxy
) -> None:
    table = fresh_lock_table(client, "handover")
    keys = ("a", "b", "c")
    _slowly_reconciled(proxy, "TransactWriteItems")
    with pytest.raises(LockUnavailable, match="hand-over margin"):
        with SyncDistributedLock(
            _through(proxy), table=table, keys=keys, lease_duration=LEASE_S, wait_timeout=10
        ):
            pytest.fail("the body ran on a guard with too little validity left")
    _rows_go(client, table, keys)


def test_a_semaphore_permit_found_ours_too_late_is_refused(
    client: DynamoDBClient, proxy: FaultProxy
) -> None:
    table = fresh_lock_table(client, "handover")
    _slowly_reconciled(proxy, "PutItem")

    async def enter() -> None:
        async with DistributedSemaphore(
            _through(proxy), table=table, key="pool", permits=2, lease_duration=LEASE_S,
            wait_timeout=10,
        ):  # fmt: skip
            pytest.fail("the body ran on a guard with too little validity left")

    with pytest.raises(LockUnavailable, match="hand-over margin"):
        asyncio.run(enter())
    _rows_go(client, table, permit_keys("pool", 2))


def test_a_reader_found_in_the_set_too_late_is_refused_and_leaves(
    client: DynamoDBClient, proxy: FaultProxy
) -> None:
    table = fresh_lock_table(client, "handover")
    _slowly_reconciled(proxy, "TransactWriteItems")  # a reader joins in a transaction
    with pytest.raises(LockUnavailable, match="hand-over margin"):
        with SyncReadLock(
            _through(proxy), table=table, key="config", lease_duration=LEASE_S, wait_timeout=10
        ):
            pytest.fail("the body ran on a reader with too little validity left")
    _rows_go(client, table, ("config",))  # the only reader left: the row is deleted
