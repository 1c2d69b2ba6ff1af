"""The journal a guard keeps for the recovery extension: written before the first
request, removed only once no row of ours can be left, and absent when unused.

The leases run on the test's own loop (``lease_harness``); a transport wrapper
looks at the journal directory the moment each request is sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.lease_harness import BlockingFaultyTransport, Harness, hang, recording_client, run

from dynalease import DynamoDBClient
from dynalease._engine import journal
from dynalease._engine.journal import Journal, entries, writer_alive
from dynalease._engine.store import LoopTransport
from dynalease.constants import ENV_EXTENSIONS_DIR, ENV_JOURNAL_DIR, ENV_RUNTIME_API
from dynalease.exceptions import LockNotAcquired, LockReleaseError
from dynalease.lock import SyncDistributedLock


class Peeking(LoopTransport):
    """A transport that lists the journal directory as each request is sent."""

    def __init__(self, inner: Any, directory: Path) -> None:
        self.inner = inner
        self.directory = directory
        self.seen: list[tuple[str, list[str]]] = []
        #: The keys the journal named as each request was sent.
        self.keys: list[tuple[str, list[str]]] = []

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return dict(self.inner.call(operation, params))

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.seen.append((operation, sorted(os.listdir(self.directory))))
        self.keys.append((operation, [e.key for e in entries(str(self.directory))]))
        return dict(await self.inner.send(operation, params))


def _journaled(h: Harness, directory: Path, **options: Any) -> tuple[Any, Peeking]:
    lease = h.lease(**options)
    peeking = Peeking(h.transport, directory)
    lease.store.transport = peeking
    lease.journal = Journal(str(directory), region="eu-west-1", endpoint_url="http://x:1")
    return lease, peeking


def test_an_entry_exists_before_the_first_request_and_is_gone_after_release(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        lease, peeking = _journaled(h, tmp_path)
        await lease.acquire()
        name = f"{lease.owner}.json"
        assert peeking.seen[0] == ("PutItem", [name])
        body = json.loads((tmp_path / name).read_text())
        assert body["table"] == "locks" and body["key"] == "k" and body["owner"] == lease.owner
        assert body["pid"] == os.getpid() and body["region"] == "eu-west-1"
        assert body["endpoint_url"] == "http://x:1"
        await lease.release()
        assert os.listdir(tmp_path) == []

    run(scenario)


def test_a_guard_that_never_got_the_lock_leaves_no_entry(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        h.write_lock("someone", "v1", 30_000)
        lease, _ = _journaled(h, tmp_path, wait=0)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire())
        assert os.listdir(tmp_path) == []

    run(scenario)


def test_an_unconfirmed_release_keeps_the_entry_for_the_extension(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        lease, _ = _journaled(h, tmp_path, lease=5.0)
        await lease.acquire()
        h.transport.always["DeleteItem"] = hang("DeleteItem", commit=False)
        h.transport.always["GetItem"] = hang("GetItem")
        with pytest.raises(LockReleaseError):
            await h.clock.run(lease.release())
        assert [e.owner for e in entries(str(tmp_path))] == [lease.owner]

    run(scenario)


def test_a_create_left_unanswered_keeps_the_entry(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        lease, _ = _journaled(h, tmp_path, lease=5.0, wait=0)
        h.transport.faults.append(hang("PutItem"))  # commits, never answers
        h.transport.always["GetItem"] = hang("GetItem")
        h.transport.always["DeleteItem"] = hang("DeleteItem", commit=False)
        with pytest.raises(LockNotAcquired):
            await h.clock.run(lease.acquire())
        assert h.owner_of() == lease.owner  # the row exists: the entry must stay
        assert [e.owner for e in entries(str(tmp_path))] == [lease.owner]

    run(scenario)


def test_a_lost_guard_forgets_its_entry_once_the_release_finds_another_owner(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        lease, _ = _journaled(h, tmp_path, lease=5.0)
        await lease.acquire()
        h.write_lock("thief", "v9", 5_000)
        with pytest.raises(Exception, match="no longer owned"):
            await lease.release()
        assert os.listdir(tmp_path) == []
        assert h.owner_of() == "thief"

    run(scenario)


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A process environment that looks like a sandbox with the extension installed."""
    extensions = tmp_path / "extensions"
    extensions.mkdir()
    (extensions / "dynalease-recovery").write_text("#!/bin/sh\n")
    monkeypatch.setenv(ENV_RUNTIME_API, "127.0.0.1:9")
    monkeypatch.setenv(ENV_EXTENSIONS_DIR, str(extensions))
    monkeypatch.setenv(ENV_JOURNAL_DIR, str(tmp_path / "journal"))
    monkeypatch.setattr(journal, "_checked", None)
    return tmp_path / "journal"


def test_a_sync_guard_on_the_callers_own_thread_journals_too(sandbox: Path) -> None:
    harness = Harness(blocking=True)
    transport = harness.transport
    assert isinstance(transport, BlockingFaultyTransport)
    client = DynamoDBClient.__new__(DynamoDBClient)
    client._setup(transport, transport, region="memory", endpoint_url=None)
    seen: list[list[str]] = []
    original = transport.send_blocking

    def peek(*args: Any, **kwargs: Any) -> Any:
        seen.append(sorted(os.listdir(sandbox)))
        return original(*args, **kwargs)

    transport.send_blocking = peek  # type: ignore[method-assign]
    with SyncDistributedLock(client, table="locks", key="k") as guard:
        owner = guard.owner
    assert seen[0] == [f"{owner}.json"]
    assert os.listdir(sandbox) == []


def test_the_check_needs_both_the_runtime_api_and_the_extension(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert journal.enabled()
    monkeypatch.setattr(journal, "_checked", None)
    monkeypatch.delenv(ENV_RUNTIME_API)
    assert not journal.enabled()
    monkeypatch.setenv(ENV_RUNTIME_API, "127.0.0.1:9")
    monkeypatch.setattr(journal, "_checked", None)
    os.unlink(sandbox.parent / "extensions" / "dynalease-recovery")
    assert not journal.enabled()
    assert journal.process_journal(region=None, endpoint_url=None) is None


def test_without_the_extension_a_guard_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_RUNTIME_API, "127.0.0.1:9")
    monkeypatch.setenv(ENV_EXTENSIONS_DIR, str(tmp_path / "none"))
    monkeypatch.setenv(ENV_JOURNAL_DIR, str(tmp_path / "journal"))
    monkeypatch.setattr(journal, "_checked", None)
    client, _ = recording_client()
    assert client._journal is None
    with SyncDistributedLock(client, table="locks", key="k"):
        pass
    assert not (tmp_path / "journal").exists()


def test_the_answer_is_read_once_per_process(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert journal.enabled()
    monkeypatch.delenv(ENV_RUNTIME_API)
    assert journal.enabled()  # cached: one check per process


def test_writer_alive_checks_the_process_table_and_its_start_time() -> None:
    me = os.getpid()
    assert writer_alive(me, journal.start_time(me))
    assert writer_alive(me, None)
    assert not writer_alive(me, "1")  # the pid now belongs to another process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not writer_alive(child.pid, None)


def test_entries_skips_temporary_foreign_and_broken_files(tmp_path: Path) -> None:
    Journal(str(tmp_path)).record("locks", "k", "o-1")
    (tmp_path / "o-2.json.tmp").write_text("{")
    (tmp_path / "o-3.json").write_text("not json")
    (tmp_path / "o-4.json").write_text(json.dumps({"format": 99, "table": "t", "key": "k"}))
    (tmp_path / "notes.txt").write_text("x")
    assert [(e.table, e.key, e.owner) for e in entries(str(tmp_path))] == [("locks", "k", "o-1")]
    assert list(entries(str(tmp_path / "missing"))) == []


def test_a_journal_that_cannot_write_warns_once_and_the_lock_still_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")

    async def scenario(h: Harness) -> None:
        lease = h.lease()
        lease.journal = Journal(str(blocker / "journal"))
        await lease.acquire()
        await lease.release()
        second = h.lease()
        second.journal = lease.journal
        await second.acquire()
        await second.release()

    with caplog.at_level("WARNING", logger="dynalease"):
        run(scenario)
    assert sum("journal entry" in r.getMessage() for r in caplog.records) == 1


def test_a_semaphore_guard_journals_the_permit_row_before_each_write_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dynalease._engine import permits
    from dynalease.keys import permit_keys

    monkeypatch.setattr(permits.random, "randrange", lambda n: 0)  # permit 1 first
    keys = permit_keys("k", 3)

    async def scenario(h: Harness) -> None:
        for index, key in enumerate(keys[:2]):
            h.write_lock(f"other-{index}", f"v-{index}", 30_000, key=key)
        lease = h.permit_lease()
        peeking = Peeking(h.transport, tmp_path)
        lease.store.transport = peeking
        lease.journal = Journal(str(tmp_path))
        await lease.acquire()
        assert lease.key == keys[2]
        # Each create went out with the entry already naming its row.
        assert peeking.keys == [
            ("PutItem", [keys[0]]),
            ("BatchGetItem", [keys[0]]),
            ("PutItem", [keys[2]]),
        ]
        await lease.release()
        assert os.listdir(tmp_path) == []

    run(scenario)
