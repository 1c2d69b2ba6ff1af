"""The Managed Instances worker watch releases a worker's rows on "pid gone" only where
that pid names the worker.

Real parts: the recovery extension is its own process (registered with a local
Extensions API, on Managed Instances by ``AWS_LAMBDA_MAX_CONCURRENCY``), the workers are
lock holders with the journal on (tests/support/journal_holder.py), one of them in a PID
namespace of its own (``unshare --pid --fork``, which needs root or CAP_SYS_ADMIN), and
the rows are on the moto server. No test waits for a time: a row released by the watch
shows that it looked at every entry in the journal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dynalease_dev.lambda_api import Answer, ApiServer, registered
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease._engine import journal
from dynalease.constants import (
    ENV_EXTENSIONS_DIR,
    ENV_JOURNAL_DIR,
    ENV_MAX_CONCURRENCY,
    ENV_RUNTIME_API,
    ENV_TABLE,
    RECOVERY_EXTENSION,
)

pytestmark = pytest.mark.timeout(120)

HOLDER = str(Path(__file__).resolve().parents[1] / "support" / "journal_holder.py")
#: Room for a loaded machine: the watch looks every 0.25 s, a release is one request.
WITHIN_S = 30.0


def _unshare_pid() -> list[str]:
    """The command prefix that starts a process in a new PID namespace, or a skip."""
    command = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run([*command, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no new PID namespace here (needs root): {probe.stderr.decode()[-200:]}")
    return command


class _Extensions:
    """An Extensions API that registers the extension and never sends it an event."""

    def __init__(self) -> None:
        self._ended = threading.Event()
        self.server = ApiServer(self._answer)

    def _answer(self, method: str, path: str, headers: Any, body: bytes) -> Answer:
        if path.endswith("/register"):
            return registered("ext-1", handler="app.handler")
        if path.endswith("/event/next"):
            self._ended.wait()
            raise ConnectionAbortedError  # the sandbox went away
        return 200, {}, {}

    def close(self) -> None:
        self._ended.set()
        self.server.close()


@pytest.fixture
def sandbox(tmp_path: Path, endpoint: str) -> Iterator[dict[str, str]]:
    """The environment of one sandbox's processes: the Runtime API, the extension installed,
    the journal directory, static keys and the moto server for the extension's requests."""
    extensions = tmp_path / "extensions"
    extensions.mkdir()
    (extensions / RECOVERY_EXTENSION).write_text("")
    api = _Extensions()
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "DYNALEASE_", "PYTEST", "COV_"))
    }
    environment.update(
        {
            ENV_RUNTIME_API: api.server.address,
            ENV_EXTENSIONS_DIR: str(extensions),
            ENV_JOURNAL_DIR: str(tmp_path / "journal"),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
            "AWS_CONFIG_FILE": str(tmp_path / "absent-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "absent-credentials"),
        }
    )
    yield environment
    api.close()


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[Any]]]:
    made: list[subprocess.Popen[Any]] = []
    yield made
    for process in made:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def _hold(
    started: list[subprocess.Popen[Any]],
    sandbox: dict[str, str],
    endpoint: str,
    table: str,
    key: str,
    prefix: list[str] | None = None,
) -> tuple[subprocess.Popen[str], str, int]:
    """A holder of ``key`` (in a new PID namespace with ``prefix``): it, its owner, its pid."""
    holder = subprocess.Popen(
        [*(prefix or []), sys.executable, HOLDER, endpoint, table, key],
        env=sandbox,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    started.append(holder)
    assert holder.stdout is not None
    owner, pid = holder.stdout.readline().split()
    return holder, owner, int(pid)


def _owner(client: DynamoDBClient, table: str, key: str) -> str | None:
    row = client.sync_get_item(table, {"key": key}, consistent_read=True)
    return None if row is None else str(row["owner"])


def _released(client: DynamoDBClient, table: str, key: str) -> None:
    give_up = time.monotonic() + WITHIN_S
    while _owner(client, table, key) is not None:
        assert time.monotonic() < give_up, f"the watch left the row of {key}"
        time.sleep(0.05)


def test_a_worker_in_another_pid_namespace_is_left_to_its_lease_and_that_is_logged_once(
    sandbox: dict[str, str],
    started: list[subprocess.Popen[Any]],
    client: DynamoDBClient,
    endpoint: str,
    tmp_path: Path,
) -> None:
    unshare = _unshare_pid()
    table = fresh_lock_table(client, "watch-ns")
    log = tmp_path / "extension.log"
    with log.open("w") as output:
        extension = subprocess.Popen(
            [sys.executable, "-P", "-m", "dynalease._extension.recovery"],
            env={**sandbox, ENV_TABLE: table, ENV_MAX_CONCURRENCY: "2"},
            stderr=output,
        )
    started.append(extension)
    foreign, foreign_owner, foreign_pid = _hold(started, sandbox, endpoint, table, "far", unshare)
    assert foreign_pid != foreign.pid  # its pid is its namespace's, not this one's

    # A worker of the extension's own namespace is killed: its row goes at a look, and
    # that look judged the other worker's entry too, whose pid means nothing here.
    near, _, _ = _hold(started, sandbox, endpoint, table, "near-1")
    near.send_signal(signal.SIGKILL)
    _released(client, table, "near-1")
    assert foreign.poll() is None
    assert _owner(client, table, "far") == foreign_owner

    # Once the other worker is dead too, its row still waits out its lease: from here
    # its death cannot be told from life.
    foreign.send_signal(signal.SIGKILL)
    foreign.wait(10)
    near, _, _ = _hold(started, sandbox, endpoint, table, "near-2")
    near.send_signal(signal.SIGKILL)
    _released(client, table, "near-2")
    assert _owner(client, table, "far") == foreign_owner
    # The killed worker's entry goes just after its row (released, then removed): wait for
    # that, generously for a loaded machine; the foreign entry must stay.
    give_up = time.monotonic() + 30

    def left() -> list[str]:
        return [entry.owner for entry in journal.entries(sandbox[ENV_JOURNAL_DIR])]

    while left() != [foreign_owner]:
        assert foreign_owner in left(), "the foreign worker's entry was removed"
        assert time.monotonic() < give_up, f"entries left: {left()}"
        time.sleep(0.05)

    assert extension.poll() is None
    extension.kill()
    extension.wait(10)
    said = [line for line in log.read_text().splitlines() if "PID namespace" in line]
    assert len(said) == 1, log.read_text()
    here = journal.pid_namespace()
    assert here is not None and here in said[0]
    assert "lease" in said[0]
