"""SIGTERM in a container-like process: ``release_locks_on_sigterm`` unwinds its locks.

Each case is a real child process (tests/support/sigterm_child.py) holding 30 s
leases against the moto server; the test sends it SIGTERM, as ECS or Kubernetes
does when a task stops, and then reads the lock table. With the opt-in the rows are
released through the normal release path before the process ends by SIGTERM; without
it they stay until a contender has watched them for a whole lease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock
from dynalease.shutdown import Terminated, release_locks_on_sigterm

CHILD = Path(__file__).resolve().parents[1] / "support" / "sigterm_child.py"
READY_S = 60.0  # generous: two cores shared by many test processes


class Child:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []

    def wait_for(self, line: str) -> None:
        assert self.process.stdout is not None
        while True:
            got = self.process.stdout.readline()
            if not got:
                err = self.process.stderr.read() if self.process.stderr else ""
                pytest.fail(f"the child ended before printing {line!r}: {self.lines}\n{err}")
            self.lines.append(got.rstrip("\n"))
            if self.lines[-1] == line:
                return

    def terminate_and_wait(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=READY_S)
        self.lines += out.splitlines()
        self.stderr = err
        return self.process.returncode


@pytest.fixture
def start(endpoint: str) -> Iterator[object]:
    started: list[subprocess.Popen[str]] = []

    def run(mode: str, table: str, keys: list[str], *flags: str) -> Child:
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        process = subprocess.Popen(
            [sys.executable, str(CHILD), mode, endpoint, table, ",".join(keys), *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started.append(process)
        child = Child(process)
        child.wait_for("held")
        return child

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def rows(client: DynamoDBClient, table: str, keys: list[str]) -> dict[str, object]:
    return {key: item for key in keys if (item := client.sync_get_item(table, {"key": key}))}


def keys_for(case: str, count: int = 1) -> list[str]:
    return [f"{case}-{index}-{uuid.uuid4().hex[:6]}" for index in range(count)]


@pytest.mark.parametrize("mode", ["sync-with", "sync-decorated", "async-with"])
def test_sigterm_releases_the_lock_and_the_process_still_ends_by_sigterm(
    start: object, client: DynamoDBClient, mode: str
) -> None:
    table = fresh_lock_table(client, "sigterm")
    keys = keys_for(mode)
    child = start(mode, table, keys, "--opt-in")  # type: ignore[operator]
    assert set(rows(client, table, keys)) == set(keys)
    status = child.terminate_and_wait()
    assert status == -signal.SIGTERM, (status, child.lines, child.stderr)
    assert f"unwound {keys[0]}" in child.lines  # the locked block exited, then released
    assert rows(client, table, keys) == {}
    # A successor takes the key at once, with no wait at all.
    with SyncDistributedLock(client, table=table, key=keys[0], wait_timeout=0):
        pass


def test_every_task_holding_a_lock_is_cancelled_and_released(
    start: object, client: DynamoDBClient
) -> None:
    table = fresh_lock_table(client, "sigterm")
    keys = keys_for("tasks", 3)
    child = start("async-tasks", table, keys, "--opt-in")  # type: ignore[operator]
    assert len(rows(client, table, keys)) == 3
    assert child.terminate_and_wait() == -signal.SIGTERM, (child.lines, child.stderr)
    assert {f"unwound {key}" for key in keys} <= set(child.lines)
    assert rows(client, table, keys) == {}


def test_the_applications_own_handler_still_runs_and_then_decides(
    start: object, client: DynamoDBClient
) -> None:
    table = fresh_lock_table(client, "sigterm")
    keys = keys_for("app")
    child = start("sync-with", table, keys, "--app-handler", "--opt-in")  # type: ignore[operator]
    status = child.terminate_and_wait()
    # The app's handler ran and did not exit; Terminated unwound the block and, uncaught,
    # ended the program with 143, as a shell reports SIGTERM.
    assert "app handler ran" in child.lines
    assert status == 143, (status, child.lines, child.stderr)
    assert "Traceback" not in child.stderr
    assert rows(client, table, keys) == {}


def test_without_the_opt_in_the_row_stays_for_a_whole_lease(
    start: object, client: DynamoDBClient
) -> None:
    table = fresh_lock_table(client, "sigterm")
    keys = keys_for("plain")
    child = start("sync-with", table, keys)  # type: ignore[operator]
    assert child.terminate_and_wait() == -signal.SIGTERM
    assert f"unwound {keys[0]}" not in child.lines  # Python's default: no unwinding
    assert set(rows(client, table, keys)) == set(keys)


def test_a_lock_held_by_another_thread_is_left_alone_and_the_process_ends(
    start: object, client: DynamoDBClient
) -> None:
    # Its thread cannot be interrupted, so its work goes on: releasing would be unsafe.
    table = fresh_lock_table(client, "sigterm")
    keys = keys_for("thread")
    child = start("thread", table, keys, "--opt-in")  # type: ignore[operator]
    assert child.terminate_and_wait() == -signal.SIGTERM
    assert set(rows(client, table, keys)) == set(keys)


def test_with_no_lock_held_sigterm_does_what_it_did_before(
    start: object, client: DynamoDBClient
) -> None:
    table = fresh_lock_table(client, "sigterm")
    child = start("none", table, ["unused"], "--opt-in")  # type: ignore[operator]
    assert child.terminate_and_wait() == -signal.SIGTERM
    assert "finished" not in child.lines


def test_terminated_is_a_quiet_exit_that_except_exception_does_not_swallow() -> None:
    error = Terminated()
    assert isinstance(error, SystemExit) and not isinstance(error, Exception)
    assert error.code == 143


def test_the_opt_in_must_come_from_the_main_thread() -> None:
    import threading

    failures: list[BaseException] = []

    def call() -> None:
        try:
            release_locks_on_sigterm()
        except RuntimeError as error:
            failures.append(error)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert failures and "main thread" in str(failures[0])
