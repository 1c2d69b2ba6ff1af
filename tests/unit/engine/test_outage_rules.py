"""An outage is not contention: LockUnavailable, wait_timeouts, and keys in log lines.

With DynamoDB unreachable a lock used to raise ``LockNotAcquired ... the
wait_timeout ran out``, the error of a busy key. Now the budget's end raises
:class:`LockUnavailable` (a ``LockNotAcquired``) when no request of the attempt
got a definite answer (a reply, a failed condition, a read), and plain
``LockNotAcquired`` whenever an answer showed the row. Engine log lines name the
key's hash unless ``DYNALEASE_LOG_KEYS=key``; reusing a guard is a
``GuardReused``. All on the manual clock with the harness's scripted faults.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from support.lease_harness import Fault, Harness, hang, run

from dynalease._engine.attempts import UNREACHABLE_REQUESTS, UNREACHABLE_S
from dynalease._redact import key_hash, logged_key
from dynalease.constants import ENV_LOG_KEYS
from dynalease.exceptions import (
    DynaleaseError,
    GuardReused,
    LockNotAcquired,
    LockUnavailable,
    RequestFailedError,
    TableNotFoundError,
    ThrottledError,
)

FaultFor = Callable[[str], Fault]


def _refused(operation: str, *, code: str = "ConnectionError") -> Fault:
    error = RequestFailedError(
        'could not connect to the endpoint URL "http://127.0.0.1:9": connection refused',
        code=code,
        operation=operation,
        may_have_committed=False,
    )
    return Fault(operation, commit=False, error=error)


def _timeout(operation: str) -> Fault:
    return hang(operation, commit=False)


def _server_error(operation: str) -> Fault:
    error = RequestFailedError("500 InternalServerError", code="InternalServerError")
    return Fault(operation, commit=False, error=error)


def _throttled(operation: str) -> Fault:
    error = ThrottledError("ProvisionedThroughputExceededException", operation=operation)
    return Fault(operation, commit=False, error=error)


OUTAGES = [_refused, _timeout, _server_error, _throttled]
OUTAGE_IDS = ["connection-refused", "timeout", "5xx", "throttled"]


def _down(h: Harness, fault: FaultFor) -> None:
    for operation in ("PutItem", "GetItem"):
        h.transport.always[operation] = fault(operation)


# --- LockUnavailable ---------------------------------------------------------------------


@pytest.mark.parametrize("wait", [0.0, 2.0], ids=["wait0", "wait2"])
@pytest.mark.parametrize("fault", OUTAGES, ids=OUTAGE_IDS)
def test_every_request_failing_is_lock_unavailable_within_the_budget(
    fault: FaultFor, wait: float
) -> None:
    async def scenario(h: Harness) -> None:
        _down(h, fault)
        lease = h.lease(lease=10, wait=wait)
        start = h.clock.monotonic()
        with pytest.raises(LockUnavailable) as caught:
            await h.clock.run(lease.acquire())
        budget = wait if wait else 5.0  # a single attempt's network budget: min(0.6 L, 5 s)
        assert h.clock.monotonic() - start <= budget + 1e-6
        message = str(caught.value)
        assert "ran out" in message and "not contention" in message
        assert "check the endpoint" in message
        if fault is _timeout:
            assert "no answer within the request timeout" in message
        else:
            assert f"last failure: {fault('PutItem').error}" in message
        assert (caught.value.table, caught.value.key) == ("locks", "k")
        assert lease.counters().wait_timeouts == 1
        assert h.row() is None

    run(scenario)


def test_a_failed_blocking_create_and_failing_retries_are_lock_unavailable() -> None:
    async def scenario(h: Harness) -> None:
        _down(h, _refused)
        lease = h.lease(lease=10, wait=1)
        first = lease.caller.acquire_blocking()  # the sync caller's own create, refused
        assert first is not None
        with pytest.raises(LockUnavailable, match="connection refused"):
            await h.clock.run(lease.acquire(first))

    run(scenario, blocking=True)


# --- a wrong endpoint stops early; a real outage waits out the budget ---------------------
#
# When every request is refused before it is sent (botocore's EndpointConnectionError: a
# closed port, a host name that does not resolve), the acquisition raises LockUnavailable
# once UNREACHABLE_S and UNREACHABLE_REQUESTS have passed, not after its 35 s wait.
# Timeouts, 5xx answers and throttling, or refusals after another failure, keep the wait.

WAIT_S = 35.0


def _unreachable(operation: str) -> Fault:
    """A refusal as botocore reports it: nothing was sent."""
    return _refused(operation, code="EndpointConnectionError")


def test_an_endpoint_that_refuses_everything_is_reported_after_a_second() -> None:
    async def scenario(h: Harness) -> None:
        _down(h, _unreachable)
        lease = h.lease(lease=30, wait=WAIT_S)
        start = h.clock.monotonic()
        with pytest.raises(LockUnavailable) as caught:
            await h.clock.run(lease.acquire())
        elapsed = h.clock.monotonic() - start
        assert UNREACHABLE_S <= elapsed < 2 * UNREACHABLE_S
        message = str(caught.value)
        assert "127.0.0.1:9" in message and "could connect" in message
        assert f"wait_timeout of {WAIT_S:g} s" in message and "dynalease doctor" in message
        assert lease.counters().request_failures >= UNREACHABLE_REQUESTS
        assert lease.counters().wait_timeouts == 1
        assert h.row() is None

    run(scenario)


@pytest.mark.parametrize(
    ("fault", "first"),
    [(_timeout, None), (_server_error, None), (_throttled, None), (_unreachable, _server_error)],
    ids=["timeout", "5xx", "throttled", "refusals-after-a-5xx"],
)
def test_an_outage_that_is_not_only_refusals_waits_out_the_whole_budget(
    fault: FaultFor, first: FaultFor | None
) -> None:
    async def scenario(h: Harness) -> None:
        if first is not None:
            h.transport.faults.append(first("PutItem"))
        _down(h, fault)
        lease = h.lease(lease=30, wait=WAIT_S)
        start = h.clock.monotonic()
        with pytest.raises(LockUnavailable, match="ran out"):
            await h.clock.run(lease.acquire())
        assert h.clock.monotonic() - start > WAIT_S - 5  # the wait, not a second

    run(scenario)


# --- plain LockNotAcquired: an answer showed the lock ------------------------------------


def test_a_row_held_by_another_owner_is_plain_not_acquired() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        lease = h.lease(wait=2)
        with pytest.raises(LockNotAcquired, match="held by another owner") as caught:
            await h.clock.run(lease.acquire())
        assert type(caught.value) is LockNotAcquired
        assert lease.counters().wait_timeouts == 1

    run(scenario)


def test_a_zero_wait_attempt_on_a_held_row_is_plain_not_acquired_and_counts_a_wait_timeout() -> (
    None
):
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        lease = h.lease(wait=0)
        with pytest.raises(LockNotAcquired, match="wait_timeout=0") as caught:
            await lease.acquire()
        assert type(caught.value) is LockNotAcquired
        assert lease.counters().wait_timeouts == 1  # pydynox 1.8 counts it too

    run(scenario)


@pytest.mark.parametrize("fault", OUTAGES, ids=OUTAGE_IDS)
def test_a_held_row_then_failing_polls_is_plain_not_acquired_naming_the_last_failure(
    fault: FaultFor,
) -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        h.transport.always["GetItem"] = fault("GetItem")  # the create's answer showed the row
        lease = h.lease(lease=10, wait=2)
        with pytest.raises(LockNotAcquired, match="ran out") as caught:
            await h.clock.run(lease.acquire())
        assert type(caught.value) is LockNotAcquired
        assert "held by another owner and the wait_timeout of 2 s ran out" in str(caught.value)
        if fault is not _timeout:
            assert f"last failure: {fault('GetItem').error}" in str(caught.value)
        assert lease.counters().wait_timeouts == 1

    run(scenario)


def test_failing_creates_whose_reads_answer_no_row_are_plain_not_acquired() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = _server_error("PutItem")  # reads still answer
        lease = h.lease(lease=10, wait=2)
        with pytest.raises(LockNotAcquired, match="ran out") as caught:
            await h.clock.run(lease.acquire())
        assert type(caught.value) is LockNotAcquired
        assert "500 InternalServerError" in str(caught.value)

    run(scenario)


def test_a_definite_error_is_still_raised_as_itself_and_counts_no_wait_timeout() -> None:
    async def scenario(h: Harness) -> None:
        error = TableNotFoundError("no table", code="ResourceNotFoundException")
        h.transport.always["PutItem"] = Fault("PutItem", commit=False, error=error)
        lease = h.lease(wait=5)
        with pytest.raises(TableNotFoundError):
            await h.clock.run(lease.acquire())
        assert lease.counters().wait_timeouts == 0

    run(scenario)


def test_a_budget_spent_before_any_request_is_not_called_an_outage() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(wait=0)
        with pytest.raises(LockNotAcquired) as caught:
            await lease.acquire(attempt_cap=0.0)  # no time for a request at all
        assert type(caught.value) is LockNotAcquired
        assert h.transport.operations() == []

    run(scenario)


# --- keys in the engine's log lines ------------------------------------------------------


def _lose_to_a_thief(h: Harness, key: str) -> Callable[[], object]:
    async def steps() -> object:
        lease = h.lease(key=key, lease=3)
        await lease.acquire()
        h.write_lock("thief", "v9", 3_000, key=key)
        await h.clock.advance(1.1)  # the renewal at 1 s is rejected: lost
        assert lease.loss is not None
        return lease

    return steps


@pytest.mark.parametrize("setting", [None, "hash", "plain"])
def test_a_lost_lock_is_logged_with_the_keys_hash_by_default(
    setting: str | None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if setting is None:
        monkeypatch.delenv(ENV_LOG_KEYS, raising=False)
    else:
        monkeypatch.setenv(ENV_LOG_KEYS, setting)  # anything but "key" keeps the hash
    key = "customer:secret-42"

    async def scenario(h: Harness) -> None:
        await _lose_to_a_thief(h, key)()

    with caplog.at_level(logging.DEBUG, logger="dynalease"):
        run(scenario)
    [line] = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert f"key_hash={key_hash(key)}" in line
    assert "secret-42" not in line


def test_with_dynalease_log_keys_key_the_lost_line_names_the_key(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_LOG_KEYS, "key")
    key = "customer:secret-42"

    async def scenario(h: Harness) -> None:
        await _lose_to_a_thief(h, key)()

    with caplog.at_level(logging.WARNING, logger="dynalease"):
        run(scenario)
    [line] = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert repr(key) in line and "key_hash" not in line


def test_a_failed_renewal_and_a_background_release_log_the_hash_not_the_key(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_LOG_KEYS, raising=False)
    key = "customer:secret-42"

    async def scenario(h: Harness) -> None:
        h.transport.faults.append(_throttled("UpdateItem"))
        lease = h.lease(key=key, lease=3)
        await lease.acquire()
        await h.clock.advance(1.1)  # the renewal at 1 s is throttled: logged at DEBUG
        h.write_lock("thief", "v9", 3_000, key=key)
        await h.clock.advance(1.2)  # the retry is rejected: lost
        lease.abandon()  # its release raises LockLost (naming the key) in the background
        await h.clock.advance(0.1)
        for _ in range(5):
            await asyncio.sleep(0)

    with caplog.at_level(logging.DEBUG, logger="dynalease"):
        run(scenario)
    lines = [r.getMessage() for r in caplog.records if r.name == "dynalease"]
    assert any("renewal of" in line for line in lines)
    assert any("background release of" in line for line in lines)
    assert all("secret-42" not in line for line in lines), lines
    assert all(f"key_hash={key_hash(key)}" in line for line in lines), lines


def test_a_late_row_that_cannot_be_cleaned_up_is_logged_with_the_hash(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_LOG_KEYS, raising=False)
    key = "customer:secret-42"

    async def scenario(h: Harness) -> None:
        # The create lands after the guard gave up; every delete of it fails for good.
        h.transport.faults.append(Fault("PutItem", before=2.0))
        denied = TableNotFoundError(f"lock {key!r}: table gone", code="ResourceNotFoundException")
        h.transport.always["DeleteItem"] = Fault("DeleteItem", commit=False, error=denied)
        h.transport.always["GetItem"] = hang("GetItem", commit=False)
        lease = h.lease(key=key, lease=3, wait=0.5)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire())
        await h.clock.advance(5.0)  # landed at 2 s; the cleanup budget is 1.8 s

    with caplog.at_level(logging.WARNING, logger="dynalease"):
        run(scenario)
    lines = [r.getMessage() for r in caplog.records if "clean up" in r.getMessage()]
    assert lines
    assert all(f"key_hash={key_hash(key)}" in line and "secret-42" not in line for line in lines)


def test_logged_key_is_the_hash_the_middleware_logs() -> None:
    from dynalease._lambda.report import key_hash as reported

    assert reported is key_hash
    assert logged_key("customer:123") == "key_hash=02ec19c58d54ce98"


# --- reusing a guard ---------------------------------------------------------------------


def test_reusing_a_lease_raises_guard_reused_a_dynalease_and_runtime_error() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        await lease.acquire()
        with pytest.raises(GuardReused, match="single use") as caught:
            await lease.acquire()
        assert isinstance(caught.value, DynaleaseError)
        assert isinstance(caught.value, RuntimeError)
        await lease.release()

    run(scenario)
