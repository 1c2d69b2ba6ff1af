"""A request whose waiter was cancelled still has its failure looked at.

Release cancels the renewal loop, possibly with a renewal in flight. The engine
never cancels the request itself (a write may still commit), so when that
renewal later fails nobody awaits it; asyncio then logs "Task exception was
never retrieved" at ERROR level, an alarm about nothing.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from support.manual_clock import ManualClock
from support.memory import MemoryTransport as _MemoryTransport
from support.memory import ScriptedTransport, memory_lock_table

from dynalease._engine.lease import Lease, LeaseSpec
from dynalease._engine.observations import Observations
from dynalease._engine.states import State
from dynalease._engine.store import LockStore


class GatedRenewals(ScriptedTransport):
    """The in-memory table; renewals wait at a gate the test opens."""

    def __init__(self) -> None:
        self.inner = _MemoryTransport(memory_lock_table("locks"), lock_requests=True)
        self.gate: asyncio.Future[None] | None = None

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.inner.call(operation, params)

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation == "UpdateItem":
            self.gate = asyncio.get_running_loop().create_future()
            await self.gate
        return self.inner.call(operation, params)


def test_a_renewal_failing_after_release_cancelled_it_is_not_reported_as_unretrieved() -> None:
    reports: list[dict[str, Any]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: reports.append(context))
        clock, transport = ManualClock(), GatedRenewals()
        lease = Lease(
            store=LockStore(transport),
            clock=clock,
            observations=Observations(),
            key="k",
            spec=LeaseSpec("locks", 3.0, 1.0),
        )
        await lease.acquire()
        await clock.advance(1.01)  # the first renewal is sent and waits at the gate
        assert transport.gate is not None and not transport.gate.done()
        await lease.release()
        assert lease.state is State.RELEASED
        transport.gate.set_result(None)  # the renewal now fails: the row is gone
        await clock.settle()

    asyncio.run(scenario())
    gc.collect()
    assert [context.get("message") for context in reports] == []
