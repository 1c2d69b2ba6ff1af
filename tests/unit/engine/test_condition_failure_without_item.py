"""A failed condition that comes back without the current row.

DynamoDB returns the row on a failed condition when asked with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``; older API versions and other
implementations (dynalite 4.0.0, see docs/emulators.md) answer with the error
alone. The engine must then read the row instead of guessing it is gone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.manual_clock import ManualClock
from support.memory import MemoryTransport as _MemoryTransport
from support.memory import ScriptedTransport, memory_lock_table

from dynalease._engine import protocol as p
from dynalease._engine.lease import Lease, LeaseSpec
from dynalease._engine.observations import Observations
from dynalease._engine.states import State
from dynalease._engine.store import ConditionFailed, LockStore
from dynalease.exceptions import LockLost, LockNotAcquired

TABLE = "locks"
#: Far more writes than any correct run needs; past this the engine is spinning.
WRITE_LIMIT = 40


class SilentConflicts(ScriptedTransport):
    """The in-memory table, answering failed conditions without the current row."""

    def __init__(self) -> None:
        self.db = memory_lock_table(TABLE)
        self.inner = _MemoryTransport(self.db, lock_requests=True)
        self.sent: list[str] = []

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.inner.call(operation, params)

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(operation)
        if self.sent.count("PutItem") > WRITE_LIMIT:
            raise AssertionError(f"the engine sent more than {WRITE_LIMIT} PutItem requests")
        try:
            return self.inner.call(operation, params)
        except ConditionFailed:
            raise ConditionFailed(None) from None

    def put(self, owner: str, version: str, lease_ms: int) -> None:
        row = p.LockRow("k", owner, version, lease_ms).to_item()
        self.db.call("PutItem", {"TableName": TABLE, "Item": row})

    def owner(self) -> str | None:
        item = self.db.call("GetItem", {"TableName": TABLE, "Key": {"key": {"S": "k"}}})
        return item["Item"]["owner"]["S"] if "Item" in item else None


def lease(transport: SilentConflicts, clock: ManualClock, *, wait: float) -> Lease:
    return Lease(
        store=LockStore(transport),
        clock=clock,
        observations=Observations(),
        key="k",
        spec=LeaseSpec(TABLE, 2.0, wait),
    )


def test_a_contender_reads_the_row_instead_of_retrying_the_create_in_a_loop() -> None:
    async def scenario() -> SilentConflicts:
        clock, transport = ManualClock(), SilentConflicts()
        transport.put("holder", "v1", 30_000)
        contender = lease(transport, clock, wait=1.0)
        with pytest.raises(LockNotAcquired, match="held by another owner"):
            await clock.run(contender.acquire())
        return transport

    transport = asyncio.run(scenario())
    assert transport.sent.count("PutItem") == 1
    assert transport.sent.count("GetItem") >= 2


def test_an_abandoned_row_is_still_taken_over_after_observation() -> None:
    async def scenario() -> None:
        clock, transport = ManualClock(), SilentConflicts()
        transport.put("crashed", "v1", 1_000)
        contender = lease(transport, clock, wait=5.0)
        await clock.run(contender.acquire())
        assert contender.state is State.HELD and transport.owner() == contender.owner
        await contender.release()
        assert transport.owner() is None

    asyncio.run(scenario())


def test_a_release_after_takeover_names_the_successor_not_a_deletion() -> None:
    async def scenario() -> None:
        clock, transport = ManualClock(), SilentConflicts()
        holder = lease(transport, clock, wait=1.0)
        await holder.acquire()
        transport.put("successor", "v9", 2_000)
        with pytest.raises(LockLost, match="another owner took"):
            await holder.release()
        assert transport.owner() == "successor"

    asyncio.run(scenario())
