"""The recovery extension's conversation with the Extensions API, on a scripted server.

The deletes themselves are tested end to end in tests/lambda/test_recovery.py;
here ``recover`` is replaced to see when and with what deadline it is called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dynalease_dev.lambda_api import (
    Answer,
    ApiServer,
    read_json,
    registered,
    unknown_extension,
)

from dynalease._engine.journal import Journal, Skipped
from dynalease._extension import recovery
from dynalease.constants import ENV_JOURNAL_DIR, ENV_RUNTIME_API

OWNER_1 = "0b1e0e5e-aaaa-4bbb-8ccc-000000000001"
OWNER_2 = "0b1e0e5e-aaaa-4bbb-8ccc-000000000002"


class Script:
    """An Extensions API that answers register and hands out one event."""

    def __init__(self, event: dict[str, Any], *, registers: bool = True) -> None:
        self.event = event
        self.registers = registers
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.server = ApiServer(self._answer)
        self.address = self.server.address

    def _answer(self, method: str, path: str, headers: Any, body: bytes) -> Answer:
        self.requests.append((method, path, dict(headers), read_json(body)))
        if path.endswith("/register") and self.registers:
            return registered("ext-1", handler="app.handler")
        if path.endswith("/register"):
            return unknown_extension(headers.get("Lambda-Extension-Name", ""))
        if path.endswith("/event/next"):
            return 200, {}, self.event
        return 200, {}, {}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[tuple[str, float]]]:
    seen: list[tuple[str, float]] = []

    def fake(directory: str, deadline: float, tables: Any = None) -> recovery.Outcome:
        seen.append((directory, deadline))
        return recovery.Outcome()

    monkeypatch.setattr(recovery, "recover", fake)
    monkeypatch.setenv(ENV_JOURNAL_DIR, str(tmp_path))
    yield seen


def _run(script: Script, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv(ENV_RUNTIME_API, script.address)
    try:
        return recovery.main(["dynalease-recovery"])
    finally:
        script.server.close()


@pytest.mark.parametrize("reason", ["TIMEOUT", "timeout", "Failure", "SPINDOWN"])
def test_it_registers_for_shutdown_only_and_recovers_on_any_letter_case(
    reason: str,
    calls: list[tuple[str, float]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    deadline_ms = round(time.time() * 1000) + 2000
    event = {"eventType": "SHUTDOWN", "shutdownReason": reason, "deadlineMs": deadline_ms}
    script = Script(event)
    assert _run(script, monkeypatch) == 0
    (m1, register, headers, body), (m2, next_path, next_headers, _) = script.requests
    assert (m1, register) == ("POST", "/2020-01-01/extension/register")
    assert headers["Lambda-Extension-Name"] == "dynalease-recovery"
    assert body == {"events": ["SHUTDOWN"]}
    assert (m2, next_path) == ("GET", "/2020-01-01/extension/event/next")
    assert next_headers["Lambda-Extension-Identifier"] == "ext-1"
    assert calls == [(str(tmp_path), deadline_ms / 1000)]


@pytest.mark.parametrize(
    ("deadline_ms", "expected"),
    [
        (1_000_000_002_000, 1_000_000_002.0),  # as given
        (float("nan"), 1_000_000_000.0 + recovery.DEFAULT_WINDOW_S),  # json.loads accepts NaN
        ("soon", 1_000_000_000.0 + recovery.DEFAULT_WINDOW_S),
        (True, 1_000_000_000.0 + recovery.DEFAULT_WINDOW_S),
        (1e20, 1_000_000_000.0 + recovery.MAX_WINDOW_S),  # the watchdog's timer would overflow
        (10**400, 1_000_000_000.0 + recovery.MAX_WINDOW_S),
        (float("inf"), 1_000_000_000.0 + recovery.MAX_WINDOW_S),
        (5, 1_000_000_000.0),  # long past: now
    ],
)
def test_the_shutdown_deadline_is_clamped_to_the_next_ten_seconds(
    deadline_ms: object, expected: float
) -> None:
    assert recovery.shutdown_deadline(deadline_ms, 1_000_000_000.0) == expected


def test_another_shutdown_reason_recovers_nothing(
    calls: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Script({"eventType": "SHUTDOWN", "shutdownReason": "something-new"})
    assert _run(script, monkeypatch) == 0
    assert calls == []


def test_a_failing_recovery_is_reported_on_exit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(directory: str, deadline: float, tables: Any = None) -> recovery.Outcome:
        raise RuntimeError("boom")

    monkeypatch.setattr(recovery, "recover", broken)
    script = Script({"eventType": "SHUTDOWN", "shutdownReason": "timeout", "deadlineMs": 1})
    assert _run(script, monkeypatch) == 1
    method, path, headers, body = script.requests[-1]
    assert (method, path) == ("POST", "/2020-01-01/extension/exit/error")
    assert headers["Lambda-Extension-Function-Error-Type"] == "Extension.RecoveryFailed"
    assert "boom" in body["errorMessage"]


def test_a_refused_registration_exits_1(
    calls: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    script = Script({}, registers=False)
    assert _run(script, monkeypatch) == 1
    assert "could not register" in capsys.readouterr().err
    assert calls == []


def test_outside_lambda_it_says_so(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv(ENV_RUNTIME_API, raising=False)
    assert recovery.main([]) == 2
    assert "AWS_LAMBDA_RUNTIME_API is not set" in capsys.readouterr().err


def test_past_the_deadline_nothing_is_sent_and_the_entries_stay(tmp_path: Path) -> None:
    journal = Journal(str(tmp_path))
    journal.record("locks", "k", OWNER_1)
    body = json.loads((tmp_path / f"{OWNER_1}.json").read_text())
    body["pid"] = 2**22 + 7  # above pid_max's default: no such process
    (tmp_path / f"{OWNER_1}.json").write_text(json.dumps(body))
    outcome = recovery.recover(str(tmp_path), deadline=0.0, tables={"locks"})
    assert [e.owner for e in outcome.failed] == [OWNER_1]
    assert (tmp_path / f"{OWNER_1}.json").exists()


def test_a_live_writer_s_entry_is_left_alone(tmp_path: Path) -> None:
    Journal(str(tmp_path)).record("locks", "k", OWNER_2)  # written by this live process
    outcome = recovery.recover(str(tmp_path), deadline=0.0, tables={"locks"})
    assert [e.owner for e in outcome.alive] == [OWNER_2]
    assert outcome.failed == [] and outcome.released == []


def test_the_watchdog_stops_the_process_just_before_the_deadline() -> None:
    stopped = threading.Event()
    codes: list[int] = []

    def stop(code: int) -> None:
        codes.append(code)
        stopped.set()

    start = time.time()
    timer = recovery.watch(start + 0.5, stop)
    assert timer is not None
    # Set to fire before the deadline itself (when it fires is the scheduler's business:
    # a loaded machine may wake the timer's thread late).
    assert 0 < timer.interval <= 0.5 - recovery.MARGIN_S / 3
    assert stopped.wait(30)
    assert codes == [1]
    assert recovery.watch(start - 1, stop) is None  # past: nothing to guard


def test_the_extension_is_a_process_that_exits_at_the_deadline_when_recovery_hangs(
    tmp_path: Path,
) -> None:
    """A real process: its recovery blocks forever, the deadline still ends it."""
    script = tmp_path / "hang.py"
    script.write_text(
        "import sys, time\n"
        "from dynalease._extension import recovery\n"
        "recovery.recover = lambda directory, deadline, **_: time.sleep(60)\n"
        "class Control:\n"
        "    def __init__(self, address): pass\n"
        "    def register(self, name): return 'id'\n"
        "    def next_event(self):\n"
        "        return {'eventType': 'SHUTDOWN', 'shutdownReason': 'timeout',\n"
        "                'deadlineMs': int((time.time() + 0.6) * 1000)}\n"
        "recovery.Control = Control\n"
        "sys.exit(recovery.main(['x']))\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, ENV_RUNTIME_API: "127.0.0.1:9"},
        timeout=30,
        capture_output=True,
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 20  # not the 60 s the recovery would take


LOCK_ROW = {"owner": OWNER_1, "version": "v", "lease_ms": 30_000, "protocol": 1}
FENCED_ROW = {**LOCK_ROW, "protocol": 2, "fence": 7}


@pytest.mark.parametrize(
    ("stored", "fenced", "result", "after"),
    [
        (LOCK_ROW, False, "released", None),
        (FENCED_ROW, True, "released", {"protocol": 2, "fence": 7}),  # free, counter kept
        # An entry that contradicts its row is not genuine: the row stays as it is.
        (FENCED_ROW, False, "contradicted", FENCED_ROW),
        (LOCK_ROW, True, "contradicted", LOCK_ROW),
        # Not lock rows, whatever the entry says: never touched.
        ({"owner": OWNER_1, "body": "contract"}, False, "contradicted", "same"),
        ({"owner": OWNER_1, "body": "contract"}, True, "contradicted", "same"),
        ({**LOCK_ROW, "fence": 7}, False, "contradicted", "same"),  # protocol 1 with a counter
        ({**LOCK_ROW, "protocol": 3}, False, "contradicted", "same"),
        ({"owner": OWNER_1, "protocol": 1, "lease_ms": 5}, False, "contradicted", "same"),
        # Someone else's, or gone.
        ({**LOCK_ROW, "owner": OWNER_2}, False, "not ours", "same"),
        ({**FENCED_ROW, "owner": OWNER_2}, True, "not ours", "same"),
        (None, False, "not ours", None),
    ],
)
def test_a_release_touches_only_a_lock_row_of_the_entry_s_owner_and_protocol(
    stored: dict[str, Any] | None, fenced: bool, result: str, after: Any
) -> None:
    from dynalease._extension.release import release
    from dynalease.testing import MemoryBackend

    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        if stored is not None:
            client.sync_put_item("locks", {"key": "k", **stored})
        store = client._lock_store
        outcome = client._runtime().run(
            release(store.transport, "locks", "k", OWNER_1, fenced=fenced)
        )
        row = client.sync_get_item("locks", {"key": "k"}, consistent_read=True)
    assert outcome.value == result
    expected = None if after is None else {"key": "k", **(stored if after == "same" else after)}
    assert row == expected


def test_the_tables_recovered_are_the_function_s_table_and_the_listed_ones() -> None:
    environ = {"DYNALEASE_TABLE": "locks", "DYNALEASE_RECOVERY_TABLES": " jobs, ,audit.locks "}
    assert recovery.lock_tables(environ) == {"locks", "jobs", "audit.locks"}
    assert recovery.lock_tables({"DYNALEASE_RECOVERY_TABLES": "jobs"}) == {"jobs"}
    assert recovery.lock_tables({}) == frozenset()


def test_an_entry_of_another_table_is_skipped_once_and_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Journal(str(tmp_path)).record("other-locks", "k", OWNER_2)
    skipped = Skipped()
    with caplog.at_level("WARNING", logger="dynalease"):
        for _ in range(3):  # as the Managed Instances watch looks again and again
            outcome = recovery.recover(str(tmp_path), 0.0, skipped, tables={"locks"})
            assert outcome == recovery.Outcome()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "table 'other-locks' is not one of this function's lock tables" in line
    assert (tmp_path / f"{OWNER_2}.json").exists()


def test_a_listed_name_that_is_not_a_table_name_stops_it_before_registering(
    calls: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("DYNALEASE_RECOVERY_TABLES", "locks;jobs")
    script = Script({"eventType": "SHUTDOWN", "shutdownReason": "timeout"})
    assert _run(script, monkeypatch) == 2
    assert script.requests == []
    error = capsys.readouterr().err
    assert "DYNALEASE_RECOVERY_TABLES names 'locks;jobs', which is not a DynamoDB table" in error
    assert "separated by commas" in error
