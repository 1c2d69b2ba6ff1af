"""``dynalease doctor``: each finding with its fix, a non-zero exit on problems, reads only."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from support.cli_runner import Result
from support.fault_proxy import FaultProxy
from support.servers import raw_dynamodb

from dynalease._tooling.diagnose import OK, PROBLEM, _replicas


@pytest.fixture
def proxy(endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(endpoint) as recorder:
        yield recorder


def _statuses(out: str) -> dict[str, str]:
    """check name -> OK/PROBLEM, from the doctor's lines."""
    found = {}
    for line in out.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("OK", "PROBLEM"):
            found[rest.strip().split(":")[0]] = status
    return found


def test_a_lock_table_passes_every_check_using_reads_only(
    dynalease: Callable[..., Result], lock_table: str, proxy: FaultProxy
) -> None:
    result = dynalease("doctor", "--table", lock_table, "--endpoint", proxy.url)
    assert result.code == 0, result.out + result.err
    assert set(_statuses(result.out).values()) == {"OK"}
    assert {"table exists", "partition key", "sort key", "TTL", "global table", "lock read"} <= set(
        _statuses(result.out)
    )
    assert "verdict: usable as a dynalease lock table" in result.out
    operations = {entry.operation for entry in proxy.seen()}
    assert operations == {"DescribeTable", "DescribeTimeToLive", "GetItem"}


def test_a_wrong_schema_and_ttl_are_problems_each_with_a_fix(
    dynalease: Callable[..., Result], endpoint: str
) -> None:
    name = f"cli-bad-{uuid.uuid4().hex[:8]}"
    raw = raw_dynamodb(endpoint)
    raw.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    raw.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"}
    )
    result = dynalease("doctor", "--table", name, "--endpoint", endpoint)
    assert result.code == 1
    statuses = _statuses(result.out)
    assert statuses["partition key"] == statuses["sort key"] == statuses["TTL"] == "PROBLEM"
    lines = result.out.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("PROBLEM"):
            assert lines[index + 1].strip().startswith("fix: "), line
    assert "Enabled=false,AttributeName=expires" in result.out
    assert "verdict: 3 problems" in result.out


def test_a_missing_table_is_a_problem_with_the_command_that_creates_it(
    dynalease: Callable[..., Result], endpoint: str
) -> None:
    result = dynalease("doctor", "--table", "no-such-table", "--endpoint", endpoint)
    assert result.code == 1
    assert "PROBLEM  table exists: no table 'no-such-table'" in result.out
    assert "AttributeName=key,AttributeType=S" in result.out


def test_an_unreachable_endpoint_is_a_problem_not_a_traceback(
    dynalease: Callable[..., Result],
) -> None:
    result = dynalease("doctor", "--table", "locks", "--endpoint", "http://127.0.0.1:9")
    assert result.code == 1
    assert "PROBLEM  endpoint reachable" in result.out
    assert "Traceback" not in result.err


def test_replicas_in_other_regions_are_a_problem_and_none_is_fine() -> None:
    finding = _replicas({"Replicas": [{"RegionName": "eu-west-1"}, {"RegionName": "us-east-2"}]})
    assert finding.status == PROBLEM
    assert "eu-west-1, us-east-2" in finding.detail
    assert "one Region" in finding.fix
    assert _replicas({"GlobalTableVersion": "2017.11.29"}).status == PROBLEM
    assert _replicas({"TableName": "locks"}).status == OK


def test_measure_times_each_lock_request_and_leaves_no_row_behind(
    dynalease: Callable[..., Result], lock_table: str, proxy: FaultProxy, endpoint: str
) -> None:
    result = dynalease(
        "doctor", "--table", lock_table, "--endpoint", proxy.url, "--measure", "--tries", "3"
    )
    assert result.code == 0, result.out + result.err
    for label in ("acquire (PutItem)", "renew (UpdateItem)", "check_in (TransactWriteItems)"):
        line = next(line for line in result.out.splitlines() if line.startswith(label))
        assert line.split()[2] == "3", line  # one of each per cycle
    assert any(line.startswith("release (DeleteItem)") for line in result.out.splitlines())
    assert "3 lock cycles" in result.out
    assert "lease_duration: at least" in result.out
    seen = [entry.operation for entry in proxy.seen()]
    assert seen.count("PutItem") == seen.count("DeleteItem") == 3
    rows = raw_dynamodb(endpoint).scan(TableName=lock_table)["Items"]
    assert rows == []


@pytest.mark.parametrize("tries", ["0", "-2", "many"])
def test_measure_refuses_a_bad_tries_before_any_request(
    dynalease: Callable[..., Result], lock_table: str, proxy: FaultProxy, tries: str
) -> None:
    result = dynalease(
        "doctor", "--table", lock_table, "--endpoint", proxy.url, "--measure", "--tries", tries
    )
    assert result.code == 2
    assert "--tries" in result.err
    assert proxy.seen() == []


def test_measure_does_not_run_on_a_table_with_a_problem(
    dynalease: Callable[..., Result], endpoint: str
) -> None:
    result = dynalease("doctor", "--table", "no-such-table", "--endpoint", endpoint, "--measure")
    assert result.code == 1
    assert "PROBLEM  table exists" in result.out
    assert "lock cycles" not in result.out


def test_a_multi_region_strongly_consistent_global_table_is_fine_and_an_eventual_one_not() -> None:
    replicas = [{"RegionName": "us-east-1"}, {"RegionName": "us-east-2"}]
    strong = _replicas({"Replicas": replicas, "MultiRegionConsistency": "STRONG"})
    assert strong.status == OK
    assert "strong consistency" in strong.detail
    eventual = _replicas({"Replicas": replicas, "MultiRegionConsistency": "EVENTUAL"})
    assert eventual.status == PROBLEM
    assert "last-writer-wins" in eventual.detail
    assert _replicas({"Replicas": replicas}).status == PROBLEM  # the default is eventual


def test_a_throttled_table_is_explained_a_hot_key_first(
    dynalease: Callable[..., Result], lock_table: str, proxy: FaultProxy
) -> None:
    reasons = [
        {"reason": "TableReadKeyRangeThroughputExceeded", "resource": "arn:aws:dynamodb:x"},
        {"reason": "TableReadProvisionedThroughputExceeded", "resource": "arn:aws:dynamodb:x"},
    ]
    proxy.answer(
        "GetItem",
        400,
        "ProvisionedThroughputExceededException",
        "slow down",
        extra={"ThrottlingReasons": reasons},
    )
    result = dynalease("doctor", "--table", lock_table, "--endpoint", proxy.url)
    assert result.code == 1, result.out + result.err
    assert "PROBLEM  throttling" in result.out
    assert "TableReadKeyRangeThroughputExceeded" in result.out
    fix = result.out.split("PROBLEM  throttling", 1)[1]
    assert fix.index("hot lock key") < fix.index("provisioned capacity")
    detail, advice = fix.split("\n", 1)
    assert "AWS request id fault-proxy" in detail  # for AWS support
    assert "AWS request id" not in advice  # the advice alone, not the error's whole message
