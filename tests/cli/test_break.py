"""``dynalease break KEY``: show the holder, ask (or --yes), break only that row, audit it."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Callable

from support.cli_runner import CLI, Result, cli_env

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease.admin import read_lock_row

#: Generous: two cores shared by several test runs.
BOUND_S = 30.0


def test_yes_breaks_the_held_row_and_prints_one_audit_line(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    guard = SyncDistributedLock(client, table=lock_table, key="job", metadata={"ticket": "OPS-1"})
    guard.__enter__()
    result = dynalease("break", "job", "--table", lock_table, "--endpoint", endpoint, "--yes")
    assert result.code == 0, result.err
    assert f"holder: {os.uname().nodename} pid {os.getpid()}" in result.out
    audit = [line for line in result.out.splitlines() if line.startswith("dynalease break:")]
    assert len(audit) == 1
    assert f"broke lock 'job' in table {lock_table}, held by owner {guard.owner}" in audit[0]
    assert "'ticket': 'OPS-1'" in audit[0]
    assert read_lock_row(client, lock_table, "job") is None
    assert guard.wait_lost(BOUND_S)


def test_without_a_terminal_it_asks_for_yes_and_breaks_nothing(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    with SyncDistributedLock(client, table=lock_table, key="job"):
        result = dynalease("break", "job", "--table", lock_table, "--endpoint", endpoint)
        assert result.code == 2 and "pass --yes" in result.err
        assert read_lock_row(client, lock_table, "job") is not None


def test_nothing_to_break_is_exit_1(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str
) -> None:
    result = dynalease("break", "free", "--table", lock_table, "--endpoint", endpoint, "--yes")
    assert result.code == 1 and "nothing to break at 'free'" in result.err


def answered(endpoint: str, table: str, answer: str) -> tuple[int, str]:
    """``dynalease break job`` on a terminal, answering its question with ``answer``."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*CLI, "break", "job", "--table", table, "--endpoint", endpoint],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        text=True,
    )
    os.close(terminal)
    os.write(controller, answer.encode())
    out, _ = process.communicate(timeout=BOUND_S)
    os.close(controller)
    return process.returncode, out


def test_on_a_terminal_it_asks_and_only_yes_breaks(
    endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    guard = SyncDistributedLock(client, table=lock_table, key="job", lease_duration=30)
    guard.__enter__()
    code, out = answered(endpoint, lock_table, "n\n")
    assert code == 1 and "Break this lock? [y/N]" in out and "not broken" in out
    guard.raise_if_lost()
    code, out = answered(endpoint, lock_table, "y\n")
    assert code == 0 and "dynalease break:" in out
    assert read_lock_row(client, lock_table, "job") is None
