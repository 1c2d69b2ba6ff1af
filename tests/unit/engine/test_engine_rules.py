"""Every rule of DESIGN.md section 3, driven on a manual clock against the in-memory table.

Each test runs one lease on the test's own event loop (see ``lease_harness``):
time moves only when the test says so, and every request is recorded with the
clock time it was sent, so timing rules are checked exactly.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import threading
import time
from typing import Any

import pytest
from lease_harness import (
    FOREVER,
    TABLE,
    Fault,
    Harness,
    hang,
    items_of,
    lost_answer,
    recording_client,
    run,
)

from dynalease._engine import protocol as p
from dynalease._engine.observations import Observations
from dynalease._engine.states import State
from dynalease.exceptions import (
    AccessDeniedError,
    LockLost,
    LockNotAcquired,
    LockReleaseError,
    MalformedLockRow,
    RequestFailedError,
    TableNotFoundError,
    ThrottledError,
    ValidationError,
)
from dynalease.lock import SyncDistributedLock
from dynalease.transaction import SyncTransaction


def spoken(params: dict[str, Any], field: str) -> str:
    """An expression with its #names and :values substituted, e.g. ``owner = 'x'``."""
    text = str(params[field])
    for name, attribute in params.get("ExpressionAttributeNames", {}).items():
        text = text.replace(name, attribute)
    for name, value in sorted(params.get("ExpressionAttributeValues", {}).items(), reverse=True):
        text = re.sub(re.escape(name) + r"\b", repr(next(iter(value.values()))), text)
    return text


# --- rows and requests ------------------------------------------------------------


def test_every_request_is_the_protocol_request_on_the_lock_table() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("other", "v1", 1000)
        lease = h.lease(lease=3, wait=5)
        await h.clock.run(lease.acquire())  # create fails, observe, take over after 1 s
        await h.clock.advance(1.05)  # one renewal
        renewed_version = h.row()["version"]["S"]  # type: ignore[index]
        await lease.release()
        me = lease.owner
        sent = h.transport.sent
        assert [r.params["TableName"] for r in sent] == [TABLE] * len(sent)
        assert all(r.params["ReturnConsumedCapacity"] == "TOTAL" for r in sent)

        create, *_, takeover = [r for r in sent if r.operation == "PutItem"]
        assert spoken(create.params, "ConditionExpression") == "attribute_not_exists(key)"
        assert (
            spoken(takeover.params, "ConditionExpression") == "owner = 'other' AND version = 'v1'"
        )
        for put in (create, takeover):
            item = put.params["Item"]
            assert set(item) == {"key", "owner", "version", "lease_ms", "protocol"}
            assert item["key"] == {"S": "k"} and item["owner"] == {"S": me}
            assert item["lease_ms"] == {"N": "3000"} and item["protocol"] == {"N": "1"}
        assert create.params["Item"]["version"] != takeover.params["Item"]["version"]

        reads = [r for r in sent if r.operation == "GetItem"]
        assert reads and all(r.params["ConsistentRead"] is True for r in reads)
        assert all(r.params["Key"] == {"key": {"S": "k"}} for r in reads)

        (renew,) = [r for r in sent if r.operation == "UpdateItem"]
        taken_version = takeover.params["Item"]["version"]["S"]
        assert spoken(renew.params, "UpdateExpression") == f"SET version = {renewed_version!r}"
        assert spoken(renew.params, "ConditionExpression") == (
            f"owner = {me!r} AND version = {taken_version!r}"
        )
        (delete,) = [r for r in sent if r.operation == "DeleteItem"]
        assert delete.params["Key"] == {"key": {"S": "k"}}
        assert spoken(delete.params, "ConditionExpression") == f"owner = {me!r}"

    run(scenario)


def test_check_in_condition_is_the_owner_on_the_lock_row() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        await lease.acquire()
        check = lease.condition_item()["ConditionCheck"]
        assert check["TableName"] == TABLE and check["Key"] == {"key": {"S": "k"}}
        assert spoken(check, "ConditionExpression") == f"owner = {lease.owner!r}"
        await lease.release()
        with pytest.raises(LockLost):
            lease.condition_item()

    run(scenario)


def test_a_check_in_transaction_holds_the_ownership_condition_and_asks_for_capacity() -> None:
    client, locks = recording_client()
    client.sync_create_table("results", partition_key=("id", "S"))
    with SyncDistributedLock(client, table=TABLE, key="job") as lease:
        with SyncTransaction(client) as transaction:
            lease.check_in(transaction)
            transaction.put("results", {"id": "1"})
    (commit,) = [r for r in items_of(client).sent if r.operation == "TransactWriteItems"]
    assert commit.params["ReturnConsumedCapacity"] == "TOTAL"
    check, put = commit.params["TransactItems"]
    assert check["ConditionCheck"]["Key"] == {"key": {"S": "job"}}
    assert spoken(check["ConditionCheck"], "ConditionExpression") == f"owner = {lease.owner!r}"
    assert put["Put"]["TableName"] == "results"
    assert lease.metrics.write_requests == 2 and locks.operations() == ["PutItem", "DeleteItem"]


def test_owner_and_version_are_fresh_uuid4_tokens() -> None:
    async def scenario(h: Harness) -> None:
        first, second = h.lease(key="a"), h.lease(key="b")
        for lease in (first, second):
            await lease.acquire()
        rows = [h.row("a"), h.row("b")]
        tokens = [row[name]["S"] for row in rows for name in ("owner", "version")]  # type: ignore[index]
        assert len(set(tokens)) == 4
        uuid4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        assert all(uuid4.match(token) for token in tokens)

    run(scenario)


# --- malformed rows ------------------------------------------------------------------

GOOD = {
    "key": {"S": "k"},
    "owner": {"S": "someone"},
    "version": {"S": "v1"},
    "lease_ms": {"N": "100"},
    "protocol": {"N": "1"},
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"protocol": {"N": "2"}}, "protocol"),
        ({"protocol": {"N": "0"}}, "protocol"),
        ({"protocol": {"S": "1"}}, "protocol"),
        ({"protocol": None}, "protocol"),
        ({"lease_ms": {"N": "150.5"}}, "lease_ms"),
        ({"lease_ms": {"S": "1000"}}, "lease_ms"),
        ({"lease_ms": {"N": "99"}}, "lease_ms"),
        ({"lease_ms": {"N": "86400001"}}, "lease_ms"),
        ({"lease_ms": None}, "lease_ms"),
        ({"owner": {"S": ""}}, "owner"),
        ({"owner": {"N": "7"}}, "owner"),
        ({"owner": None}, "owner"),
        ({"version": {"S": ""}}, "version"),
        ({"version": {"B": b"v1"}}, "version"),
        ({"version": None}, "version"),
    ],
)
def test_a_malformed_row_raises_and_is_never_taken_over(
    change: dict[str, Any], problem: str
) -> None:
    row = {name: value for name, value in {**GOOD, **change}.items() if value is not None}

    async def scenario(h: Harness) -> None:
        h.write_row(row)
        lease = h.lease(wait=10)  # 100 times the stored lease: takeover would be allowed
        with pytest.raises(MalformedLockRow, match=problem) as raised:
            await h.clock.run(lease.acquire())
        assert "will not be taken over" in str(raised.value)
        assert raised.value.table == TABLE and raised.value.key == "k"
        assert h.row() == row
        assert h.transport.operations().count("PutItem") == 1  # only the first create
        assert lease.state is State.NOT_ACQUIRED

    run(scenario)


def test_lease_ms_bounds_are_inclusive_for_well_formed_rows() -> None:
    for lease_ms in (100, 86_400_000):
        row = p.parse_row({**GOOD, "lease_ms": {"N": str(lease_ms)}}, table=TABLE, key="k")
        assert row.lease_ms == lease_ms
    assert p.parse_row({**GOOD, "lease_ms": {"N": "2000.0"}}, table=TABLE, key="k").lease_ms == 2000


# --- validity -----------------------------------------------------------------------


def test_validity_is_measured_from_when_the_acquire_was_sent() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", before=1.0, after=1.0))
        lease = h.lease(lease=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(2.0)
        await task
        assert lease.time_left() == pytest.approx(9.0 - 2.0)
        await h.clock.advance(6.99)
        lease.raise_if_lost()

    run(scenario)


def test_a_renewal_counts_from_its_send_time_and_the_next_one_follows_a_third_later() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["UpdateItem"] = Fault("UpdateItem", before=0.5, after=0.5)
        lease = h.lease(lease=9)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(4.0)  # renewal sent at 3, confirmed at 4
        assert lease.counters().renewals == 1
        assert lease.time_left() == pytest.approx(8.1 - 1.0)
        await h.clock.advance(3.0)
        assert [t - start for t in h.transport.times("UpdateItem")] == pytest.approx([3.0, 6.0])

    run(scenario)


def test_a_wall_clock_jump_ends_a_held_lease_and_signals_it_promptly() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=30)
        await lease.acquire()
        await h.clock.advance(2.0)
        h.clock.jump_wall(60.0)
        await h.clock.advance(1.0)  # the renewal loop looks at least once a second
        assert lease.lost_signal.done() and lease.state is State.LOST
        with pytest.raises(LockLost, match="expired"):
            lease.raise_if_lost()

    run(scenario)


# --- request timeouts and budgets --------------------------------------------------------


@pytest.mark.parametrize(("lease", "timeout"), [(30.0, 5.0), (3.0, 1.0), (12.0, 4.0)])
def test_a_request_is_bounded_by_a_third_of_the_lease_and_five_seconds(
    lease: float, timeout: float
) -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(hang("PutItem", commit=False))
        acquiring = h.lease(lease=lease, wait=35)
        start = h.clock.monotonic()
        await h.clock.run(acquiring.acquire())
        # The create's answer never came: the strong read follows after exactly the timeout.
        assert h.transport.operations()[:2] == ["PutItem", "GetItem"]
        assert h.transport.times("GetItem")[0] - start == pytest.approx(timeout)
        assert acquiring.state is State.HELD

    run(scenario)


def test_a_request_never_outlives_the_time_left_in_the_wait() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = hang("PutItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        lease = h.lease(lease=30, wait=7)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire())
        assert h.transport.times("GetItem")[0] - start == pytest.approx(5.0)
        assert h.clock.monotonic() - start == pytest.approx(7.0)  # the read got 2 s, not 5
        assert lease.counters().wait_ms == pytest.approx(7000)

    run(scenario)


def test_a_renewal_request_is_bounded_by_the_validity_left() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["UpdateItem"] = hang("UpdateItem", commit=False)
        lease = h.lease(lease=3)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(2.2)
        # Renewal at 1 s times out after lease/3 = 1 s; its strong read shows it not applied.
        assert h.transport.times("GetItem")[0] - start == pytest.approx(2.0)
        lease.raise_if_lost()
        await h.clock.advance(0.51)  # retry at 2.25 s: bounded by the 0.45 s left
        assert lease.state is State.LOST
        assert h.transport.times("UpdateItem")[1] - start == pytest.approx(2.25)

    run(scenario)


def test_zero_wait_makes_one_attempt_without_sleeping() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        lease = h.lease(wait=0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="wait_timeout=0"):
            await lease.acquire()  # no clock advance: it must not sleep
        assert h.clock.monotonic() == start
        assert h.transport.operations() == ["PutItem"]  # the failed create returned the row
        assert lease.counters().wait_timeouts == 0

    run(scenario)


def test_zero_wait_does_not_retry_a_throttled_attempt() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("PutItem", commit=False, error=ThrottledError("slow down", operation="PutItem"))
        )
        lease = h.lease(wait=0)
        with pytest.raises(LockNotAcquired) as raised:
            await lease.acquire()
        assert isinstance(raised.value.__cause__, ThrottledError)
        assert h.transport.operations() == ["PutItem"]

    run(scenario)


@pytest.mark.parametrize(("lease", "budget"), [(1.0, 0.6), (5.0, 3.0), (30.0, 5.0)])
def test_zero_wait_has_a_network_budget_of_sixty_percent_of_the_lease_capped_at_five_seconds(
    lease: float, budget: float
) -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = hang("PutItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        acquiring = h.lease(lease=lease, wait=0)
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="network budget"):
            await h.clock.run(acquiring.acquire())
        assert h.clock.monotonic() - start == pytest.approx(budget)

    run(scenario)


def test_a_caller_can_cut_the_single_attempt_network_budget_but_not_raise_it() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = hang("PutItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        cut = h.lease(lease=30, wait=0)
        cut.single_attempt_cap = 0.4  # what a Lambda invocation can still afford
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="network budget"):
            await h.clock.run(cut.acquire())
        assert h.clock.monotonic() - start == pytest.approx(0.4)

        kept = h.lease(lease=1, wait=0)
        kept.single_attempt_cap = 60.0  # larger than 0.6 x lease: the rule still wins
        start = h.clock.monotonic()
        with pytest.raises(LockNotAcquired, match="network budget"):
            await h.clock.run(kept.acquire())
        assert h.clock.monotonic() - start == pytest.approx(0.6)

    run(scenario)


# --- renewal ----------------------------------------------------------------------------


def test_renewals_are_sent_every_third_of_the_lease() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(4.5)
        times = [t - start for t in h.transport.times("UpdateItem")]
        assert times == pytest.approx([1.0, 2.0, 3.0, 4.0])

    run(scenario)


@pytest.mark.parametrize(("lease", "retry"), [(6.0, 0.5), (24.0, 1.0)])
def test_a_failed_renewal_is_retried_every_twelfth_of_the_lease_capped_at_one_second(
    lease: float, retry: float
) -> None:
    async def scenario(h: Harness) -> None:
        throttled = ThrottledError("slow down", operation="UpdateItem")
        h.transport.always["UpdateItem"] = Fault("UpdateItem", commit=False, error=throttled)
        acquiring = h.lease(lease=lease)
        start = h.clock.monotonic()
        await acquiring.acquire()
        await h.clock.advance(lease * 0.9 - 0.001)
        acquiring.raise_if_lost()
        times = [t - start for t in h.transport.times("UpdateItem")]
        assert times[0] == pytest.approx(lease / 3)
        assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx(
            [retry] * (len(times) - 1)
        )
        assert times[-1] > lease * 0.9 - retry - 1e-6  # kept retrying to the end
        await h.clock.advance(0.002)
        with pytest.raises(LockLost):
            acquiring.raise_if_lost()
        assert acquiring.counters().renewals == 0

    run(scenario)


def test_an_unconfirmed_renewal_never_extends_validity() -> None:
    async def scenario(h: Harness) -> None:
        # Applied, answer lost, and the strong read fails too: it cannot be confirmed.
        h.transport.always["UpdateItem"] = lost_answer("UpdateItem")
        h.transport.always["GetItem"] = Fault(
            "GetItem", error=ThrottledError("slow down", operation="GetItem")
        )
        lease = h.lease(lease=12)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(10.79)
        assert lease.time_left() == pytest.approx(0.01)
        await h.clock.advance(0.02)
        assert lease.state is State.LOST
        assert h.clock.monotonic() - start == pytest.approx(10.81)

    run(scenario)


def test_an_applied_renewal_found_later_counts_from_its_own_send_time() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(lost_answer("UpdateItem"))
        h.transport.faults.append(
            Fault("GetItem", error=ThrottledError("slow down", operation="GetItem"))
        )
        lease = h.lease(lease=12)
        start = h.clock.monotonic()
        await lease.acquire()
        await h.clock.advance(5.0)
        # The retry at 5 s fails its condition; the returned row shows the version
        # sent at 4 s, so validity runs from 4 s, not from the retry.
        assert lease.counters().renewals == 1
        assert lease.time_left() == pytest.approx(10.8 - 1.0)
        await h.clock.advance(3.0)
        assert h.transport.times("UpdateItem")[-1] - start == pytest.approx(8.0)

    run(scenario)


def test_a_renewal_whose_strong_read_shows_our_old_version_is_retried_not_lost() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("UpdateItem", commit=False, error=RequestFailedError("reset"))
        )
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(1.1)
        assert lease.state is State.HELD and lease.counters().renewals == 0
        await h.clock.advance(0.25)  # retried after min(3/12, 1 s)
        assert lease.counters().renewals == 1
        lease.raise_if_lost()

    run(scenario)


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


# --- contention and observation ------------------------------------------------------------


def test_a_missing_row_means_the_create_is_retried_at_once() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("holder", "v1", 30_000)
        lease = h.lease(wait=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.3)
        h.delete_row()  # the holder released
        await h.clock.run(task)
        last_read = h.transport.times("GetItem")[-1]
        assert h.transport.operations()[-2:] == ["GetItem", "PutItem"]
        assert h.transport.times("PutItem")[-1] == last_read  # no pause in between
        assert h.owner_of() == lease.owner

    run(scenario)


def test_a_takeover_that_finds_the_row_gone_creates_it_at_once() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 1_000)
        lease = h.lease(lease=30, wait=10)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.settle()
        h.transport.faults.append(Fault("PutItem", before=0.5))  # the takeover, in flight
        await h.clock.advance(1.2)  # the takeover was sent at 1 s
        h.delete_row()  # ...and the row vanishes before it arrives
        await h.clock.run(task)
        assert h.transport.operations()[-3:] == ["PutItem", "GetItem", "PutItem"]
        assert h.transport.times("PutItem")[-1] == h.transport.times("GetItem")[-1]
        assert h.owner_of() == lease.owner

    run(scenario)


def test_takeover_waits_for_the_stored_lease_even_when_ours_is_shorter() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 10_000)
        lease = h.lease(lease=1, wait=20)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        takeover = h.transport.times("PutItem")[-1] - start
        assert 10.0 <= takeover <= 10.0 + 0.1 * 1.2 + 1e-6  # within one capped poll
        assert h.owner_of() == lease.owner and lease.state is State.HELD

    run(scenario)


def test_a_changed_version_restarts_the_observation() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("alive", "v1", 2_000)
        lease = h.lease(lease=30, wait=20)
        start = h.clock.monotonic()
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(1.5)
        h.write_lock("alive", "v2", 2_000)  # the holder renewed
        await h.clock.advance(2.0)
        assert not task.done()  # 3.5 s after the first sighting, 2 s after the renewal
        await h.clock.run(task)
        assert h.transport.times("PutItem")[-1] - start >= 3.5

    run(scenario)


@pytest.mark.parametrize(
    "change", [("other", "v1", 2_000), ("alive", "v2", 2_000), ("alive", "v1", 2_001)]
)
def test_observation_compares_owner_version_and_lease(change: tuple[str, str, int]) -> None:
    seen = Observations()
    assert seen.observe((TABLE, "k"), ("alive", "v1", 2_000), 10.0) == 10.0
    assert seen.observe((TABLE, "k"), ("alive", "v1", 2_000), 11.0) == 10.0
    assert seen.observe((TABLE, "k"), change, 12.0) == 12.0


def test_observations_are_kept_per_table_and_key() -> None:
    seen, identity = Observations(), ("alive", "v1", 2_000)
    assert seen.observe(("a", "k"), identity, 1.0) == 1.0
    assert seen.observe(("b", "k"), identity, 2.0) == 2.0
    assert seen.observe(("a", "j"), identity, 3.0) == 3.0
    assert [seen.observe(r, identity, 9.0) for r in (("a", "k"), ("b", "k"), ("a", "j"))] == [
        1.0,
        2.0,
        3.0,
    ]


def test_observation_uses_only_the_monotonic_clock() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        lease = h.lease(lease=30, wait=10)
        start = h.clock.monotonic()
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.5)
        h.clock.jump_wall(3_600.0)  # the wall clock leaps an hour: no earlier takeover
        await h.clock.advance(1.4)
        assert not task.done() and h.owner_of() == "crashed"
        h.clock.jump_wall(-7_200.0)  # nor does a leap backwards delay it
        await h.clock.run(task, limit=1.0)
        assert h.transport.times("PutItem")[-1] - start >= 2.0

    run(scenario)


def test_a_fresh_client_cannot_skip_observation_of_an_old_row() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        await h.clock.advance(3_600.0)  # the row is an hour old; nobody has watched it
        lease = h.lease(wait=0, observations=Observations())
        with pytest.raises(LockNotAcquired):
            await lease.acquire()
        assert h.owner_of() == "crashed"

    run(scenario)


def test_the_cache_holds_4096_observations_and_evicts_the_least_recently_used() -> None:
    seen = Observations()
    identity = ("o", "v", 1_000)
    for index in range(p.OBSERVATION_CAPACITY):
        seen.observe(("t", str(index)), identity, float(index))
    assert len(seen) == 4096
    seen.observe(("t", "0"), identity, 5_000.0)  # touched: now the most recent
    seen.observe(("t", "new"), identity, 5_001.0)
    assert len(seen) == 4096
    assert seen.observe(("t", "0"), identity, 6_000.0) == 0.0  # kept its first sighting
    assert seen.observe(("t", "1"), identity, 6_000.0) == 6_000.0  # evicted: starts over


def test_eviction_from_the_cache_delays_recovery() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 2_000)
        first = h.lease(wait=1)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(first.acquire())
        for index in range(p.OBSERVATION_CAPACITY):  # other keys' contention fills the cache
            h.observations.observe((TABLE, f"other-{index}"), ("x", "y", 1_000), 0.0)
        await h.clock.advance(1.5)  # 2.5 s after the first sighting, which is gone
        second = h.lease(wait=0)
        with pytest.raises(LockNotAcquired):
            await second.acquire()
        await h.clock.advance(2.01)
        third = h.lease(wait=0)
        await third.acquire()
        assert h.owner_of() == third.owner

    run(scenario)


def test_a_release_in_this_client_wakes_its_waiter_at_once() -> None:
    async def scenario(h: Harness) -> None:
        holder, waiter = h.lease(lease=30), h.lease(lease=30, wait=30)
        await holder.acquire()
        task = asyncio.ensure_future(waiter.acquire())
        await h.clock.advance(5.0)  # polls have backed off to their cap
        await holder.release()
        await h.clock.settle()
        assert task.done() and waiter.state is State.HELD

    run(scenario)


# --- ambiguous writes ---------------------------------------------------------------------


def test_an_ambiguous_takeover_is_reconciled_by_a_strong_read() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 1_000)
        lease = h.lease(lease=30, wait=5)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.settle()
        h.transport.faults.append(lost_answer("PutItem"))  # the takeover's answer is lost
        await h.clock.advance(1.5)
        await task
        assert h.transport.operations()[-2:] == ["PutItem", "GetItem"]
        assert h.owner_of() == lease.owner and lease.counters().request_failures == 1

    run(scenario)


def test_an_ambiguous_takeover_that_was_not_applied_is_retried() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("crashed", "v1", 1_000)
        lease = h.lease(lease=30, wait=5)
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.settle()
        h.transport.faults.append(Fault("PutItem", commit=False, error=RequestFailedError("x")))
        await h.clock.advance(1.5)
        await task
        assert h.transport.operations().count("PutItem") == 3  # create, lost try, retry
        assert h.owner_of() == lease.owner

    run(scenario)


def test_an_ambiguous_create_is_reconciled_within_the_wait() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(hang("PutItem"))  # applied, answer never comes
        lease = h.lease(lease=30, wait=35)
        start = h.clock.monotonic()
        await h.clock.run(lease.acquire())
        assert h.transport.operations() == ["PutItem", "GetItem"]
        # Validity counts from the create's send time, not from the read 5 s later.
        assert h.clock.monotonic() - start == pytest.approx(5.0)
        assert lease.time_left() == pytest.approx(27.0 - 5.0)

    run(scenario)


# --- late successes -----------------------------------------------------------------------


def test_a_renewal_that_lands_after_the_loss_does_not_revive_the_guard() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["UpdateItem"] = Fault("UpdateItem", before=4.0)
        h.transport.always["GetItem"] = Fault(
            "GetItem", error=ThrottledError("slow down", operation="GetItem")
        )
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(2.8)
        assert lease.state is State.LOST
        await h.clock.advance(5.0)  # the first renewal reached the table at 5 s and succeeded
        assert lease.state is State.LOST and lease.counters().renewals == 0
        assert lease.time_left() == 0
        with pytest.raises(LockLost):
            lease.raise_if_lost()

    run(scenario)


def test_a_create_that_lands_after_the_wait_ran_out_is_deleted() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", before=1.0))
        lease = h.lease(lease=30, wait=0.5)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire(), limit=0.9)
        assert h.row() is None
        await h.clock.advance(1.0)  # it lands at 1 s
        assert h.row() is None and lease.state is State.NOT_ACQUIRED
        assert h.transport.times("DeleteItem")[-1] >= h.transport.times("PutItem")[0] + 1.0

    run(scenario)


def test_a_create_that_lands_late_with_a_lost_answer_is_deleted() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(
            Fault("PutItem", before=1.0, error=RequestFailedError("reset", operation="PutItem"))
        )
        lease = h.lease(lease=30, wait=0.5)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire(), limit=0.9)
        await h.clock.advance(1.0)
        assert h.row() is None

    run(scenario)


def test_a_cancelled_acquisition_deletes_a_create_that_lands_afterwards() -> None:
    async def scenario(h: Harness) -> None:
        h.transport.faults.append(Fault("PutItem", before=0.5, after=0.5))
        lease = h.lease()
        task = asyncio.ensure_future(lease.acquire())
        await h.clock.advance(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert lease.state is State.CANCELLED
        await h.clock.advance(1.0)  # the create reached the table at 0.5 s
        assert h.row() is None and lease.state is State.CANCELLED
        with pytest.raises(LockLost, match="cancelled"):
            lease.raise_if_lost()

    run(scenario)


# --- the lost signal ----------------------------------------------------------------------


def test_a_takeover_is_signalled_to_the_holder_and_its_callback() -> None:
    told: list[LockLost] = []
    called = threading.Event()

    def on_lost(error: LockLost) -> None:
        told.append(error)
        called.set()

    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=3, on_lost=on_lost)
        await lease.acquire()
        h.write_lock("successor", "v9", 3_000)
        await h.clock.advance(1.0)  # the next renewal finds the successor
        assert lease.lost_signal.done()

    run(scenario)
    assert called.wait(5)
    assert "another owner" in str(told[0]) and told[0].key == "k"


# --- errors are never contention ---------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        TableNotFoundError("no table", code="ResourceNotFoundException"),
        AccessDeniedError("denied", code="AccessDeniedException"),
        ValidationError("bad key", code="ValidationException"),
    ],
)
def test_dynamodb_failures_are_raised_at_once_not_reported_as_contention(
    error: Exception,
) -> None:
    async def scenario(h: Harness) -> None:
        h.transport.always["PutItem"] = Fault("PutItem", commit=False, error=error)
        lease = h.lease(wait=10)
        with pytest.raises(type(error)):
            await h.clock.run(lease.acquire())
        assert h.transport.operations() == ["PutItem"]
        assert lease.counters().wait_timeouts == 0

    run(scenario)


def test_throttling_during_acquisition_is_retried_within_the_wait() -> None:
    async def scenario(h: Harness) -> None:
        throttled = ThrottledError("slow down", operation="PutItem")
        h.transport.faults += [Fault("PutItem", commit=False, error=throttled)] * 2
        lease = h.lease(wait=10)
        await h.clock.run(lease.acquire())
        assert lease.state is State.HELD and lease.counters().request_failures == 2

    run(scenario)


# --- single use, defaults and limits -----------------------------------------------------------


def test_a_lease_is_single_use() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        await lease.acquire()
        await lease.release()
        with pytest.raises(RuntimeError, match="single use"):
            await lease.acquire()

    run(scenario)


def test_defaults_are_a_30_second_lease_and_a_35_second_wait() -> None:
    client, transport = recording_client()
    guard = SyncDistributedLock(client, table=TABLE, key="defaults")
    assert (guard._lease.lease_s, guard._lease.wait_s) == (30.0, 35.0)
    with guard:
        pass
    assert transport.sent[0].params["Item"]["lease_ms"] == {"N": "30000"}


@pytest.mark.parametrize(
    ("lease", "wait"), [(0.1, 0), (86_400, 86_400), (0.1, 86_400.0), (1e-1, 0.0)]
)
def test_durations_at_their_limits_are_accepted(lease: float, wait: float) -> None:
    assert p.check_durations(lease, wait) == (float(lease), float(wait))


@pytest.mark.parametrize(
    ("lease", "wait", "parameter"),
    [
        (0.0999, 1, "lease_duration"),
        (86_400.001, 1, "lease_duration"),
        (float("inf"), 1, "lease_duration"),
        (1, -1e-9, "wait_timeout"),
        (1, 86_400.001, "wait_timeout"),
        (1, float("nan"), "wait_timeout"),
    ],
)
def test_durations_past_their_limits_are_rejected(
    lease: float, wait: float, parameter: str
) -> None:
    with pytest.raises(ValueError, match=parameter):
        p.check_durations(lease, wait)


def test_the_stored_lease_is_whole_milliseconds() -> None:
    assert [p.lease_ms(s) for s in (0.1, 1.2346, 30.0, 86_400.0)] == [
        100,
        1235,
        30_000,
        86_400_000,
    ]


def test_an_interrupt_during_a_sync_release_does_not_stop_the_release() -> None:
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

    guard = SyncDistributedLock(client, table=TABLE, key="interrupted", lease_duration=1.2)
    with pytest.raises(KeyboardInterrupt):
        with guard:
            threading.Thread(target=interrupt_once_the_delete_is_in_flight).start()
    gate.set()
    for _ in range(100):
        if guard._lease.state is State.RELEASED:
            break
        time.sleep(0.02)
    assert guard._lease.state is State.RELEASED
    assert transport.inner.db.tables()[TABLE] == []
