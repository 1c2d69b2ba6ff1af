"""One-time transport setup is awaited before a lock request's timeout starts.

A cold client builds its botocore client and resolves credentials before its
first request can leave. When that setup ran inside the first request, it was
charged to that request's timeout (at most a third of the lease), so a short
budget on a loaded machine failed a cold client's first acquire. The setup
still counts toward the caller's wait, but no single request pays for it.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.lease_harness import Fault, FaultyTransport, Harness, run

from dynalease import SyncDistributedLock
from dynalease._engine.states import State
from dynalease._engine.store import LockStore
from dynalease.exceptions import LockNotAcquired
from dynalease.testing import MemoryBackend

SETUP_S = 1.5


class SlowSetupTransport(FaultyTransport):
    """Sets up lazily on its first request, as the real transports do, unless prepared."""

    prepared = False
    setups = 0

    async def prepare(self) -> None:
        if not self.prepared:
            self.setups += 1
            await self.clock.sleep(SETUP_S)
            self.prepared = True

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.prepare()
        return await super().send(operation, params)


def _slow_harness(h: Harness) -> SlowSetupTransport:
    transport = SlowSetupTransport(h.clock, h.db)
    h.transport = transport
    return transport


def test_a_slow_setup_does_not_use_up_the_first_requests_timeout() -> None:
    async def scenario(h: Harness) -> None:
        transport = _slow_harness(h)
        # lease 3 s: each request may take 1 s; setup 1.5 s plus a 0.5 s answer
        # would time the create out if the setup were charged to it.
        transport.faults.append(Fault("PutItem", after=0.5))
        lease = h.lease(lease=3, wait=10)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        assert lease.state is State.HELD
        assert transport.operations() == ["PutItem"]  # won at once: no reconciling read
        assert transport.times("PutItem") == [start + SETUP_S]
        assert lease.counters().wait_ms == pytest.approx((SETUP_S + 0.5) * 1000)
        await h.clock.run(lease.release())

    run(scenario)


def test_setup_counts_toward_the_wait_and_a_budget_it_uses_up_sends_nothing() -> None:
    async def scenario(h: Harness) -> None:
        transport = _slow_harness(h)
        lease = h.lease(lease=3, wait=1)
        with pytest.raises(LockNotAcquired, match="ran out"):
            await h.clock.run(lease.acquire())
        assert transport.operations() == []
        assert lease.counters().wait_ms == pytest.approx(SETUP_S * 1000)
        assert h.row() is None

    run(scenario)


def test_setup_runs_once_for_every_lease_of_a_store() -> None:
    async def scenario(h: Harness) -> None:
        transport = _slow_harness(h)
        store = LockStore(transport)
        await h.clock.run(store.prepare())
        first = h.lease(key="a", lease=3, wait=1)
        await h.clock.run(first.acquire())
        second = h.lease(key="b", lease=3, wait=1)
        await h.clock.run(second.acquire())
        assert transport.setups == 1
        await h.clock.run(first.release())
        await h.clock.run(second.release())

    run(scenario)


def test_the_memory_backend_needs_no_setup_and_still_locks() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        client._prepare_locks()
        with SyncDistributedLock(client, table="locks", key="job", wait_timeout=0) as lease:
            assert lease.key == "job"
