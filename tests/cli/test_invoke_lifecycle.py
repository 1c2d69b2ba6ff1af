"""``dynalease invoke --lifecycle``: a handler under the local control plane, as a user runs it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_runner import Result, cli_env, spawn_cli

HANDLER = """
import os, signal, time
from dynalease.middleware import lock_handler

@lock_handler(key="customer:{customer_id}", lease_duration=3, wait_timeout=0.5)
def handler(event, context):
    if event.get("crash"):
        os.kill(os.getpid(), signal.SIGKILL)  # the runtime dies holding the lock
    time.sleep(event["work_s"])
    return {"customer_id": event["customer_id"]}
"""
#: The first invocation outlives the 3 s timeout, or its runtime dies while it holds.
TIMES_OUT = {"customer_id": "c-1", "work_s": 30}
DIES = {"customer_id": "c-1", "work_s": 0, "crash": True}


@pytest.fixture
def invoke_twice(tmp_path: Path, endpoint: str, lock_table: str) -> Callable[..., Result]:
    """``invoke --lifecycle`` on two events for one customer, the first of them ``first``
    (:data:`TIMES_OUT` or :data:`DIES`); the options given are added to the common ones."""
    handler = tmp_path / "holder.py"
    handler.write_text(HANDLER)
    events = tmp_path / "events.json"

    def invoke(first: dict[str, object], *options: str) -> Result:
        events.write_text(json.dumps([first, {"customer_id": "c-1", "work_s": 0}]))
        return spawn_cli(
            "invoke",
            "--lifecycle",
            f"{handler}:handler",
            str(events),
            "--timeout",
            "3",
            "--table",
            lock_table,
            *options,
            env=cli_env(AWS_ENDPOINT_URL_DYNAMODB=endpoint),
        )

    return invoke


def test_a_timeout_is_recovered_and_the_next_invocation_gets_the_lock(
    invoke_twice: Callable[..., Result],
) -> None:
    result = invoke_twice(TIMES_OUT)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[1].startswith("invocation 1: timeout after 3.0")
    assert "killed at the deadline; SHUTDOWN (timeout) went to the extension" in result.out
    # The guard itself deletes its row as the deadline passes (no lock outlives its
    # invocation); when the kill comes first, the extension releases it.
    assert any(line.startswith("invocation 2: ok") for line in lines)


def test_a_crash_is_recovered_by_the_extension(invoke_twice: Callable[..., Result]) -> None:
    result = invoke_twice(DIES)
    assert result.code == 0, result.err
    assert "died; SHUTDOWN (failure) went to the extension" in result.out
    assert "[dynalease-recovery] dynalease-recovery: released lock key_hash=" in result.out
    assert any(line.startswith("invocation 2: ok") for line in result.out.splitlines())


def test_without_the_extension_the_next_invocation_finds_the_row(
    invoke_twice: Callable[..., Result],
) -> None:
    result = invoke_twice(DIES, "--no-extension")
    assert result.code == 1
    assert "no extension to tell" in result.out
    assert '"errorType": "LockNotAcquired"' in result.out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = spawn_cli("invoke", "--lifecycle", str(tmp_path / "none.py:handler"), "e.json")
    assert result.code == 2
    assert "FILE.py:FUNCTION of an existing file" in result.err
