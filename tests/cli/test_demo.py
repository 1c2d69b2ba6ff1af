"""``dynalease-dev demo``: a short run end to end, and the checks that make it fail."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from dynalease_dev.demo.plan import DemoOptions
from dynalease_dev.demo.runner import Demo
from support.cli_runner import Result, spawn_dev_cli, spawn_dev_cli_without_moto

from dynalease import DynamoDBClient
from dynalease.cli.common import NEEDS_MOTO

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def quick_demo() -> Result:
    # Its own embedded moto server, worker processes and Lambda invocations: as `make demo`.
    return spawn_dev_cli(
        "demo", "--quick", "--duration", "10", "--workers", "2", "--plain", timeout=120
    )


def closing_shape(output: str) -> list[str]:
    """The demo's closing lines, from the table's header to ``result:``, as shapes.

    Numbers become ``N``, worker and handler names ``NAME``, plurals singular, and
    consecutive worker rows one ``worker row``, so two runs of different lengths (or
    worker counts) have the same shape when they print the same kinds of lines.
    """
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("worker "))
    end = next(i for i, line in enumerate(lines) if line.startswith("result: "))
    shapes: list[str] = []
    for line in lines[start : end + 1]:
        if re.match(r"w\d+(?: \(killed\))?  ", line):
            shape = "worker row"
        elif re.match(r"lambda  ", line):
            shape = "lambda row"
        elif line.startswith("-----"):
            shape = "rule"
        else:
            shape = re.sub(r"\d+(?:\.\d+)?", "N", " ".join(line.split()))
            shape = re.sub(r"\b(N [a-z]+?)s\b", r"\1", shape)
            shape = re.sub(r"\bw\d+\b|[\w-]+(?= took it over)", "NAME", shape)
            shape = re.sub(r"(?:[\w-]+ N ok, N contended, N error(?:, )?)+", "HANDLERS", shape)
        if not shapes or shape != shapes[-1] or shape != "worker row":
            shapes.append(shape)
    return [shape for shape in shapes if shape]


def test_readmes_sample_output_has_the_lines_a_real_run_prints(quick_demo: Result) -> None:
    assert quick_demo.code == 0, quick_demo.out + quick_demo.err
    sample = next(
        block
        for block in README.read_text().split("```text\n")[1:]
        if "result: OK" in block.split("```")[0]
    ).split("```")[0]
    assert closing_shape(sample) == closing_shape(quick_demo.out), (
        "README.md's sample demo output no longer matches what `dynalease-dev demo` prints; "
        "paste the end of a fresh `make demo` run"
    )
    assert "Lambda invocations: HANDLERS" in closing_shape(sample)


def test_a_short_demo_kills_a_holder_sees_it_taken_over_and_finds_no_violation(
    quick_demo: Result,
) -> None:
    result = quick_demo
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
    for column in ("done", "wait p50", "wait p95", "writes", "reads", "renewals"):
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


def test_a_too_short_duration_is_a_usage_error(dynalease_dev: Callable[..., Result]) -> None:
    result = dynalease_dev("demo", "--duration", "3")
    assert result.code == 2
    assert "--duration must be at least 10 s" in result.err


def test_an_unreachable_endpoint_ends_the_demo_with_one_line(
    dynalease_dev: Callable[..., Result],
) -> None:
    result = dynalease_dev("demo", "--endpoint", "http://127.0.0.1:9", "--region", "us-east-1")
    assert result.code == 1
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynalease-dev demo: error:"), result.err


def test_the_paused_holder_demo_shows_the_late_write_landing_and_then_refused() -> None:
    result = spawn_dev_cli("demo", "--paused-holder", "--plain", timeout=120)
    assert result.code == 0, result.out + result.err
    out = result.out
    assert "without fencing: A, paused past its lease, resumed and wrote over B's row" in out
    assert re.search(
        r"with fencing=True: A's late write \(token (\d+)\) was refused; the ledger keeps "
        r"B's write \(token (\d+)\)",
        out,
    ), out
    assert "UNEXPECTED" not in out and "result: OK" in out


def test_the_demo_without_moto_says_what_to_install_in_one_line() -> None:
    result = spawn_dev_cli_without_moto("demo", "--quick")
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        f"dynalease-dev demo: error: {NEEDS_MOTO}, or pass --endpoint URL of a DynamoDB-compatible "
        "server"
    ]


def test_a_fifo_batch_that_only_met_busy_locks_is_contention_in_one_line(
    client: DynamoDBClient, lock_table: str, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record fails (Powertools raises, with a traceback per record): still contention."""
    import json

    from dynalease_dev.demo.lambda_invocations import _invoke_once
    from dynalease_dev.invoke import invoke

    from dynalease.lock import SyncDistributedLock

    root = README.parent
    event = json.loads((root / "events/sqs-fifo.json").read_text())
    # c-1001's two messages: the first waits for the busy lock, the second is skipped.
    records = event["Records"]
    event["Records"] = [r for r in records if r["attributes"]["MessageGroupId"] == "c-1001"]
    for name, value in {
        "DYNALEASE_TABLE": lock_table,
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    target = f"{root / 'examples/lambda/sqs_fifo_handler.py'}:handler"
    with SyncDistributedLock(client, table=lock_table, key="customer:c-1001"):
        outcome = _invoke_once(invoke, target, event)
    assert outcome == ("contended", "2 records left for redelivery")
