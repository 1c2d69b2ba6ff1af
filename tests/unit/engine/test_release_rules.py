"""Release under docs/protocol.md: the cleanup budget, reconciliation, losses found late.

Each test runs one lease on the test's own event loop (see ``lease_harness``):
time moves only when the test says so, and every request is recorded with the
clock time it was sent, so timing rules are checked exactly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import pytest
from support.lease_harness import FOREVER, TABLE, Fault, Harness, hang, recording_client, run

from dynalease._engine.states import State
from dynalease.exceptions import LockLost, LockReleaseError, RequestFailedError, ThrottledError
from dynalease.lock import SyncDistributedLock

# --- release and its budget ----------------------------------------------------------------


@pytest.mark.parametrize(("lease", "budget"), [(5.0, 3.0), (30.0, 10.0)])
def test_release_gives_up_after_sixty_percent_of_the_lease_capped_at_ten_seconds(
    lease: float, budget: float
) -> None:
    async def scenario(h: Harness) -> None:
        acquiring = h.lease(lease=lease)
        await acquiring.acquire()
        h.transport.always["DeleteItem"] = hang("DeleteItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        start = h.clock.monotonic()
        with pytest.raises(LockReleaseError, match="cleanup budget"):
            await h.clock.run(acquiring.release())
        assert h.clock.monotonic() - start == pytest.approx(budget)
        assert acquiring.counters().cleanup_failures == 1
        assert h.owner_of() == acquiring.owner  # left for observation to recover

    run(scenario)


def test_the_cleanup_budget_covers_the_reconciliation_of_a_lost_delete() -> None:
    async def scenario(h: Harness) -> None:
        acquiring = h.lease(lease=5)
        await acquiring.acquire()
        h.transport.faults.append(
            Fault("DeleteItem", commit=False, after=1.0, error=RequestFailedError("reset"))
        )
        h.transport.always["GetItem"] = hang("GetItem")
        start = h.clock.monotonic()
        with pytest.raises(LockReleaseError):
            await h.clock.run(acquiring.release())
        assert h.transport.times("GetItem")[0] - start == pytest.approx(1.0)
        assert h.clock.monotonic() - start == pytest.approx(3.0)

    run(scenario)


def test_a_renewal_in_flight_at_release_cannot_recreate_the_row() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3)
        await lease.acquire()
        h.transport.faults.append(Fault("UpdateItem", before=0.5, after=FOREVER))
        await h.clock.advance(1.1)  # renewal sent at 1 s, reaches the table at 1.5 s
        start = h.clock.monotonic()
        await lease.release()
        assert h.clock.monotonic() == start and h.row() is None
        await h.clock.advance(1.0)
        assert h.row() is None and lease.state is State.RELEASED

    run(scenario)


def test_a_row_deleted_by_someone_else_makes_release_report_the_loss() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        await lease.acquire()
        h.delete_row()
        with pytest.raises(LockLost, match="deleted by someone else"):
            await lease.release()

    run(scenario)


# --- single use, defaults and limits -------------------------------------------------------


def test_an_interrupt_during_a_sync_release_does_not_stop_the_release(
    request: pytest.FixtureRequest,
) -> None:
    # Ctrl-C raises KeyboardInterrupt here even when the suite was started in the
    # background of a non-interactive shell, which passes SIGINT on ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    client, transport = recording_client()
    delete_started, gate = threading.Event(), threading.Event()
    send = transport.send

    async def slow_delete(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation == "DeleteItem" and not delete_started.is_set():
            # The first delete is throttled once the interrupt has arrived: only a
            # release that keeps going retries it.
            delete_started.set()
            await asyncio.get_running_loop().run_in_executor(None, gate.wait, 5)
            raise ThrottledError("slow down", operation=operation)
        return await send(operation, params)

    transport.send = slow_delete  # type: ignore[method-assign]

    def interrupt_once_the_delete_is_in_flight() -> None:
        if delete_started.wait(5):
            os.kill(os.getpid(), signal.SIGINT)

    # The gate holds the first delete until the interrupt has landed (this transport
    # bounds requests by its manual clock, which nothing here advances). The cleanup
    # budget runs on the system clock meanwhile: a 30 s lease's 10 s leave the retry
    # after it time on a loaded machine, where the 3.6 s of a 6 s lease once ran out
    # between the delete's start and the interrupt's arrival.
    guard = SyncDistributedLock(client, table=TABLE, key="interrupted", lease_duration=30)
    with pytest.raises(KeyboardInterrupt):
        with guard:
            threading.Thread(target=interrupt_once_the_delete_is_in_flight).start()
    gate.set()
    deadline = time.monotonic() + 30
    while guard._lease.state is not State.RELEASED and time.monotonic() < deadline:
        time.sleep(0.02)
    assert guard._lease.state is State.RELEASED
    assert transport.inner.db.tables()[TABLE] == []
