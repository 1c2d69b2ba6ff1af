"""No lock outlives its invocation: guards under the middleware end at the invocation's deadline.

On Lambda Managed Instances a handler that overruns its timeout keeps running, and so
would its renewals; these tests run handlers past a ``CountdownContext``'s deadline in
this process (nothing stops them either) against the moto server.
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
import uuid
from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext

from dynalease import DynamoDBClient
from dynalease._lambda.budget import remaining_seconds
from dynalease.exceptions import LockLost, LockNotAcquired
from dynalease.lock import SyncDistributedLock, distributed_lock
from dynalease.metrics import LockMetrics
from dynalease.middleware import bound_locks, current_lock, lock_handler
from dynalease.transaction import SyncTransaction

LEASE_S = 3.0  # cleanup budget 1.8 s: a 4 s invocation can still afford to acquire


def _key() -> str:
    return f"deadline-{uuid.uuid4().hex[:8]}"


def _row(client: DynamoDBClient, table: str, key: str) -> Any:
    return client.sync_get_item(table, {"key": key}, consistent_read=True)


def _gone(client: DynamoDBClient, table: str, key: str, within: float = 30.0) -> bool:
    """Whether the row is gone, or goes within ``within`` seconds (its delete is under way).

    Only a delete removes a row (a lease left to run out stays in the table), so a
    generous ``within`` still tells a deleted row from a row left behind; 30 s is for a
    loaded two-core machine, not for the library's speed.
    """
    give_up = time.monotonic() + within
    while _row(client, table, key) is not None:
        if time.monotonic() > give_up:
            return False
        time.sleep(0.02)
    return True


def _until_lost(guard: SyncDistributedLock, limit_s: float = 60.0) -> tuple[float, float]:
    """Work until ``raise_if_lost`` raises, as a careful handler does.

    Returns when the last call that passed began and when the one that raised ended:
    the guard read its clock between those readings, so they bracket its own view of
    the deadline whatever the machine's load. ``limit_s`` only ends a guard that never
    loses its lock, generously for a loaded machine.
    """
    give_up = time.monotonic() + limit_s
    passed_at = -math.inf
    while time.monotonic() < give_up:
        calling_at = time.monotonic()
        try:
            guard.raise_if_lost()
        except LockLost:
            return passed_at, time.monotonic()
        passed_at = calling_at
        time.sleep(0.02)
    raise AssertionError("raise_if_lost never raised past the invocation's deadline")


class _NegativeContext:
    """A Managed Instances context after its timeout: the remaining time reads below zero."""

    def get_remaining_time_in_millis(self) -> int:
        return -250


def test_zero_or_negative_remaining_time_is_expired_not_unknown() -> None:
    assert remaining_seconds(_NegativeContext()) == 0.0
    assert remaining_seconds(None) is None


def _one_hold(client: DynamoDBClient, table: str, key: str) -> LockMetrics:
    with SyncDistributedLock(client, table=table, key=key, wait_timeout=0) as guard:
        return guard.metrics  # as acquired


def test_an_overrunning_handler_loses_its_lock_and_its_row_is_deleted_at_the_deadline(
    lock_table: str, other_client: DynamoDBClient, caplog: pytest.LogCaptureFixture
) -> None:
    key = _key()
    seen: dict[str, Any] = {}

    @lock_handler(key=key, lease_duration=LEASE_S)
    def handler(event: Any, context: Any) -> str:
        guard = current_lock()
        seen["deadline"] = time.monotonic() + context.get_remaining_time_in_millis() / 1000
        seen["passed_at"], seen["lost_at"] = _until_lost(guard)
        with pytest.raises(LockLost), SyncTransaction(guard._client) as transaction:
            guard.check_in(transaction)  # a write conditioned on the lock is refused too
        # The handler is still running: its row is gone and another owner (another
        # invocation: a context of its own, past no deadline) takes the key.
        seen["gone"] = _gone(other_client, lock_table, key)
        seen["other"] = contextvars.Context().run(_one_hold, other_client, lock_table, key)
        return "overran"

    with caplog.at_level(logging.WARNING, logger="dynalease"), pytest.raises(LockLost) as lost:
        handler({}, CountdownContext(4.0))
    # The handler's own exit reports the loss; its row had been deleted long before.
    assert "reached its deadline" in str(lost.value)
    assert seen["gone"]
    # At the deadline, neither before nor after: every check that began before it passed,
    # and the first that began after it raised. The context reports whole milliseconds:
    # the guard's reading of the deadline (at its acquisition) and the handler's (just
    # after) differ by up to 1 ms either way.
    assert seen["passed_at"] < seen["deadline"] + 0.001 <= seen["lost_at"] + 0.002
    # The other owner found the key free: no row to read or wait out, no condition failed
    # (its write may be sent twice on a loaded machine, when the first answer is late).
    other = seen["other"]
    assert (other.conditional_failures, other.read_requests) == (0, 0)
    assert any("reached its deadline" in record.getMessage() for record in caplog.records)


def test_bound_locks_bounds_guards_taken_deeper_in_the_handler(
    lock_table: str, other_client: DynamoDBClient, aws_env: str
) -> None:
    key = _key()
    client = DynamoDBClient()
    seen: dict[str, Any] = {}

    @distributed_lock(client, table=lock_table, key="{name}", lease_duration=LEASE_S)
    def overrun(name: str, context: Any) -> None:
        from dynalease.lock import current_guard

        guard = current_guard()
        assert isinstance(guard, SyncDistributedLock)
        _until_lost(guard)
        seen["gone"] = _gone(other_client, lock_table, name)

    @bound_locks
    def handler(event: Any, context: Any) -> None:
        overrun(event["name"], context)

    with pytest.raises(LockLost):
        handler({"name": key}, CountdownContext(1.5))
    assert seen["gone"]


def test_a_guard_outside_any_handler_is_not_bounded(lock_table: str, aws_env: str) -> None:
    client = DynamoDBClient()
    with SyncDistributedLock(client, table=lock_table, key=_key(), lease_duration=LEASE_S) as guard:
        assert guard._lease.deadline is None


def test_an_invocation_that_ends_in_time_sends_the_same_requests(
    lock_table: str, counted_client: DynamoDBClient, counting_proxy: Any
) -> None:
    def cycle(key: str) -> None:
        with SyncDistributedLock(counted_client, table=lock_table, key=key, lease_duration=LEASE_S):
            time.sleep(0.05)

    cycle(_key())  # warm: the first cycle also builds the client
    counting_proxy.reset()
    cycle(_key())
    unbounded = dict(counting_proxy.counts)

    @bound_locks
    def handler(event: Any, context: Any) -> None:
        cycle(event["key"])

    counting_proxy.reset()
    handler({"key": _key()}, CountdownContext(30.0))
    assert dict(counting_proxy.counts) == unbounded


def test_a_guard_opened_after_the_deadline_is_refused_without_a_request(
    lock_table: str, counted_client: DynamoDBClient, counting_proxy: Any
) -> None:
    @bound_locks
    def handler(event: Any, context: Any) -> None:
        with SyncDistributedLock(counted_client, table=lock_table, key=_key(), lease_duration=30):
            pytest.fail("the body ran after the invocation's deadline")

    counted_client._prepare_locks()  # the client's one-time setup is not what is counted
    counting_proxy.reset()
    with pytest.raises(LockNotAcquired, match="deadline had passed, so no request was made"):
        handler({}, _NegativeContext())
    assert counting_proxy.total() == 0


def test_a_wait_inside_an_invocation_ends_at_its_deadline(
    lock_table: str, other_client: DynamoDBClient, aws_env: str
) -> None:
    """The key stays held: the wait (35 s by default) ends at the deadline, 1 s away,
    without a guard; the bound is generous for a loaded machine, the wait it replaces is not."""
    key = _key()
    client = DynamoDBClient()

    @bound_locks
    def handler(event: Any, context: Any) -> None:
        with SyncDistributedLock(client, table=lock_table, key=key, lease_duration=30):
            pytest.fail("the body ran without the lock")

    with SyncDistributedLock(other_client, table=lock_table, key=key, lease_duration=30):
        started = time.monotonic()
        with pytest.raises(LockNotAcquired, match="deadline came before the wait_timeout"):
            handler({}, CountdownContext(1.0))
        assert time.monotonic() - started < 15.0


# --- tenant isolation: {tenant_id} from the invocation ----------------------------------


def test_a_tenant_id_placeholder_is_the_invocations_tenant(lock_table: str) -> None:
    @lock_handler(key="tenant:{tenant_id}:{job}", lease_duration=LEASE_S)
    def handler(event: Any, context: Any) -> str:
        return current_lock().key

    key = handler({"job": "nightly"}, CountdownContext(30.0, tenant_id="acme"))
    assert key == "tenant:" + "4:acme:7:nightly"


def test_a_missing_tenant_id_is_a_clear_error_before_any_request(
    lock_table: str, counting_proxy: Any
) -> None:
    @lock_handler(key="tenant:{tenant_id}", lease_duration=LEASE_S)
    def handler(event: Any, context: Any) -> str:
        return "ran"

    counting_proxy.reset()
    with pytest.raises(ValueError, match=r"placeholder \{tenant_id\}: the invocation's tenant id"):
        handler({"tenant_id": "from-the-event"}, CountdownContext(30.0))
    assert counting_proxy.total() == 0


def test_fields_can_still_map_tenant_id_to_the_event(lock_table: str) -> None:
    @lock_handler(key="{tenant_id}", fields={"tenant_id": "detail.tenant"}, lease_duration=LEASE_S)
    def handler(event: Any, context: Any) -> str:
        return current_lock().key

    assert handler({"detail": {"tenant": "t-9"}}, CountdownContext(30.0, tenant_id="x")) == "t-9"


def test_an_async_guard_in_a_bounded_handler_ends_at_the_deadline_too(
    lock_table: str, other_client: DynamoDBClient, aws_env: str
) -> None:
    import asyncio

    from dynalease.lock import DistributedLock

    client = DynamoDBClient()
    key = _key()
    seen: dict[str, Any] = {}

    async def work() -> None:
        async with DistributedLock(client, table=lock_table, key=key, lease_duration=LEASE_S) as g:
            await g.until_lost()  # woken by the loss at the deadline
            seen["gone"] = _gone(other_client, lock_table, key)

    @bound_locks
    def handler(event: Any, context: Any) -> None:
        asyncio.run(work())

    with pytest.raises(LockLost):
        handler({}, CountdownContext(1.0))
    assert seen["gone"]
