"""The recovery extension given a journal someone else wrote into.

Real parts: the extension runs as its own process (as the layer's launcher
starts it) against a scripted Extensions API, the rows live on the moto
server, and the real dead writer is a process that took its lock, wrote its
entry and was killed with SIGKILL. Beside its entry lie the crafted ones of
the security review: a foreign endpoint and Region, an item of another table
that is not a lock row, a live fenced row claimed as unfenced, a FIFO and a
symlink to an endless device. Only the dead writer's row may go, and no
request may go anywhere but the environment's endpoint: a socket listening
where the crafted entry points must never see a connection. Nor in a table
the function is not configured with, even a lock table the role may write.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dynalease_dev.lambda_api import Answer, ApiServer, read_json, registered
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._extension import recovery

HOLDER = """
import sys, time
from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine.journal import Journal
endpoint, table, key, directory = sys.argv[1:]
client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
lock = SyncDistributedLock(client, table=table, key=key, lease_duration=60)
lock.__enter__()
Journal(directory).record(table, key, lock.owner)
print(lock.owner, flush=True)
time.sleep(600)
"""


class Shutdown:
    """An Extensions API that registers the extension and sends one SHUTDOWN (timeout)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.server = ApiServer(self._answer)

    def _answer(self, method: str, path: str, headers: Any, body: bytes) -> Answer:
        read_json(body)
        if path.endswith("/register"):
            return registered("ext-1", handler="app.handler")
        if path.endswith("/event/next"):
            deadline_ms = round((time.time() + self.window_s) * 1000)
            event = {
                "eventType": "SHUTDOWN",
                "shutdownReason": "timeout",
                "deadlineMs": deadline_ms,
            }
            return 200, {}, event
        return 200, {}, {}


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket where a crafted entry sends requests; it must never see a connection."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def _crafted(directory: Path, pid: int, **fields: Any) -> str:
    owner = fields.setdefault("owner", str(uuid.uuid4()))
    body = {"format": 1, "pid": pid, "started": None, **fields}
    (directory / f"{owner}.json").write_text(json.dumps(body))
    return str(owner)


def test_only_the_dead_writers_row_is_released_and_only_through_the_environment(
    aws_env: str,
    other_client: DynamoDBClient,
    lock_table: str,
    listener: socket.socket,
    tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    directory.mkdir(mode=0o700)
    documents = f"Documents-{uuid.uuid4().hex[:8]}"
    other_client.sync_create_table(documents, partition_key=("key", "S"), wait=True)

    # The real dead writer: took its lock, wrote its entry, killed holding it.
    real_key = f"real-{uuid.uuid4().hex[:6]}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, aws_env, lock_table, real_key, str(directory)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    real_owner = holder.stdout.readline().strip()
    holder.send_signal(signal.SIGKILL)
    holder.wait(30)
    assert other_client.sync_get_item(lock_table, {"key": real_key}, consistent_read=True)

    dead = _dead_pid()
    attacker = f"http://127.0.0.1:{listener.getsockname()[1]}"
    # A foreign endpoint and Region (the review's session-token capture).
    _crafted(
        directory, dead, table=lock_table, key="anything", region="eu-west-1", endpoint_url=attacker
    )
    # Items of another table that are not lock rows, with the owner the entries name.
    for index, fencing in enumerate((False, True)):
        key = f"doc-{index}"
        owner = _crafted(directory, dead, table=documents, key=key, fencing=fencing)
        other_client.sync_put_item(documents, {"key": key, "owner": owner, "body": "contract"})
    documents_before = _items(other_client, documents, ["doc-0", "doc-1"])
    # A FIFO (read blocking, it held recovery until the watchdog) and an endless device.
    os.mkfifo(directory / f"{uuid.uuid4()}.json")
    (directory / f"{uuid.uuid4()}.json").symlink_to("/dev/zero")

    fenced_key = f"fenced-{uuid.uuid4().hex[:6]}"
    with SyncDistributedLock(
        other_client, table=lock_table, key=fenced_key, lease_duration=60, fencing=True
    ) as fenced:
        # A live fenced row claimed as unfenced: it used to be deleted, counter and all.
        _crafted(directory, dead, table=lock_table, key=fenced_key, owner=fenced.owner)
        row_before = other_client.sync_get_item(
            lock_table, {"key": fenced_key}, consistent_read=True
        )

        # The longest window the extension honours, for a loaded machine: the watchdog
        # ends the extension just before it, so only a recovery that hangs reaches it.
        api = Shutdown(window_s=recovery.MAX_WINDOW_S)
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))},
            "AWS_LAMBDA_RUNTIME_API": api.server.address,
            "DYNALEASE_JOURNAL_DIR": str(directory),
            "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEXAMPLE-SESSION-TOKEN",
        }
        try:
            done = subprocess.run(
                [sys.executable, "-P", "-m", "dynalease._extension.recovery"],
                env=environment,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            api.server.close()
        row_after = other_client.sync_get_item(
            lock_table, {"key": fenced_key}, consistent_read=True
        )
        assert _items(other_client, lock_table, ["anything"]) == [None]

    log = done.stderr
    # Not 1, the watchdog's status: the FIFO did not hold the recovery until it.
    assert done.returncode == 0, log
    # The dead writer's row is gone, and its entry with it.
    assert other_client.sync_get_item(lock_table, {"key": real_key}, consistent_read=True) is None
    assert not (directory / f"{real_owner}.json").exists()
    # Nothing else changed.
    assert row_after == row_before and row_before is not None
    assert row_before["owner"] == fenced.owner and row_before["fence"] == 1
    assert _items(other_client, documents, ["doc-0", "doc-1"]) == documents_before
    assert all(item is not None and item["body"] == "contract" for item in documents_before)
    # No request went where the crafted entry said.
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert log.count("released lock") == 1, log
    assert "1 released" in log and "not a regular file" in log and "cannot be opened" in log, log


def _items(client: DynamoDBClient, table: str, keys: list[str]) -> list[Any]:
    return [client.sync_get_item(table, {"key": key}, consistent_read=True) for key in keys]


def test_an_entry_naming_a_table_the_function_is_not_configured_with_is_skipped(
    aws_env: str,
    other_client: DynamoDBClient,
    lock_table: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The review's N3: another service's live lock in a second table, which the role may
    # write, named by an entry with that holder's owner and a dead pid.
    foreign = fresh_lock_table(other_client, "other-locks")
    listed = fresh_lock_table(other_client, "listed-locks")
    monkeypatch.setenv("DYNALEASE_RECOVERY_TABLES", f" {listed} ,")
    directory = tmp_path / "journal"
    directory.mkdir(mode=0o700)
    dead = _dead_pid()
    abandoned = {}  # rows of a dead writer in the function's two tables
    for table in (lock_table, listed):
        owner = str(uuid.uuid4())
        other_client.sync_put_item(
            table,
            {"key": "job", "owner": owner, "version": "v1", "lease_ms": 60_000, "protocol": 1},
        )
        abandoned[table] = _crafted(directory, dead, table=table, key="job", owner=owner)

    with SyncDistributedLock(other_client, table=foreign, key="billing", lease_duration=60) as live:
        _crafted(directory, dead, table=foreign, key="billing", owner=live.owner)
        with caplog.at_level("INFO", logger="dynalease"):
            outcome = recovery.recover(str(directory), time.time() + recovery.MAX_WINDOW_S)
        row = other_client.sync_get_item(foreign, {"key": "billing"}, consistent_read=True)
        assert row is not None and row["owner"] == live.owner
        live.raise_if_lost()

    assert sorted(entry.table for entry in outcome.released) == sorted(abandoned)
    assert outcome.failed == [] and outcome.not_ours == []
    for table in abandoned:
        assert other_client.sync_get_item(table, {"key": "job"}, consistent_read=True) is None
    skipped = [r.getMessage() for r in caplog.records if "skipping journal entry" in r.getMessage()]
    assert len(skipped) == 1, skipped
    assert f"table {foreign!r} is not one of this function's lock tables" in skipped[0]
    assert "add it to DYNALEASE_RECOVERY_TABLES" in skipped[0]
    assert f"in table {foreign!r}" not in caplog.text  # nothing was done there
