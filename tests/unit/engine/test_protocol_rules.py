"""The rows and requests of docs/protocol.md: what is sent, what is stored, what is refused.

Each test runs one lease on the test's own event loop (see ``lease_harness``):
time moves only when the test says so, and every request is recorded with the
clock time it was sent, so timing rules are checked exactly.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.lease_harness import (
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
from dynalease._engine.lease import Lease
from dynalease._engine.states import State
from dynalease.exceptions import (
    AccessDeniedError,
    LockLost,
    MalformedLockRow,
    TableNotFoundError,
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


# --- rows and requests ---------------------------------------------------------------------


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
            # pydynox's five attributes, and the holder map it ignores (engine/test_holder.py)
            assert set(item) == {"key", "owner", "version", "lease_ms", "protocol", "holder"}
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
        (check,) = [item["ConditionCheck"] for item in lease.condition_items()]
        assert check["TableName"] == TABLE and check["Key"] == {"key": {"S": "k"}}
        assert spoken(check, "ConditionExpression") == f"owner = {lease.owner!r}"
        await lease.release()
        with pytest.raises(LockLost):
            lease.condition_items()

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


def test_an_uncontended_acquire_and_release_make_two_writes() -> None:
    async def scenario(h: Harness) -> Lease:
        lease = h.lease()
        await lease.acquire()
        await lease.release()
        assert h.row() is None
        return lease

    counters = run(scenario).counters()
    assert counters.write_requests == 2 and counters.read_requests == 0


# --- malformed rows ------------------------------------------------------------------------


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
        # ``problem`` names what is wrong without the advice (``dynalease inspect`` shows it).
        assert problem in raised.value.problem
        assert "taken over" not in raised.value.problem
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


def test_a_malformed_row_is_never_taken_over() -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("x", "v", 1000, protocol=2)
        lease = h.lease(wait=5)
        with pytest.raises(MalformedLockRow, match="protocol"):
            await h.clock.run(lease.acquire())
        assert h.owner_of() == "x"

    run(scenario)


# --- request timeouts and budgets ----------------------------------------------------------


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


# --- ambiguous writes ----------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem", "DeleteItem"])
def test_a_lost_response_is_reconciled_by_a_strong_read(operation: str) -> None:
    async def scenario(h: Harness) -> Lease:
        h.transport.faults.append(lost_answer(operation))
        lease = h.lease(lease=3)
        await lease.acquire()
        await h.clock.advance(1.05)  # one renewal
        lease.raise_if_lost()
        await lease.release()
        assert h.row() is None
        assert "GetItem" in h.transport.operations()
        return lease

    counters = run(scenario).counters()
    assert counters.request_failures == 1 and not counters.lost


# --- errors are never contention -----------------------------------------------------------


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


# --- single use, defaults and limits -------------------------------------------------------


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


_SECONDS = [0.0, -0.0, 1e-9, 0.05, 0.0995, 0.1, 0.1005, 1, 2.5, 3, 15, 15.0, 16.7, 30.0]
_SECONDS += [86_400, 86_400.0005, 1e9, -1, -5.0, float("inf"), float("-inf"), float("nan")]


def _same(a: float, b: float) -> bool:
    return repr(a) == repr(b) and type(a) is type(b)  # NaN, -0.0 and int/float told apart


@pytest.mark.parametrize("lease_s", _SECONDS)
def test_the_timing_rules_are_the_min_max_formulas_of_the_design(lease_s: float) -> None:
    assert _same(p.cleanup_budget(lease_s), min(0.6 * lease_s, p.MAX_CLEANUP_BUDGET_S))
    assert _same(p.zero_wait_budget(lease_s), min(0.6 * lease_s, p.MAX_ZERO_WAIT_BUDGET_S))
    for time_left in _SECONDS:
        expected = max(0.0, min(time_left, lease_s / 3, p.MAX_REQUEST_TIMEOUT_S))
        assert _same(p.request_timeout(lease_s, time_left), expected)
    if lease_s == lease_s and abs(lease_s) != float("inf"):  # round() takes finite numbers
        expected_ms = max(p.MIN_LEASE_MS, min(p.MAX_LEASE_MS, round(lease_s * 1000)))
        assert _same(p.lease_ms(lease_s), expected_ms)


def test_owner_and_version_tokens_are_uuid4_text_as_pydynox_writes_them() -> None:
    import uuid

    tokens = [p.new_token() for _ in range(4000)]
    assert len(set(tokens)) == len(tokens)
    for token in tokens:
        parsed = uuid.UUID(token)
        assert str(parsed) == token
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # Every bit that is not the version's or the variant's is random: each of the 30
    # random hex digits takes all 16 values over this many tokens, and the variant
    # digit all four of 8, 9, a, b.
    digits = [{token.replace("-", "")[at] for token in tokens} for at in range(32)]
    assert digits[12] == {"4"} and digits[16] == set("89ab")
    assert all(len(seen) == 16 for at, seen in enumerate(digits) if at not in (12, 16))
