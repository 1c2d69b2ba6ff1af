"""The recovery extension's worker watch (Lambda Managed Instances): when it looks, and that
nothing it meets ever stops it (a crashed extension takes the whole environment down)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from dynalease._engine.journal import Journal
from dynalease._extension import workers
from dynalease._extension.recovery import Outcome


def test_managed_instances_are_recognised_by_the_initialization_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "lambda-managed-instances")
    assert workers.managed_instances()
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
    assert not workers.managed_instances()
    monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE")
    assert not workers.managed_instances()


def test_without_entries_a_look_sends_nothing(tmp_path: Path) -> None:
    calls: list[tuple[str, float]] = []
    watch = workers.WorkerWatch(str(tmp_path / "none-yet"), lambda d, t: calls.append((d, t)))
    assert watch.look()
    (tmp_path / "empty").mkdir()
    assert workers.WorkerWatch(str(tmp_path / "empty"), lambda d, t: calls.append((d, t))).look()
    assert calls == []


def test_with_entries_a_look_recovers_within_its_own_budget(tmp_path: Path) -> None:
    Journal(str(tmp_path)).record("locks", "k", "owner-1")
    calls: list[tuple[str, float]] = []

    def recover(directory: str, deadline: float) -> Outcome:
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

    def recover(directory: str, deadline: float) -> Outcome:
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
