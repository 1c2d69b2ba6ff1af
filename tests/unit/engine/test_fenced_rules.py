"""Fenced leases on the manual clock: the token through lost answers, late commits, takeovers.

The in-memory table answers the fenced requests exactly (support/memory.py);
faults are scripted per request (support/lease_harness.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.lease_harness import Fault, Harness, lost_answer, run

from dynalease._engine import shapes
from dynalease._engine.states import State
from dynalease.exceptions import (
    FencingMismatch,
    LockNotAcquired,
    MalformedLockRow,
    RequestFailedError,
)


def free(fence: int, key: str = "k") -> dict[str, Any]:
    return {"key": {"S": key}, "protocol": {"N": "2"}, "fence": {"N": str(fence)}}


def test_an_uncontended_fenced_cycle_is_two_updates_and_leaves_a_free_row() -> None:
    async def scenario(h: Harness) -> None:
        for expected in (1, 2, 3):
            lease = h.lease(fencing=True)
            await lease.acquire()
            assert lease.fencing_token == expected
            assert h.row()["fence"] == {"N": str(expected)}  # type: ignore[index]
            await lease.release()
            assert h.row() == free(expected)
        assert h.transport.operations() == ["UpdateItem"] * 6  # no read, no delete
        acquire = h.transport.sent[0].params
        assert acquire["UpdateExpression"] == shapes.ACQUIRE_UPDATE
        assert acquire["ConditionExpression"] == shapes.ACQUIRE_CONDITION
        assert acquire["ReturnValues"] == "UPDATED_NEW"
        assert h.transport.sent[1].params["UpdateExpression"] == shapes.RELEASE_UPDATE

    run(scenario)


def test_a_lost_answer_is_reconciled_by_the_read_and_the_token_is_the_rows_counter() -> None:
    async def scenario(h: Harness) -> None:
        h.write_row(free(6))
        h.transport.faults.append(lost_answer("UpdateItem"))
        lease = h.lease(fencing=True)
        await h.clock.run(lease.acquire())
        assert lease.state is State.HELD and lease.fencing_token == 7
        assert h.transport.operations() == ["UpdateItem", "GetItem"]

    run(scenario)


def test_renewals_keep_the_token() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3, fencing=True)
        await lease.acquire()
        versions = {h.row()["version"]["S"]}  # type: ignore[index]
        for _ in range(4):
            await h.clock.advance(1.01)
            versions.add(h.row()["version"]["S"])  # type: ignore[index]
        assert lease.counters().renewals == 4 and len(versions) == 5
        assert lease.fencing_token == 1 and h.row()["fence"] == {"N": "1"}  # type: ignore[index]

    run(scenario)


def test_a_late_commit_after_the_wait_ran_out_is_released_and_the_next_token_is_higher() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("UpdateItem", before=1.0))  # lands at 1 s
        late = h.lease(lease=30, wait=0.5, fencing=True)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(late.acquire(), limit=0.9)
        assert h.row() is None and late.fencing_token is None
        await h.clock.advance(1.0)
        assert h.row() == free(1)  # it landed (counter 1), then was released
        nxt = h.lease(fencing=True)
        await nxt.acquire()
        assert nxt.fencing_token == 2

    run(scenario)


def test_an_abandoned_fenced_row_is_taken_over_after_its_lease_with_the_next_token() -> None:
    async def scenario(h: Harness) -> None:
        h.write_row(
            {
                "key": {"S": "k"},
                "owner": {"S": "crashed"},
                "version": {"S": "v-1"},
                "lease_ms": {"N": "2000"},
                "protocol": {"N": "2"},
                "fence": {"N": "9"},
            }
        )
        lease = h.lease(wait=10, fencing=True)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        assert h.clock.monotonic() - start >= 2.0
        assert lease.fencing_token == 10
        takeover = h.transport.sent[-1].params
        assert takeover["ConditionExpression"] == shapes.TAKEOVER_CONDITION
        assert takeover["ExpressionAttributeValues"][":o"] == {"S": "crashed"}

    run(scenario)


@pytest.mark.parametrize(
    ("row", "fencing", "match"),
    [
        (free(3), False, "Open this key with fencing=True"),
        (
            {
                "key": {"S": "k"},
                "owner": {"S": "o"},
                "version": {"S": "v"},
                "lease_ms": {"N": "100"},
                "protocol": {"N": "1"},
            },
            True,
            "unfenced \\(protocol-1\\) row",
        ),
    ],
)
def test_fenced_and_unfenced_leases_never_take_over_each_others_rows(
    row: dict[str, Any], fencing: bool, match: str
) -> None:
    async def scenario(h: Harness) -> None:
        h.write_row(row)
        lease = h.lease(wait=10, fencing=fencing)
        with pytest.raises(FencingMismatch, match=match) as raised:
            await h.clock.run(lease.acquire())
        assert raised.value.problem in str(raised.value)
        assert "Open this key" not in raised.value.problem  # the advice is the message's
        assert h.row() == row

    run(scenario)


def test_a_win_without_the_counter_in_the_answer_is_refused_and_cleaned_up() -> None:
    async def scenario(h: Harness) -> None:
        original = h.transport.inner.call

        def without_attributes(operation: str, params: dict[str, Any]) -> dict[str, Any]:
            answer = original(operation, params)
            answer.pop("Attributes", None)  # a server that ignores ReturnValues
            return answer

        h.transport.inner.call = without_attributes  # type: ignore[method-assign]
        lease = h.lease(fencing=True)
        with pytest.raises(MalformedLockRow, match="fence is missing") as raised:
            await h.clock.run(lease.acquire())
        assert raised.value.problem == "fence is missing, expected a positive integer"
        await h.clock.advance(0.1)
        assert h.row() == free(1)  # released, never left held

    run(scenario)


def test_a_release_whose_answer_is_lost_is_reconciled_on_the_free_row() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(fencing=True)
        await lease.acquire()
        h.transport.faults.append(
            Fault("UpdateItem", error=RequestFailedError("reset", operation="UpdateItem"))
        )
        await h.clock.run(lease.release())
        assert lease.state is State.RELEASED and h.row() == free(1)
        assert h.transport.operations()[-1] == "GetItem"

    run(scenario)
