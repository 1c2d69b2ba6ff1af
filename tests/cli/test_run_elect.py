"""``dynalease run --elect -- CMD``: the same command on three "machines", one runs it.

Three ``run --elect`` processes share one key; the leader's command writes its term
and keeps running. SIGKILLing the leader's ``run`` (its command dies with it) lets a
standby lead and run the command with a larger term, within the lease plus a poll.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli_runner import CLI, cli_env, spawn_cli

from dynalease import DynamoDBClient
from dynalease._engine.protocol import poll_cap
from dynalease.election import SyncElection

LEASE_S = 2.0
#: Generous: two cores shared by several test runs.
BOUND_S = 30.0
SLACK_S = 3.0


def elect(endpoint: str, table: str, out: Path, *options: str) -> Any:
    script = f'echo "$DYNALEASE_FENCING_TOKEN" > {out}.tmp && mv {out}.tmp {out}; exec sleep 60'
    arguments = ["--endpoint", endpoint, "--table", table, "--key", "svc", "--elect"]
    return subprocess.Popen(
        [*CLI, "run", *arguments, "--lease", str(LEASE_S), *options, "--", "sh", "-c", script],
        env=cli_env(),
        stderr=subprocess.PIPE,
        text=True,
    )


def first_file(paths: list[Path], timeout: float = BOUND_S) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in paths:
            if path.exists():
                return path
        time.sleep(0.02)
    pytest.fail(f"no command started within {timeout:g} s")


def test_one_of_three_runs_the_command_and_a_standby_takes_over_when_it_dies(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    outs = [tmp_path / f"term-{i}" for i in range(3)]
    runs = [elect(endpoint, lock_table, out) for out in outs]
    try:
        leader_out = first_file(outs)
        time.sleep(LEASE_S)  # the standbys are campaigning, and do not run the command
        assert [out.exists() for out in outs].count(True) == 1
        first_term = int(leader_out.read_text())
        shown = SyncElection(client, table=lock_table, name="svc").leader()
        assert shown is not None and shown.term == first_term and shown.value  # the host
        leader = runs[outs.index(leader_out)]
        leader.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        rest = [out for out in outs if out != leader_out]
        next_out = first_file(rest)
        took = time.monotonic() - killed_at
        assert int(next_out.read_text()) > first_term
        assert took <= LEASE_S + poll_cap(LEASE_S) + SLACK_S
    finally:
        for run in runs:
            run.kill()
            run.wait()


def test_with_wait_0_a_standby_gives_up_at_once_with_75(
    endpoint: str, lock_table: str, tmp_path: Path
) -> None:
    out = tmp_path / "term"
    leader = elect(endpoint, lock_table, out)
    try:
        first_file([out])
        result = spawn_cli(
            "run", "--endpoint", endpoint, "--table", lock_table, "--key", "svc", "--elect",
            "--wait", "0", "--", "true",
        )  # fmt: skip
        assert result.code == 75, result.err
    finally:
        leader.kill()
        leader.wait()


def test_elect_refuses_permits_before_anything_runs(endpoint: str, lock_table: str) -> None:
    result = spawn_cli(
        "run", "--endpoint", endpoint, "--table", lock_table, "--key", "svc", "--elect",
        "--permits", "2", "--", "true",
    )  # fmt: skip
    assert result.code == 2
    assert "--elect elects one leader on one key; drop --permits" in result.err
