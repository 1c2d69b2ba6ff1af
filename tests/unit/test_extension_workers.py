"""The recovery extension's worker watch (Lambda Managed Instances): when it looks, and that
nothing it meets ever stops it (a crashed extension takes the whole environment down)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from dynalease._engine.journal import Entry, Journal, Skipped
from dynalease._extension import workers
from dynalease._extension.recovery import Outcome, recover


def test_without_entries_a_look_sends_nothing(tmp_path: Path) -> None:
    calls: list[tuple[str, float]] = []
    watch = workers.WorkerWatch(str(tmp_path / "none-yet"), lambda d, t, _: calls.append((d, t)))
    assert watch.look()
    (tmp_path / "empty").mkdir()
    assert workers.WorkerWatch(str(tmp_path / "empty"), lambda d, t, _: calls.append((d, t))).look()
    assert calls == []


def test_with_entries_a_look_recovers_within_its_own_budget(tmp_path: Path) -> None:
    Journal(str(tmp_path)).record("locks", "k", "owner-1")
    calls: list[tuple[str, float]] = []

    def recover(directory: str, deadline: float, skipped: Skipped) -> Outcome:
        calls.append((directory, deadline))
        return Outcome()

    before = time.time()
    assert workers.WorkerWatch(str(tmp_path), recover).look()
    after = time.time()
    ((directory, deadline),) = calls
    assert directory == str(tmp_path)
    # The release budget from when it looked, whatever the machine's load.
    assert before + workers.RELEASE_BUDGET_S <= deadline <= after + workers.RELEASE_BUDGET_S


def test_a_failing_round_is_logged_and_the_watch_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Journal(str(tmp_path)).record("locks", "k", "owner-1")
    rounds: list[int] = []

    def recover(directory: str, deadline: float, skipped: Skipped) -> Outcome:
        rounds.append(1)
        if len(rounds) == 1:
            raise OSError("the disk went away")
        if len(rounds) == 2:
            return Outcome(failed=[])
        raise RuntimeError("anything at all")

    watch = workers.WorkerWatch(str(tmp_path), recover, interval=0.01)
    with caplog.at_level(logging.ERROR, logger="dynalease.recovery"):
        assert not watch.look()
        assert watch.look()
        watch.start()
        give_up = time.monotonic() + 10
        while watch.rounds < 3 and time.monotonic() < give_up:
            time.sleep(0.01)
        watch.stop()
    assert watch.rounds >= 3
    assert "the worker watch failed this round" in caplog.text


def _skipped_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "skipping journal entry" in r.getMessage()]


def test_each_bad_journal_file_is_logged_once_until_it_changes_or_goes_away(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Three bad files, looked at as often as the watch does in 5 s (it logged 12 lines a
    # second for three files before), with the real recover: no request is due.
    owner = "0b6e6c52-3f0c-4a8e-9d3b-6f1f4c2a7e10"
    not_json = tmp_path / f"{owner}.json"
    not_json.write_text("{not json")
    misnamed = tmp_path / "a-name-not-an-owner.json"
    misnamed.write_text('{"format": 1}')
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    watch = workers.WorkerWatch(str(tmp_path), recover)
    with caplog.at_level(logging.WARNING, logger="dynalease"):
        for _ in range(20):
            assert watch.look()
        assert len(_skipped_lines(caplog)) == 3
        caplog.clear()
        not_json.write_text("{still not json, and longer")  # changed: logged again
        misnamed.unlink()  # gone: nothing to log
        for _ in range(20):
            assert watch.look()
        assert _skipped_lines(caplog) == [
            f"dynalease: skipping journal entry {not_json.name!r}: not JSON text"
        ]
        caplog.clear()
        misnamed.write_text('{"format": 1}')  # back after it went away: logged again
        for _ in range(20):
            assert watch.look()
        (line,) = _skipped_lines(caplog)
        assert repr(misnamed.name) in line


def test_a_bad_journal_directory_is_logged_once_by_the_watch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "journal"
    Journal(str(directory)).record("locks", "k", "0b6e6c52-3f0c-4a8e-9d3b-6f1f4c2a7e10")
    directory.chmod(0o777)  # writable by others: its entries are ignored
    watch = workers.WorkerWatch(str(directory), recover)
    with caplog.at_level(logging.WARNING, logger="dynalease"):
        for _ in range(20):
            assert watch.look()
    ignored = [r for r in caplog.records if "its entries are ignored" in r.getMessage()]
    assert len(ignored) == 1


def test_a_look_reads_and_parses_each_entry_once_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Entries of this (live) process: each look checks their writer, none is released. The
    # watch looks four times a second while a lock is held; it re-read and re-parsed every
    # entry at every look before (25% of a core for 32 entries of 100 long keys).
    from dynalease._engine import journal as journal_module

    reads: list[str] = []
    real_read = journal_module._read

    def counted(directory: int, name: str) -> object:
        reads.append(name)
        return real_read(directory, name)

    monkeypatch.setattr(journal_module, "_read", counted)
    monkeypatch.setenv("DYNALEASE_TABLE", "locks")  # the function's table: its entries count
    writer = Journal(str(tmp_path))
    owners = [f"0b6e6c52-3f0c-4a8e-9d3b-6f1f4c2a7e1{n}" for n in range(3)]
    for owner in owners:
        writer.record("locks", f"k-{owner[-1]}", owner)
    alive: list[int] = []

    def watched(directory: str, deadline: float, skipped: Skipped) -> Outcome:
        outcome = recover(directory, deadline, skipped)
        alive.append(len(outcome.alive))
        return outcome

    watch = workers.WorkerWatch(str(tmp_path), watched)
    for _ in range(20):
        assert watch.look()
    assert sorted(reads) == sorted(f"{owner}.json" for owner in owners)
    assert alive == [3] * 20  # every look still checks every writer
    reads.clear()
    writer.forget(owners[0])
    writer.record("locks", "k-again", owners[0])  # a new file under the same name
    for _ in range(20):
        assert watch.look()
    assert reads == [f"{owners[0]}.json"]


def test_an_entry_is_written_as_utf_8_and_read_back(tmp_path: Path) -> None:
    from dynalease._engine.journal import entries

    key = "clé:日本語:" + "ü" * 600
    Journal(str(tmp_path)).record("locks", key, "0b6e6c52-3f0c-4a8e-9d3b-6f1f4c2a7e10")
    [written] = tmp_path.iterdir()
    data = written.read_bytes()
    assert key.encode("utf-8") in data  # not six bytes of \uXXXX for each character
    assert len(data) < 2 * len(key.encode("utf-8")) + 300
    [entry] = entries(str(tmp_path))
    assert entry.key == key and entry.keys == (key,)


def _entry_of(namespace: str | None) -> Entry:
    owner = "0b6e6c52-3f0c-4a8e-9d3b-6f1f4c2a7e10"
    return Entry(f"{owner}.json", "locks", "k", owner, 7, None, False, ("k",), namespace)


def test_a_pid_is_judged_only_in_its_writer_s_namespace_and_the_first_other_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    view = workers.PidView("pid:[4026531836]")
    with caplog.at_level(logging.WARNING, logger="dynalease.recovery"):
        assert view.judges(_entry_of("pid:[4026531836]"))
        assert view.judges(_entry_of(None))  # an older writer's: judged as before
        assert not view.judges(_entry_of("pid:[4026532175]"))
        assert not view.judges(_entry_of("pid:[4026532175]"))
        assert not view.judges(_entry_of("pid:[4026532999]"))
    (line,) = [r.getMessage() for r in caplog.records]
    assert "pid:[4026532175]" in line and "pid:[4026531836]" in line
    assert "free once its lease expires" in line
    # Where this process cannot name its own namespace, nothing can be compared.
    assert workers.PidView(None).judges(_entry_of("pid:[4026532175]"))
