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
from support.lease_harness import (
    BlockingFaultyTransport,
    Harness,
    bounded_on,
    hang,
    recording_client,
    run,
)
from support.memory import ScriptedTransport

from dynalease import DynamoDBClient
from dynalease._engine import journal, journal_switch
from dynalease._engine.journal import Journal, entries, writer_alive
from dynalease._engine.store import Request
from dynalease.constants import ENV_EXTENSIONS_DIR, ENV_JOURNAL_DIR, ENV_RUNTIME_API
from dynalease.exceptions import LockLost, LockNotAcquired, LockReleaseError
from dynalease.lock import SyncDistributedLock


class Peeking(ScriptedTransport):
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

    async def handle_async(self, request: Request) -> dict[str, Any]:
        answer = self.send(request.operation, request.params)
        return await bounded_on(self.inner.clock, answer, request.timeout, request.on_late)


def _journaled(h: Harness, directory: Path, **options: Any) -> tuple[Any, Peeking]:
    lease = h.lease(**options, journal=Journal(str(directory)))
    peeking = Peeking(h.transport, directory)
    lease.store.transport = peeking
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
        assert body["pid"] == os.getpid()
        # Where requests go is never written: the extension uses its own environment.
        assert "region" not in body and "endpoint_url" not in body
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
        with pytest.raises(LockLost, match="no longer owned"):
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
    monkeypatch.setattr(journal_switch, "_checked", None)
    return tmp_path / "journal"


def test_a_sync_guard_on_the_callers_own_thread_journals_too(sandbox: Path) -> None:
    harness = Harness(blocking=True)
    transport = harness.transport
    assert isinstance(transport, BlockingFaultyTransport)
    client = DynamoDBClient.__new__(DynamoDBClient)
    client._setup(transport, transport, region="memory", endpoint_url=None)
    seen: list[list[str]] = []
    original = transport.handle

    def peek(*args: Any, **kwargs: Any) -> Any:
        seen.append(sorted(os.listdir(sandbox)))
        return original(*args, **kwargs)

    transport.handle = peek  # type: ignore[method-assign]
    with SyncDistributedLock(client, table="locks", key="k") as guard:
        owner = guard.owner
    assert seen[0] == [f"{owner}.json"]
    assert os.listdir(sandbox) == []


def test_the_check_needs_both_the_runtime_api_and_the_extension(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert journal_switch.enabled()
    monkeypatch.setattr(journal_switch, "_checked", None)
    monkeypatch.delenv(ENV_RUNTIME_API)
    assert not journal_switch.enabled()
    monkeypatch.setenv(ENV_RUNTIME_API, "127.0.0.1:9")
    monkeypatch.setattr(journal_switch, "_checked", None)
    os.unlink(sandbox.parent / "extensions" / "dynalease-recovery")
    assert not journal_switch.enabled()
    assert journal_switch.process_journal() is None


def test_without_the_extension_a_guard_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_RUNTIME_API, "127.0.0.1:9")
    monkeypatch.setenv(ENV_EXTENSIONS_DIR, str(tmp_path / "none"))
    monkeypatch.setenv(ENV_JOURNAL_DIR, str(tmp_path / "journal"))
    monkeypatch.setattr(journal_switch, "_checked", None)
    client, _ = recording_client()
    assert client._journal is None
    with SyncDistributedLock(client, table="locks", key="k"):
        pass
    assert not (tmp_path / "journal").exists()


def test_the_answer_is_read_once_per_process(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert journal_switch.enabled()
    monkeypatch.delenv(ENV_RUNTIME_API)
    assert journal_switch.enabled()  # cached: one check per process


def test_writer_alive_checks_the_process_table_and_its_start_time() -> None:
    me = os.getpid()
    assert writer_alive(me, journal.start_time(me))
    assert writer_alive(me, None)
    assert not writer_alive(me, "1")  # the pid now belongs to another process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not writer_alive(child.pid, None)


OWNER = "0b1e0e5e-aaaa-4bbb-8ccc-000000000001"


def _owner(n: int) -> str:
    return f"0b1e0e5e-aaaa-4bbb-8ccc-{n:012d}"


def _write_entry(directory: Path, name: str | None = None, **fields: Any) -> Path:
    body = {"format": 1, "table": "locks", "key": "k", "owner": OWNER, "pid": 999_999_999}
    body.update(fields)
    path = directory / (name or f"{body['owner']}.json")
    path.write_text(json.dumps(body))
    return path


def test_entries_skips_temporary_foreign_and_broken_files(tmp_path: Path) -> None:
    Journal(str(tmp_path)).record("locks", "k", _owner(1))
    (tmp_path / f"{_owner(2)}.json.tmp").write_text("{")
    (tmp_path / f"{_owner(3)}.json").write_text("not json")
    (tmp_path / f"{_owner(4)}.json").write_text(json.dumps({"format": 99, "table": "t"}))
    (tmp_path / "notes.txt").write_text("x")
    assert [(e.table, e.key, e.owner) for e in entries(str(tmp_path))] == [
        ("locks", "k", _owner(1))
    ]
    assert list(entries(str(tmp_path / "missing"))) == []


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"owner": "x"}, "owner is not an owner token"),
        ({"owner": OWNER.upper()}, "owner is not an owner token"),
        ({"owner": ["x"]}, "owner is not an owner token"),
        ({"table": "Documents\n"}, "table is not a DynamoDB table name"),
        ({"table": "../locks"}, "table is not a DynamoDB table name"),
        ({"table": 7}, "table is not a DynamoDB table name"),
        ({"key": ""}, "key is not text"),
        ({"key": "a" * 2049}, "key is not text"),
        ({"key": "\ud800"}, "key is not text"),
        ({"key": ["k"]}, "key is not text"),
        ({"pid": "1"}, "pid is not a process id"),
        ({"pid": True}, "pid is not a process id"),
        ({"pid": 0}, "pid is not a process id"),
        ({"started": 5}, "started is not a process start time"),
        ({"started": "1 2"}, "started is not a process start time"),
        ({"fencing": "false"}, "fencing is not true or false"),
        ({"pidns": "net:[4026531840]"}, "pidns is not a PID namespace"),
        ({"pidns": 4026531836}, "pidns is not a PID namespace"),
        ({"format": True}, "format is not 1"),
        ({"keys": "k"}, "keys is not a list"),
        ({"keys": []}, "keys is not a list"),
        ({"keys": ["other", "k"]}, "keys is not a list of 1 to 100 keys that starts with key"),
        ({"keys": ["k", *(f"x{n}" for n in range(100))]}, "keys is not a list"),
        ({"keys": ["k", "x", "x"]}, "keys holds a repeat"),
        ({"keys": ["k", 5]}, "keys holds a repeat or something other than a key"),
        ({"keys": ["k", ""]}, "keys holds a repeat or something other than a key"),
    ],
)
def test_every_field_of_an_entry_is_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fields: dict[str, Any], said: str
) -> None:
    name = f"{OWNER}.json" if "owner" in fields else None
    _write_entry(tmp_path, name, **fields)
    good = _write_entry(tmp_path, owner=_owner(9), key="k" * 2048, table="a.b_c-D")
    with caplog.at_level("WARNING", logger="dynalease"):
        found = list(entries(str(tmp_path)))
    assert [e.path for e in found] == [str(good)]  # the bad file costs only itself
    assert said in caplog.text


def test_a_multi_key_entry_names_every_row_and_an_older_entry_its_one_key(
    tmp_path: Path,
) -> None:
    keys = (
        "k",
        *(f"row-{n}" for n in range(99)),
    )
    Journal(str(tmp_path)).record("locks", "k", _owner(1), keys=keys)
    Journal(str(tmp_path)).record("locks", "single", _owner(2))
    _write_entry(tmp_path, owner=_owner(3), key="older")  # written before "keys" existed
    found = {entry.owner: entry.keys for entry in entries(str(tmp_path))}
    assert found == {_owner(1): keys, _owner(2): ("single",), _owner(3): ("older",)}


def test_an_entry_names_its_writer_s_pid_namespace_and_an_older_entry_none(
    tmp_path: Path,
) -> None:
    Journal(str(tmp_path)).record("locks", "k", _owner(1))
    _write_entry(tmp_path, owner=_owner(2))  # written before the namespace was recorded
    found = {entry.owner: entry.namespace for entry in entries(str(tmp_path))}
    here = journal.pid_namespace()
    assert here is not None and here.startswith("pid:[")
    assert found == {_owner(1): here, _owner(2): None}


def test_the_file_name_must_be_the_owner_s(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write_entry(tmp_path, f"{_owner(2)}.json")
    with caplog.at_level("WARNING", logger="dynalease"):
        assert list(entries(str(tmp_path))) == []
    assert "the file name is not its owner's" in caplog.text


def test_where_requests_go_is_never_read_from_an_entry(tmp_path: Path) -> None:
    _write_entry(tmp_path, region=["us-east-1"], endpoint_url="http://attacker.example:1")
    (entry,) = entries(str(tmp_path))
    assert not hasattr(entry, "region") and not hasattr(entry, "endpoint_url")


def test_a_skipped_file_s_name_cannot_forge_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forged = "x\ndynalease-recovery: released lock key_hash=0000 in table 'payments'"
    (tmp_path / f"{forged}.json").write_text("{}")
    with caplog.at_level("WARNING", logger="dynalease"):
        assert list(entries(str(tmp_path))) == []
    (line,) = [r.getMessage() for r in caplog.records]
    assert "\n" not in line and "\\n" in line


def test_fifos_symlinks_and_huge_files_are_skipped_without_blocking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    os.mkfifo(tmp_path / f"{_owner(1)}.json")  # opened blocking, this would hang
    (tmp_path / f"{_owner(2)}.json").symlink_to("/dev/zero")  # read whole: endless
    target = _write_entry(tmp_path, "target.txt", owner=_owner(3))
    (tmp_path / f"{_owner(3)}.json").symlink_to(target)  # a valid entry, but through a link
    (tmp_path / f"{_owner(4)}.json").write_text(" " * (journal.MAX_ENTRY_BYTES + 1))
    (tmp_path / f"{_owner(5)}.json").mkdir()
    good = _write_entry(tmp_path, owner=_owner(6))
    with caplog.at_level("WARNING", logger="dynalease"):
        assert [e.path for e in entries(str(tmp_path))] == [str(good)]
    assert caplog.text.count("skipping journal entry") == 5
    assert "not a regular file" in caplog.text and "cannot be opened" in caplog.text


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_directory_is_created_0700_and_entries_0600(tmp_path: Path) -> None:
    directory = tmp_path / "journal"
    Journal(str(directory)).record("locks", "k", OWNER)
    assert _mode(directory) == 0o700
    assert _mode(directory / f"{OWNER}.json") == 0o600


def test_a_directory_others_can_write_is_refused_for_writing_and_reading(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "journal"
    directory.mkdir()
    _write_entry(directory)  # planted before the mode was opened up
    directory.chmod(0o777)
    with caplog.at_level("WARNING", logger="dynalease"):
        Journal(str(directory)).record("locks", "k", _owner(2))
        assert list(entries(str(directory))) == []
    assert sorted(os.listdir(directory)) == [f"{OWNER}.json"]  # nothing written
    assert "writable by other users (mode 0777)" in caplog.text
    assert _mode(directory) == 0o777  # left as it is: it is not ours to change


def test_a_symlinked_directory_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "journal").symlink_to(elsewhere)
    with caplog.at_level("WARNING", logger="dynalease"):
        Journal(str(tmp_path / "journal")).record("locks", "k", OWNER)
    assert os.listdir(elsewhere) == []
    assert "is a symbolic link" in caplog.text
    # Nor is anything read through it.
    _write_entry(elsewhere)
    caplog.clear()
    with caplog.at_level("WARNING", logger="dynalease"):
        assert list(entries(str(tmp_path / "journal"))) == []
    assert "is a symbolic link, not a directory; its entries are ignored" in caplog.text


def test_a_planted_temporary_symlink_is_never_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "journal"
    directory.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (directory / f"{OWNER}.json.tmp").symlink_to(victim)
    with caplog.at_level("WARNING", logger="dynalease"):
        Journal(str(directory)).record("locks", "k", OWNER)
    assert victim.read_text() == "precious"
    assert not (directory / f"{OWNER}.json").exists()
    assert "could not write a journal entry" in caplog.text


def test_a_journal_that_cannot_write_warns_once_and_the_lock_still_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")

    async def scenario(h: Harness) -> None:
        journal = Journal(str(blocker / "journal"))
        lease = h.lease(journal=journal)
        await lease.acquire()
        await lease.release()
        second = h.lease(journal=journal)
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
        lease = h.permit_lease(journal=Journal(str(tmp_path)))
        peeking = Peeking(h.transport, tmp_path)
        lease.store.transport = peeking
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
