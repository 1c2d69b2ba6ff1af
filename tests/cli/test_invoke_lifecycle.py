"""``dynalease-dev invoke --lifecycle``: a handler under the local control plane, as a user
runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_runner import Result, cli_env, spawn_dev_cli

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
        return spawn_dev_cli(
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
    result = spawn_dev_cli("invoke", "--lifecycle", str(tmp_path / "none.py:handler"), "e.json")
    assert result.code == 2
    assert "FILE.py:FUNCTION of an existing file" in result.err


# --- Lambda Managed Instances (--max-concurrency) ---------------------------------------

AT_ONCE = """
import os, time
from dynalease.middleware import lock_handler

@lock_handler(key="customer:{customer_id}", lease_duration=3, wait_timeout=5)
def handler(event, context):
    started = time.time()
    time.sleep(event["work_s"])
    return {"customer_id": event["customer_id"], "pid": os.getpid(), "started": started,
            "ended": time.time()}
"""


def _python313() -> str:
    """A Python 3.13 with awslambdaric (as the Managed Instances suite finds it), or skip."""
    root = Path(__file__).resolve().parents[2]
    candidate = os.environ.get("DYNALEASE_PYTHON313") or str(root / ".venv-3.13/bin/python")
    probe = [candidate, "-c", "import awslambdaric"]
    if not (
        Path(candidate).exists()
        and subprocess.run(probe, capture_output=True, check=False).returncode == 0
    ):
        pytest.skip(f"no Python 3.13 with awslambdaric at {candidate} (make builds .venv-3.13)")
    return candidate


def test_managed_instances_serve_a_list_of_events_at_once_in_one_environment(
    tmp_path: Path, endpoint: str, lock_table: str
) -> None:
    handler = tmp_path / "worker.py"
    handler.write_text(AT_ONCE)
    events = tmp_path / "events.json"
    events.write_text(json.dumps([{"customer_id": f"c-{n}", "work_s": 3} for n in range(2)]))
    result = spawn_dev_cli(
        "invoke",
        "--lifecycle",
        f"{handler}:handler",
        str(events),
        "--timeout",
        "20",
        "--table",
        lock_table,
        "--max-concurrency",
        "2",
        "--python",
        _python313(),
        env=cli_env(AWS_ENDPOINT_URL_DYNAMODB=endpoint),
    )
    assert result.code == 0, result.out + result.err
    assert "Lambda Managed Instances, up to 2 invocations at once" in result.out
    lines = [line for line in result.out.splitlines() if line.startswith("invocation ")]
    assert [line.split(":")[1].split()[0] for line in lines] == ["ok", "ok"]
    first, second = (json.loads(line.split(": ", 2)[2]) for line in lines)
    assert [first["customer_id"], second["customer_id"]] == ["c-0", "c-1"]
    assert first["pid"] != second["pid"]  # two of the runtime's workers
    assert first["started"] < second["ended"] and second["started"] < first["ended"]  # at once


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--max-concurrency", "0"], "--max-concurrency must be 1 or more invocations at once"),
        (["--python", "/nonexistent/python3"], "--python '/nonexistent/python3' cannot be run"),
        (["--max-concurrency", "2", "--python", sys.executable], "needs Python 3.13 or later"),
    ],
    ids=["zero", "no-interpreter", "old-python"],
)
def test_a_managed_instances_run_that_cannot_start_is_one_line_and_exit_2(
    tmp_path: Path, options: list[str], said: str
) -> None:
    if "needs Python 3.13" in said and sys.version_info >= (3, 13):
        pytest.skip("this interpreter is new enough for the multi-concurrent mode")
    handler = tmp_path / "worker.py"
    handler.write_text(AT_ONCE)
    (tmp_path / "e.json").write_text("{}")
    result = spawn_dev_cli(
        "invoke", "--lifecycle", f"{handler}:handler", str(tmp_path / "e.json"), *options
    )
    assert result.code == 2
    assert said in result.err and "Traceback" not in result.err
