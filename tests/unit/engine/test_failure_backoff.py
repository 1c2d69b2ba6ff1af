"""Acquisition and release against a failing server back off instead of spinning.

Found by the fault matrix (tests/integration/faults): against a server answering
every write with a 5xx, a zero-wait acquire sent dozens of creates (each with
its reconciling read) in its 0.6 s budget and a release about a hundred deletes
in its cleanup budget, because a write reconciled as "not applied" was retried
at once. Takeovers did the same on 5xx and throttling.
"""

from __future__ import annotations

import gc
import itertools
import logging

import pytest
from support.lease_harness import Fault, Harness, run

from dynalease._engine import protocol
from dynalease.exceptions import (
    LockNotAcquired,
    LockReleaseError,
    RequestFailedError,
    ThrottledError,
)


def _server_error(operation: str) -> Fault:
    return Fault(
        operation,
        commit=False,
        error=RequestFailedError("500 InternalServerError", operation=operation),
    )


def _throttled(operation: str) -> Fault:
    return Fault(operation, commit=False, error=ThrottledError("throttled", operation=operation))


@pytest.mark.parametrize("wait", [0.0, 2.0])
def test_ambiguous_creates_that_did_not_land_are_retried_with_growing_pauses(wait: float) -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = _server_error("PutItem")
        lease = h.lease(lease=10, wait=wait)
        with pytest.raises(LockNotAcquired, match="ran out") as caught:
            await h.clock.run(lease.acquire())
        assert isinstance(caught.value.__cause__, RequestFailedError)
        creates = h.transport.times("PutItem")
        gaps = [later - earlier for earlier, later in itertools.pairwise(creates)]
        assert len(creates) >= 2 and all(gap > 0 for gap in gaps)
        assert len(creates) < 20  # bounded: backoff, not one create per round trip
        assert h.row() is None

    run(scenario)


@pytest.mark.parametrize("fault", [_server_error, _throttled], ids=["5xx", "throttled"])
def test_failing_takeovers_back_off_and_never_take_the_row(fault: object) -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v0", 1_000)
        h.transport.always["PutItem"] = fault("PutItem")  # type: ignore[operator]
        lease = h.lease(lease=10, wait=3)
        with pytest.raises(LockNotAcquired, match="wait_timeout ran out") as caught:
            await h.clock.run(lease.acquire())
        assert caught.value.__cause__ is not None
        takeovers = h.transport.times("PutItem")[1:]  # the first is the create
        gaps = [later - earlier for earlier, later in itertools.pairwise(takeovers)]
        assert len(takeovers) >= 2 and all(gap > 0 for gap in gaps)
        assert h.owner_of() == "crashed"

    run(scenario)


def test_a_lost_create_answer_is_still_confirmed_by_its_strong_read() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("PutItem", error=RequestFailedError("reset", operation="PutItem"))
        )
        lease = h.lease(lease=10, wait=0)
        await h.clock.run(lease.acquire())
        assert h.owner_of() == lease.owner
        assert h.transport.operations() == ["PutItem", "GetItem"]

    run(scenario)


def test_a_failing_release_pauses_between_deletes_and_names_the_failure() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["DeleteItem"] = _server_error("DeleteItem")
        lease = h.lease(lease=10, wait=0)
        await h.clock.run(lease.acquire())
        with pytest.raises(LockReleaseError, match="500 InternalServerError"):
            await h.clock.run(lease.release())
        deletes = h.transport.times("DeleteItem")
        retry = protocol.renew_retry_interval(10)
        assert len(deletes) >= 2
        assert all(later - earlier >= retry for earlier, later in itertools.pairwise(deletes))
        assert h.owner_of() == lease.owner  # left for observation to recover

    run(scenario)


def test_a_request_that_fails_after_its_timeout_leaves_no_unretrieved_task_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(h: Harness) -> None:
        late_failure = RequestFailedError("reset after the timeout", operation="UpdateItem")
        h.transport.faults.append(Fault("UpdateItem", commit=False, after=5.0, error=late_failure))
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(7.0)  # renewal at 1 s times out at 2 s, fails at 6 s
        lease.raise_if_lost()
        await lease.release()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run(scenario)
        gc.collect()  # asyncio reports unretrieved task errors when the task is collected
    assert not [record for record in caplog.records if "never retrieved" in record.getMessage()]
