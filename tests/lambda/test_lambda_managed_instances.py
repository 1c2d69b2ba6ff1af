"""Lambda Managed Instances under the local control plane's multi-concurrent mode.

Real parts: awslambdaric (on Python 3.13, as Managed Instances require) forks its
concurrent workers, each running init; the layer's launcher starts the recovery
extension, which registers for SHUTDOWN only; locks live on the moto server. Nothing
stops a handler past its timeout here, as on Managed Instances.

The runtime's interpreter is this one when it is Python 3.13 or later (the suite's 3.13
run), else ``DYNALEASE_PYTHON313`` or ``.venv-3.13/bin/python`` (a venv of Python 3.13
with awslambdaric, boto3 and aws-lambda-powertools); without one these tests skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.lambda_plane import ControlPlane
from test_recovery import TASK, _wait_for, make_layer
from test_recovery import _run_in_background as _in_background

from dynalease import DynamoDBClient

ROOT = Path(__file__).resolve().parents[2]
#: The issue's goal is a row gone within 1.5 s of its deadline or its worker's death; the
#: tests print that figure. Only a delete removes a row (no contender takes it over here),
#: so what they check is who deleted it and when in the order of events: while the
#: environment runs, not at its shutdown or never. This bound is several times the goal
#: so that a loaded two-core machine, not the library, cannot fail it.
WITHIN_S = 10.0


def _python313() -> str:
    if sys.version_info >= (3, 13):
        return sys.executable
    candidate = os.environ.get("DYNALEASE_PYTHON313") or str(ROOT / ".venv-3.13/bin/python")
    probe = [candidate, "-c", "import awslambdaric, boto3, aws_lambda_powertools"]
    if not (
        Path(candidate).exists()
        and subprocess.run(probe, capture_output=True, check=False).returncode == 0
    ):
        pytest.skip(
            f"Managed Instances need Python 3.13: no such interpreter with awslambdaric at "
            f"{candidate} (`bash tests/support/python_venv.sh 3.13` builds it, as `make test` "
            "does, or set DYNALEASE_PYTHON313)"
        )
    return candidate


@pytest.fixture
def managed_plane(
    tmp_path: Path, aws_env: str, lock_table: str
) -> Iterator[Callable[..., ControlPlane]]:
    if importlib.util.find_spec("awslambdaric") is None:
        pytest.skip("awslambdaric (dev extra) is not installed: pip install -e '.[dev]'")
    python = _python313()
    planes: list[ControlPlane] = []

    def make(
        handler: str,
        *,
        workers: int = 3,
        timeout: float = 2.0,
        initialization_type: str | None = None,
    ) -> ControlPlane:
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
        plane = ControlPlane(
            task=TASK,
            handler=f"managed.{handler}",
            layer=make_layer(tmp_path / f"layer-{handler}", extension=True),
            environment=environment,
            timeout=timeout,
            journal=tmp_path / "journal",
            logs=tmp_path / f"logs-{handler}",
            max_concurrency=workers,
            python=python,
        )
        if initialization_type is not None:  # a platform that names the mode otherwise
            plane.environment["AWS_LAMBDA_INITIALIZATION_TYPE"] = initialization_type
        planes.append(plane)
        return plane

    yield make
    for plane in planes:
        plane.close()


def _files(tmp_path: Path, *names: str) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {name: str(tmp_path / f"{name}-{tag}") for name in names}


def _gone_at(client: DynamoDBClient, table: str, key: str, within: float = 30.0) -> float:
    """The wall time the row was first seen gone."""
    give_up = time.monotonic() + within
    while client.sync_get_item(table, {"key": key}, consistent_read=True) is not None:
        assert time.monotonic() < give_up, f"the row of {key} stayed"
        time.sleep(0.02)
    return time.time()


def test_an_overrunning_invocation_loses_its_lock_at_its_deadline_while_it_runs(
    managed_plane: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = managed_plane("overrun", timeout=2.5)
    key = f"mi-{uuid.uuid4().hex[:8]}"
    event = {"key": key, **_files(tmp_path, "mark", "lost", "go", "done")}
    first = _in_background(plane, event)
    mark = _wait_for(Path(event["mark"]))
    gone = _gone_at(other_client, lock_table, key)
    lost = _wait_for(Path(event["lost"]))
    # Another invocation takes the key while the overrunning one still runs.
    second_event = {"key": key, **_files(tmp_path, "mark")}
    second = plane.invoke(second_event, timeout=10)
    second_mark = _wait_for(Path(second_event["mark"]))
    assert not Path(event["done"]).exists()
    Path(event["go"]).touch()
    overran = first()
    print(
        f"\nManaged Instances overrun: row gone {gone - mark['deadline']:.3f} s after the "
        f"deadline; raise_if_lost raised {lost['at'] - mark['deadline']:.3f} s after it; "
        f"another invocation held it {second_mark['at'] - gone:.3f} s after the row went"
    )
    assert gone - mark["deadline"] <= WITHIN_S
    assert lost["remaining_ms"] <= 0  # the context's remaining time: zero, never unknown
    assert "reached its deadline" in lost["why"]
    assert second.status == "ok", second.payload
    assert second_mark["pid"] != mark["pid"]  # another worker of the same environment
    # Reported as a timeout, not enforced: the handler's own answer came, its exit's LockLost.
    assert overran.status == "timeout"
    assert overran.payload["errorType"] == "LockLost"
    assert plane.runtime_process() is not None
    assert plane.runtime_process().poll() is None  # type: ignore[union-attr]


def test_a_killed_worker_s_row_is_released_by_the_extension(
    managed_plane: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = managed_plane("hold", timeout=30.0)
    key = f"mi-{uuid.uuid4().hex[:8]}"
    event = {"key": key, **_files(tmp_path, "mark", "go")}  # "go" never comes
    held = _in_background(plane, event)
    mark = _wait_for(Path(event["mark"]))
    os.kill(mark["pid"], signal.SIGKILL)
    killed = time.time()
    gone = _gone_at(other_client, lock_table, key)
    print(f"\nManaged Instances worker killed: its row released {gone - killed:.3f} s later")
    assert gone - killed <= WITHIN_S
    assert held().status == "crash"
    # The environment is still up: the other workers take invocations.
    runtime = plane.runtime_process()
    assert runtime is not None and runtime.poll() is None
    after = {"key": f"mi-{uuid.uuid4().hex[:8]}", **_files(tmp_path, "mark")}
    assert plane.invoke(after).status == "ok"
    assert all(process.poll() is None for process in plane.extension_processes())


def test_awslambdaric_s_own_signal_alone_starts_the_worker_watch(
    managed_plane: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    # AWS_LAMBDA_MAX_CONCURRENCY set (awslambdaric forks its workers on it) while the
    # initialization type says on-demand: a killed worker's row still goes at once.
    plane = managed_plane("hold", workers=2, timeout=30.0, initialization_type="on-demand")
    key = f"mi-{uuid.uuid4().hex[:8]}"
    event = {"key": key, **_files(tmp_path, "mark", "go")}  # "go" never comes
    held = _in_background(plane, event)
    mark = _wait_for(Path(event["mark"]))
    os.kill(mark["pid"], signal.SIGKILL)
    killed = time.time()
    gone = _gone_at(other_client, lock_table, key)
    assert gone - killed <= WITHIN_S  # without the watch the row stays: no one contends
    assert held().status == "crash"
    logs = "".join(path.read_text() for path in plane.logs.glob("*dynalease-recovery*.log"))
    said = "dynalease: Lambda Managed Instances (AWS_LAMBDA_MAX_CONCURRENCY '2', "
    assert logs.count(said) == 1, logs


def test_concurrent_invocations_on_distinct_keys_all_hold_at_once(
    managed_plane: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = managed_plane("hold", workers=3, timeout=30.0)
    go = str(tmp_path / f"go-{uuid.uuid4().hex[:8]}")
    events = [
        {"key": f"mi-{uuid.uuid4().hex[:8]}", "go": go, **_files(tmp_path, "mark")}
        for _ in range(3)
    ]
    results = [_in_background(plane, event) for event in events]
    marks = [_wait_for(Path(event["mark"])) for event in events]
    rows = [
        other_client.sync_get_item(lock_table, {"key": event["key"]}, consistent_read=True)
        for event in events
    ]
    Path(go).touch()
    outcomes = [result() for result in results]
    assert all(row is not None for row in rows)  # all three held at the same moment
    assert len({mark["pid"] for mark in marks}) == 3
    assert [outcome.status for outcome in outcomes] == ["ok", "ok", "ok"]


def test_extensions_may_not_ask_for_invoke_events_and_the_idle_extension_is_cheap(
    managed_plane: Callable[..., ControlPlane], tmp_path: Path
) -> None:
    plane = managed_plane("hold", workers=2)
    event = {"key": f"mi-{uuid.uuid4().hex[:8]}", **_files(tmp_path, "mark")}
    assert plane.invoke(event).status == "ok"
    import http.client

    host, port = plane.address.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    connection.request(
        "POST",
        "/2020-01-01/extension/register",
        body=json.dumps({"events": ["INVOKE", "SHUTDOWN"]}),
        headers={"Lambda-Extension-Name": "wants-invoke"},
    )
    answer = connection.getresponse()
    assert answer.status == 400
    assert "SHUTDOWN" in json.loads(answer.read())["errorMessage"]
    connection.close()
    # The recovery extension, idle (its worker watch looking every 0.25 s): memory and CPU.
    (extension,) = plane.extension_processes()
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_s() -> float:
        fields = Path(f"/proc/{extension.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    before, started = cpu_s(), time.monotonic()
    time.sleep(3.0)
    used, spent = cpu_s() - before, time.monotonic() - started
    status = Path(f"/proc/{extension.pid}/status").read_text()
    rss_kb = int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
    print(f"\nidle recovery extension: RSS {rss_kb / 1024:.1f} MiB, CPU {100 * used / spent:.2f}%")
    assert extension.poll() is None
