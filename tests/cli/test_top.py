"""``dynalease top``: plain refreshes on a pipe, a live view on a terminal (a pty).

Both run ``top`` as its own process against the moto server; every wait is bounded
generously (30 s) for a loaded 2-core machine, and nothing asserts a time.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

from support.cli_runner import CLI, cli_env

from dynalease import DynamoDBClient, SyncDistributedLock

BOUND_S = 30.0


def top(endpoint: str, table: str, *options: str) -> list[str]:
    return [*CLI, "top", "--table", table, "--endpoint", endpoint, *options]


def test_on_a_pipe_each_refresh_is_plain_text_with_renewals_and_releases(
    endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    staying = SyncDistributedLock(client, table=lock_table, key="staying", lease_duration=1.5)
    leaving = SyncDistributedLock(client, table=lock_table, key="leaving")
    with staying:
        leaving.__enter__()
        process = subprocess.Popen(
            top(endpoint, lock_table, "--interval", "0.5", "--for", "60", "--sort", "churn"),
            stdout=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + BOUND_S
        while not any(line.startswith("key ") for line in lines):
            assert time.monotonic() < deadline, "no refresh was printed"
            lines.append(process.stdout.readline())
        leaving.__exit__(None, None, None)
        while not any("1 released" in line for line in lines) or not any(
            re.match(r"staying .* s +[1-9][0-9]* +0 +held at start", line) for line in lines
        ):
            assert time.monotonic() < deadline, f"no release or renewal shown: {lines[-6:]}"
            lines.append(process.stdout.readline())
        process.terminate()
        process.wait(BOUND_S)
    text = "".join(lines)
    assert "\x1b[" not in text  # no terminal codes on a pipe
    assert "RCU" in text and "this refresh read" in text


def test_on_a_terminal_it_draws_a_live_view(
    endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    with SyncDistributedLock(client, table=lock_table, key="on-screen"):
        controller, terminal = pty.openpty()
        process = subprocess.Popen(
            top(endpoint, lock_table, "--interval", "0.5", "--for", "2"),
            stdout=terminal,
            stderr=terminal,
            env=cli_env(TERM="xterm-256color", COLUMNS="200"),
        )
        os.close(terminal)
        seen = b""
        deadline = time.monotonic() + BOUND_S
        while process.poll() is None or select.select([controller], [], [], 0)[0]:
            assert time.monotonic() < deadline, "top did not end after --for"
            if select.select([controller], [], [], 0.2)[0]:
                try:
                    seen += os.read(controller, 65536)
                except OSError:  # the terminal closed with the process
                    break
        os.close(controller)
    assert process.wait(BOUND_S) == 0
    assert b"on-screen" in seen and b"\x1b[" in seen  # drawn with terminal codes
