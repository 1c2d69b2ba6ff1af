"""Protocol rules driven with a manual clock and a tiny in-test store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dynalease._engine import protocol as p
from dynalease._engine.clock import ManualClock, Stamp
from dynalease._engine.lease import Lease, State
from dynalease._engine.observations import Observations
from dynalease._engine.store import ConditionFailed, LockStore
from dynalease.exceptions import LockLost, LockNotAcquired, MalformedLockRow


class DictTransport:
    """Just the five lock requests, on a dict; enough to exercise the lease rules."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.sent: list[str] = []

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(operation)
        if operation == "GetItem":
            key = params["Key"]["key"]["S"]
            row = self.rows.get(key)
            return {"Item": dict(row)} if row else {}
        key = params.get("Item", params.get("Key", {})).get("key", {}).get("S")
        row = self.rows.get(key)
        values = params.get("ExpressionAttributeValues", {})
        condition = params["ConditionExpression"]
        if condition == "attribute_not_exists(#k)":
            ok = row is None
        elif condition == "#o = :o":
            ok = row is not None and row["owner"] == values[":o"]
        else:
            ok = row is not None and row["owner"] == values[":o"] and row["version"] == values[":v"]
        if not ok:
            raise ConditionFailed(dict(row) if row else None)
        if operation == "PutItem":
            self.rows[key] = dict(params["Item"])
        elif operation == "UpdateItem":
            row["version"] = values[":new"]  # type: ignore[index]
        elif operation == "DeleteItem":
            del self.rows[key]
        return {}


def make(
    transport: DictTransport,
    clock: ManualClock,
    *,
    lease: float = 30,
    wait: float = 35,
    observations: Observations | None = None,
) -> Lease:
    return Lease(
        store=LockStore(transport),
        clock=clock,
        observations=observations if observations is not None else Observations(),
        table="locks",
        key="k",
        lease_s=lease,
        wait_s=wait,
    )


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_an_uncontended_acquire_and_release_make_two_writes() -> None:
    async def scenario() -> Lease:
        clock, transport = ManualClock(), DictTransport()
        lease = make(transport, clock)
        await lease.acquire()
        await lease.release()
        assert transport.rows == {}
        return lease

    counters = run(scenario()).counters()
    assert counters.write_requests == 2 and counters.read_requests == 0


def test_validity_ends_at_ninety_percent_without_a_confirmed_renewal() -> None:
    stamp = Stamp(100.0, 5000.0)
    clock = ManualClock(start=100.0, wall_start=5000.0)
    assert stamp.remaining(clock, p.validity_span(10)) == pytest.approx(9.0)
    clock._now = 108.99
    assert stamp.remaining(clock, p.validity_span(10)) > 0
    clock._now = 109.0
    assert stamp.remaining(clock, p.validity_span(10)) == 0


def test_a_wall_clock_jump_backwards_or_forwards_ends_validity_early() -> None:
    clock = ManualClock(start=0.0, wall_start=1000.0)
    stamp = Stamp.now(clock)
    clock.jump_wall(-1)
    assert stamp.remaining(clock, 9.0) == 0
    clock.jump_wall(1 + 9)
    assert stamp.remaining(clock, 9.0) == 0


def test_renewal_runs_every_third_of_the_lease_and_keeps_the_guard_valid() -> None:
    async def scenario() -> None:
        clock, transport = ManualClock(), DictTransport()
        lease = make(transport, clock, lease=3)
        await lease.acquire()
        await clock.advance(10)
        lease.raise_if_lost()
        assert lease.counters().renewals == 10
        await lease.release()
        assert lease.counters().write_requests == lease.counters().renewals + 2

    run(scenario())


def test_takeover_waits_for_the_stored_lease_observed_unchanged() -> None:
    async def scenario() -> None:
        clock, transport = ManualClock(), DictTransport()
        transport.rows["k"] = p.LockRow("k", "crashed", "v1", 2000).to_item()
        lease = make(transport, clock, lease=30, wait=10)
        task = asyncio.ensure_future(lease.acquire())
        await clock.advance(1.9)
        assert not task.done()
        await clock.advance(0.5)
        await task
        assert lease.state is State.HELD and lease.counters().wait_ms >= 2000
        assert transport.rows["k"]["owner"] == {"S": lease.owner}
        await lease.release()

    run(scenario())


def test_a_short_wait_gives_up_but_the_client_keeps_its_observation() -> None:
    async def scenario() -> None:
        clock, transport, seen = ManualClock(), DictTransport(), Observations()
        transport.rows["k"] = p.LockRow("k", "crashed", "v1", 2000).to_item()
        first = make(transport, clock, wait=1, observations=seen)
        task = asyncio.ensure_future(first.acquire())
        await clock.advance(1.5)
        with pytest.raises(LockNotAcquired):
            await task
        await clock.advance(1.0)
        second = make(transport, clock, wait=0, observations=seen)
        await second.acquire()
        assert second.state is State.HELD
        await second.release()

    run(scenario())


def test_a_renewal_rejected_after_takeover_marks_the_guard_lost() -> None:
    async def scenario() -> None:
        clock, transport = ManualClock(), DictTransport()
        lease = make(transport, clock, lease=3)
        await lease.acquire()
        transport.rows["k"] = p.LockRow("k", "successor", "v9", 3000).to_item()
        await clock.advance(1.1)
        with pytest.raises(LockLost):
            lease.raise_if_lost()
        assert lease.lost_signal.done()
        with pytest.raises(LockLost):
            await lease.release()
        assert transport.rows["k"]["owner"] == {"S": "successor"}

    run(scenario())


def test_a_malformed_row_is_never_taken_over() -> None:
    async def scenario() -> None:
        clock, transport = ManualClock(), DictTransport()
        transport.rows["k"] = {
            "key": {"S": "k"},
            "owner": {"S": "x"},
            "version": {"S": "v"},
            "lease_ms": {"N": "1000"},
            "protocol": {"N": "2"},
        }
        lease = make(transport, clock, wait=5)
        with pytest.raises(MalformedLockRow, match="protocol"):
            await clock.run(lease.acquire())
        assert transport.rows["k"]["owner"] == {"S": "x"}

    run(scenario())


class LosingTransport(DictTransport):
    """Commits chosen writes, then answers as if the connection dropped."""

    def __init__(self, lose: set[str]) -> None:
        super().__init__()
        self.lose = lose

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        from dynalease.exceptions import RequestFailedError

        answer = await super().send(operation, params)
        if operation in self.lose:
            self.lose.discard(operation)
            raise RequestFailedError("connection reset", operation=operation)
        return answer


@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem", "DeleteItem"])
def test_a_lost_response_is_reconciled_by_a_strong_read(operation: str) -> None:
    async def scenario() -> Lease:
        clock, transport = ManualClock(), LosingTransport({operation})
        lease = make(transport, clock, lease=3)
        await lease.acquire()
        await clock.advance(1.05)  # one renewal
        lease.raise_if_lost()
        await lease.release()
        assert transport.rows == {}
        assert "GetItem" in transport.sent
        return lease

    counters = run(scenario()).counters()
    assert counters.request_failures == 1 and not counters.lost


def test_a_failed_renewal_is_retried_and_the_lease_is_lost_at_ninety_percent() -> None:
    from dynalease.exceptions import ThrottledError

    class Throttling(DictTransport):
        async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
            if operation == "UpdateItem":
                self.sent.append(operation)
                raise ThrottledError("throttled", operation=operation)
            return await super().send(operation, params)

    async def scenario() -> None:
        clock, transport = ManualClock(), Throttling()
        lease = make(transport, clock, lease=12)
        await lease.acquire()
        await clock.advance(10.79)
        lease.raise_if_lost()
        # renewals start at 4 s and retry every min(12/12, 1 s) = 1 s
        assert transport.sent.count("UpdateItem") == 7
        await clock.advance(0.02)
        with pytest.raises(LockLost):
            lease.raise_if_lost()

    run(scenario())
