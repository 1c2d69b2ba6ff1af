"""``dynalease demo``: a short run end to end, and the checks that make it fail."""

from __future__ import annotations

import re
from collections.abc import Callable

from support.cli_runner import Result, spawn_cli

from dynalease import DynamoDBClient
from dynalease.demo.plan import DemoOptions
from dynalease.demo.runner import Demo


def test_a_short_demo_kills_a_holder_sees_it_taken_over_and_finds_no_violation() -> None:
    # Its own embedded moto server, worker processes and Lambda invocations: as `make demo`.
    result = spawn_cli(
        "demo", "--quick", "--duration", "10", "--workers", "2", "--plain", timeout=120
    )
    assert result.code == 0, result.out + result.err
    out = result.out
    assert "result: OK, 0 violations" in out
    assert re.search(
        r"history: \d keys?, \d+ acquisitions?, \d+ commits?, \d+ takeovers?: "
        r"0 stale commits, 0 overlaps",
        out,
    ), out
    # The hot customer's holder is killed; a worker or a Lambda handler takes over.
    crash = r"crash: SIGKILLed w1 holding customer:c-1001 \(lease 3 s\); .+ took it over"
    assert re.search(crash, out), out
    counters = re.search(r"counters: (\d+) increments counted, (\d+) commits reported", out)
    assert counters is not None and counters.group(1) == counters.group(2) != "0"
    header = next(line for line in out.splitlines() if line.startswith("worker "))
    for column in ("completions", "wait p50", "wait p95", "writes/lock", "reads/lock"):
        assert column in header
    assert any(line.startswith("w1 (killed)") for line in out.splitlines())


def _options(endpoint: str, table: str) -> DemoOptions:
    return DemoOptions(
        endpoint=endpoint, region="us-east-1", table=table, quick=True, keys=2, plain=True
    )


def test_the_checks_report_a_lost_update_and_a_missing_crash(
    client: DynamoDBClient, endpoint: str
) -> None:
    demo = Demo(_options(endpoint, f"cli-demo-{id(client)}"))
    demo.create_tables(client)
    # Two commits reported for c-1001, but the counter shows one: an update was lost.
    demo.state.committed["c-1001"] = 2
    client.sync_put_item(demo.plan.tables["results"], {"customer_id": "c-1001", "commits": 1})
    lines = demo.check(client)
    assert any("counters: 1 increments counted, 2 commits reported" in line for line in lines)
    assert any("c-1001 is 1 but 2 commits were reported" in f for f in demo.failures)
    assert any("the planned crash did not happen" in f for f in demo.failures)


def test_a_too_short_duration_is_a_usage_error(dynalease: Callable[..., Result]) -> None:
    result = dynalease("demo", "--duration", "3")
    assert result.code == 2
    assert "--duration must be at least 10 s" in result.err


def test_an_unreachable_endpoint_ends_the_demo_with_one_line(
    dynalease: Callable[..., Result],
) -> None:
    result = dynalease("demo", "--endpoint", "http://127.0.0.1:9", "--region", "us-east-1")
    assert result.code == 1
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynalease demo: error:"), result.err


def test_the_paused_holder_demo_shows_the_late_write_landing_and_then_refused() -> None:
    result = spawn_cli("demo", "--paused-holder", "--plain", timeout=120)
    assert result.code == 0, result.out + result.err
    out = result.out
    assert "without fencing: A, paused past its lease, resumed and wrote over B's row" in out
    assert re.search(
        r"with fencing=True: A's late write \(token (\d+)\) was refused; the ledger keeps "
        r"B's write \(token (\d+)\)",
        out,
    ), out
    assert "UNEXPECTED" not in out and "result: OK" in out
