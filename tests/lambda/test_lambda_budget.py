"""The wait a Lambda invocation can afford: remaining - reserve - cleanup, never more."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext

from dynalease import DynamoDBClient
from dynalease._engine.acquire import Acquirer
from dynalease._engine.protocol import cleanup_budget
from dynalease._lambda.budget import (
    DEFAULT_WAIT_S,
    NoTimeLeft,
    acquisition_wait,
    remaining_seconds,
)
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import SyncDistributedLock
from dynalease.middleware import current_lock, lock_handler

# --- the rule itself (pure) --------------------------------------------------


def test_the_wait_is_remaining_time_minus_reserve_minus_the_cleanup_budget() -> None:
    # 30 s lease: cleanup budget min(0.6 x 30, 10) = 10 s.
    assert acquisition_wait(20.0, reserve_s=2.0, lease_s=30.0, wait_timeout=None) == 8.0
    # 1 s lease: cleanup budget 0.6 s.
    assert acquisition_wait(3.0, reserve_s=0.4, lease_s=1.0, wait_timeout=None) == pytest.approx(
        2.0
    )


def test_a_smaller_wait_timeout_wins_and_a_larger_one_is_cut_to_the_usable_time() -> None:
    assert acquisition_wait(20.0, reserve_s=2.0, lease_s=30.0, wait_timeout=3.0) == 3.0
    assert acquisition_wait(20.0, reserve_s=2.0, lease_s=30.0, wait_timeout=100.0) == 8.0


def test_wait_timeout_zero_stays_one_immediate_attempt() -> None:
    assert acquisition_wait(20.0, reserve_s=2.0, lease_s=30.0, wait_timeout=0.0) == 0.0


@pytest.mark.parametrize("remaining", [0.0, 5.0, 12.0])
def test_no_usable_time_means_no_attempt(remaining: float) -> None:
    # 12 s - 2 s reserve - 10 s cleanup is exactly 0: still no attempt.
    with pytest.raises(NoTimeLeft) as caught:
        acquisition_wait(remaining, reserve_s=2.0, lease_s=30.0, wait_timeout=0.0)
    assert caught.value.remaining_s == remaining
    assert caught.value.cleanup_s == cleanup_budget(30.0) == 10.0


def test_an_unknown_remaining_time_falls_back_to_wait_timeout_or_the_lock_default() -> None:
    assert acquisition_wait(None, reserve_s=5.0, lease_s=30.0, wait_timeout=2.0) == 2.0
    assert acquisition_wait(None, reserve_s=5.0, lease_s=30.0, wait_timeout=None) == DEFAULT_WAIT_S


class _Remaining:
    def __init__(self, millis: object) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> object:
        return self.millis


def test_remaining_time_zero_is_a_value_and_only_a_context_without_a_clock_is_unknown() -> None:
    assert remaining_seconds(_Remaining(0)) == 0.0
    assert remaining_seconds(_Remaining(-5)) == 0.0
    assert remaining_seconds(_Remaining(1500)) == 1.5
    assert remaining_seconds(None) is None
    with pytest.raises(TypeError, match="milliseconds"):
        remaining_seconds(_Remaining("1500"))


# --- with a real countdown against the moto server ---------------------------------


def _key() -> str:
    return f"j-{uuid.uuid4().hex[:8]}"


def test_a_contended_invocation_gives_up_when_only_reserve_and_cleanup_are_left(
    lock_table: str, other_client: DynamoDBClient, counted_client: DynamoDBClient
) -> None:
    calls: list[str] = []

    # 2 s lease -> 1.2 s cleanup budget; 0.5 s reserved for the work. The figures leave
    # 0.6 s for scheduling on a loaded machine (one CI run saw a request end 0.86 s late).
    @lock_handler(counted_client, key="job:{job_id}", lease_duration=2.0, reserve_time=0.5)
    def handler(event: dict[str, str], context: object) -> None:
        calls.append(event["job_id"])

    job = _key()
    with SyncDistributedLock(other_client, table=lock_table, key=f"job:{job}", lease_duration=30):
        context = CountdownContext(3.0)  # usable: 3.0 - 0.5 - 1.2 = 1.3 s
        start = time.monotonic()
        with pytest.raises(LockNotAcquired, match="ran out"):
            handler({"job_id": job}, context)
        waited = time.monotonic() - start
        left = context.get_remaining_time_in_millis() / 1000
    assert calls == []
    assert waited >= 1.2, "gave up before the usable time was spent"
    # What it did not spend is what it reserved for the work and the cleanup
    # (a scheduling margin aside): it never dips into them.
    assert left >= 0.5 + 1.2 - 0.6
    assert waited < 1.3 + 1.5  # generous: the wait is bounded by the budget, not the lease


def test_an_invocation_with_too_little_time_raises_at_once_without_any_request(
    lock_table: str, counted_client: DynamoDBClient, counting_proxy: Any
) -> None:
    calls: list[str] = []

    @lock_handler(counted_client, key="job:{job_id}", lease_duration=1.0, reserve_time=0.5)
    def handler(event: dict[str, str], context: object) -> None:
        calls.append("ran")

    with pytest.raises(LockNotAcquired) as caught:
        handler({"job_id": _key()}, CountdownContext(1.0))  # 1.0 - 0.5 - 0.6 < 0
    message = str(caught.value)
    assert re.search(r"had 0\.\d{3} s left", message), message
    assert "reserve_time (0.5 s)" in message
    assert "cleanup budget of the 1 s lease (0.6 s)" in message
    assert "no request was made" in message
    assert counting_proxy.total() == 0
    assert calls == []


def test_a_countdown_that_reached_zero_is_no_time_not_an_unknown_deadline(
    lock_table: str, counted_client: DynamoDBClient, counting_proxy: Any
) -> None:
    @lock_handler(counted_client, key="job:{job_id}", lease_duration=1.0, wait_timeout=5)
    def handler(event: dict[str, str], context: object) -> None:
        raise AssertionError("must not run")

    context = CountdownContext(0.05)
    time.sleep(0.1)
    assert context.get_remaining_time_in_millis() == 0
    with pytest.raises(LockNotAcquired, match=r"had 0\.000 s left"):
        handler({"job_id": _key()}, context)
    assert counting_proxy.total() == 0


def test_wait_timeout_zero_makes_one_attempt_on_a_held_lock(
    lock_table: str,
    other_client: DynamoDBClient,
    counted_client: DynamoDBClient,
    counting_proxy: Any,
) -> None:
    @lock_handler(counted_client, key="job:{job_id}", wait_timeout=0)
    def handler(event: dict[str, str], context: object) -> None:
        raise AssertionError("must not run")

    job = _key()
    with SyncDistributedLock(other_client, table=lock_table, key=f"job:{job}"):
        with pytest.raises(LockNotAcquired, match="one attempt"):
            handler({"job_id": job}, CountdownContext(60))
    counts = counting_proxy.counts
    assert counts["PutItem"] == 1
    assert counts["UpdateItem"] == counts["DeleteItem"] == 0


def test_a_single_attempt_never_spends_more_than_the_invocation_can_afford(
    lock_table: str, counted_client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 12 s left, 5 s reserved, a 10 s lease's cleanup budget is 6 s: about 1 s usable,
    # well under the 5 s network budget a wait_timeout=0 attempt has on its own.
    caps: list[float | None] = []
    begin = Acquirer.begin

    def noting_begin(self: Acquirer, attempt_cap: float | None = None) -> Any:
        caps.append(attempt_cap)  # the cap the middleware passed to the acquisition
        return begin(self, attempt_cap)

    monkeypatch.setattr(Acquirer, "begin", noting_begin)

    @lock_handler(
        counted_client, key="job:{job_id}", wait_timeout=0, lease_duration=10, reserve_time=5
    )
    def handler(event: dict[str, str], context: object) -> float | None:
        current_lock().raise_if_lost()
        return caps[-1]

    cap = handler({"job_id": _key()}, CountdownContext(12))
    assert cap is not None and 0.5 < cap <= 1.0


def test_an_uncontended_invocation_makes_two_writes(
    lock_table: str, counted_client: DynamoDBClient, counting_proxy: Any
) -> None:
    @lock_handler(counted_client, key="job:{job_id}")
    def handler(event: dict[str, str], context: object) -> str:
        return "done"

    assert handler({"job_id": _key()}, CountdownContext(60)) == "done"
    counts = counting_proxy.counts
    assert (counts["PutItem"], counts["DeleteItem"], counting_proxy.total()) == (1, 1, 2)


def test_warm_invocations_share_one_client_so_short_waits_recover_an_abandoned_lock(
    lock_table: str, other_client: DynamoDBClient
) -> None:
    # A row left by an owner that died (1 s lease). A contender may take it over only
    # after seeing it unchanged for the stored lease: no single 0.4 s wait can, but
    # two invocations of one warm function can, because the module-level client
    # keeps the first invocation's observation.
    job = _key()
    other_client.sync_put_item(
        lock_table,
        {
            "key": f"job:{job}",
            "owner": str(uuid.uuid4()),
            "version": str(uuid.uuid4()),
            "lease_ms": 1000,
            "protocol": 1,
        },
    )

    @lock_handler(key="job:{job_id}", wait_timeout=0.4)
    def handler(event: dict[str, str], context: object) -> str:
        return "recovered"

    started = time.monotonic()
    with pytest.raises(LockNotAcquired):
        handler({"job_id": job}, CountdownContext(60))
    time.sleep(max(0.0, started + 1.05 - time.monotonic()))
    assert handler({"job_id": job}, CountdownContext(60)) == "recovered"


@pytest.mark.parametrize("transport", ["lean", "boto"])
def test_the_lock_transport_is_built_before_the_budget_is_measured(
    transport: str, aws_env: str
) -> None:
    # Building a cold botocore client takes hundreds of milliseconds; if the first
    # request built it, that time would come out of a short acquisition budget.
    fresh = DynamoDBClient(region="us-east-1", endpoint_url=aws_env, transport=transport)
    lock_transport = fresh._lock_store.transport
    boto = getattr(lock_transport, "boto", lock_transport)
    assert boto._client is None  # nothing is built by constructing a client
    fresh._prepare_locks()  # what the middleware does first
    # The boto path holds a built client; the lean one has chosen its route (from
    # the environment without botocore here, or from a built botocore client).
    if transport == "lean":
        assert lock_transport._prepared
    else:
        assert boto._client is not None
