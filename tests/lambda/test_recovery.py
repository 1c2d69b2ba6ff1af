"""The recovery extension under the local control plane: a runtime killed at its
timeout, or crashed, holding locks; the extension frees exactly its rows.

Real parts: awslambdaric runs the handlers, the layer's launcher starts the
extension as its own process, both talk to the stand-in control plane
(tests/support/lambda_plane.py) over HTTP, and the locks live on the moto
server. A contender in this process waits for the lock; how it got the lock
shows who freed the row: the extension (the row was gone, the contender
created it anew) or the lease running out (the contender took the row over,
which the protocol allows only after watching it unchanged for its lease).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from support.fault_proxy import FaultProxy
from support.lambda_plane import ControlPlane, Invocation

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine import journal
from dynalease._extension import recovery
from dynalease._redact import key_hash

ROOT = Path(__file__).resolve().parents[2]
TASK = Path(__file__).resolve().parent / "plane_task"
LAUNCHER = ROOT / "src" / "dynalease" / "_extension" / "dynalease-recovery"


def make_layer(directory: Path, *, extension: bool) -> Path:
    """A layer-like directory: ``python/dynalease`` and, if asked, ``extensions/``."""
    (directory / "python").mkdir(parents=True)
    (directory / "python" / "dynalease").symlink_to(ROOT / "src" / "dynalease")
    if extension:
        (directory / "extensions").mkdir()
        shutil.copy2(LAUNCHER, directory / "extensions" / "dynalease-recovery")
    return directory


#: The longest shutdown window the extension honours, not Lambda's 2 s: these tests check
#: what it frees, and a loaded two-core machine once kept it from finishing in 2 s on 3.13
#: (and, under make test's three suites, the demo's delete to the shared moto server).
#: How soon it finishes is the lambda_recovery benchmark's figure.
LONGEST_WINDOW_MS = int(recovery.MAX_WINDOW_S * 1000)


@pytest.fixture
def plane_factory(
    tmp_path: Path, aws_env: str, lock_table: str
) -> Iterator[Callable[..., ControlPlane]]:
    if importlib.util.find_spec("awslambdaric") is None:
        pytest.skip("awslambdaric (dev extra) is not installed: pip install -e '.[dev]'")
    planes: list[ControlPlane] = []

    def make(
        handler: str,
        *,
        extension: bool = True,
        timeout: float = 2.0,
        endpoint: str | None = None,
        name: str = "f",
        layer: Path | None = None,
    ) -> ControlPlane:
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
        if endpoint is not None:
            environment["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
        plane = ControlPlane(
            task=TASK,
            handler=f"holders.{handler}",
            layer=layer or make_layer(tmp_path / f"layer-{name}", extension=extension),
            environment=environment,
            timeout=timeout,
            journal=tmp_path / "journal",
            logs=tmp_path / f"logs-{name}",
            shutdown_window_ms=LONGEST_WINDOW_MS,
        )
        planes.append(plane)
        return plane

    yield make
    for plane in planes:
        plane.close()


class Successor(NamedTuple):
    """How the contender got the lock after the holder stopped."""

    #: Seconds from the stop to its acquisition, for the figures printed.
    after_s: float
    #: True if it took over a row whose lease ran out; False if it found the row gone.
    took_over: bool


class Contender:
    """Waits for a key in a thread of this process; when and how it got the lock."""

    def __init__(self, client: DynamoDBClient, table: str, key: str, lease: float) -> None:
        self.acquired: float | None = None
        self.took_over: bool | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(client, table, key, lease))
        self._thread.start()

    def _run(self, client: DynamoDBClient, table: str, key: str, lease: float) -> None:
        try:
            with SyncDistributedLock(
                client, table=table, key=key, lease_duration=lease, wait_timeout=lease + 15
            ) as guard:
                self.acquired = time.monotonic()
                self.took_over = guard._lease.took_over
        except BaseException as error:
            self.error = error

    def join(self) -> tuple[float, bool]:
        self._thread.join(120)
        assert self.error is None, self.error
        assert self.acquired is not None and self.took_over is not None
        return self.acquired, self.took_over


def _event(tmp_path: Path, key: str, lease: float, then: str = "sleep") -> dict[str, Any]:
    return {"key": key, "lease": lease, "then": then, "mark": str(tmp_path / f"mark-{key}")}


def _run_in_background(plane: ControlPlane, event: Any) -> Callable[[], Invocation]:
    box: list[Invocation] = []
    thread = threading.Thread(target=lambda: box.append(plane.invoke(event)))
    thread.start()

    def result() -> Invocation:
        thread.join(120)
        return box[0]

    return result


def _wait_for(path: Path, within: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)
    body: dict[str, Any] = json.loads(path.read_text())
    return body


def _owner(client: DynamoDBClient, table: str, key: str) -> str | None:
    item = client.sync_get_item(table, {"key": key})
    return None if item is None else str(item["owner"])


def _hold_then_stop(
    plane: ControlPlane,
    other_client: DynamoDBClient,
    table: str,
    tmp_path: Path,
    *,
    lease: float,
    then: str = "sleep",
) -> tuple[Invocation, Successor]:
    """Run a holder until it is stopped; its invocation, and how the successor got the lock."""
    key = f"k-{uuid.uuid4().hex[:8]}"
    event = _event(tmp_path, key, lease, then)
    result = _run_in_background(plane, event)
    _wait_for(Path(event["mark"]))
    contender = Contender(other_client, table, key, lease)
    invocation = result()
    acquired, took_over = contender.join()
    assert invocation.stopped_at is not None
    return invocation, Successor(acquired - invocation.stopped_at, took_over)


@pytest.mark.parametrize("handler", ["plain", "async_handler", "middleware", "decorated"])
def test_a_timeout_mid_hold_frees_the_lock_at_once(
    handler: str,
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = plane_factory(handler, timeout=2.0)
    invocation, successor = _hold_then_stop(plane, other_client, lock_table, tmp_path, lease=3.0)
    assert invocation.status == "timeout"
    # The row was gone: without the extension the successor takes it over once the
    # 3 s lease ran out (see test_without_the_extension_the_successor_waits_for_the_lease).
    assert not successor.took_over
    assert list(journal.entries(str(tmp_path / "journal"))) == []


def test_a_fenced_row_is_left_free_with_its_counter_never_deleted(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    # Deleting a fenced row would reset its counter and let a later holder reuse a token.
    plane = plane_factory("fenced", timeout=2.0)
    key = f"k-{uuid.uuid4().hex[:8]}"
    event = _event(tmp_path, key, 30.0)
    result = _run_in_background(plane, event)
    _wait_for(Path(event["mark"]))
    first = other_client.sync_get_item(lock_table, {"key": key})
    assert first is not None and first["protocol"] == 2 and first["fence"] == 1
    assert result().status == "timeout"
    deadline = time.monotonic() + 30
    while (row := other_client.sync_get_item(lock_table, {"key": key})) and "owner" in row:
        assert time.monotonic() < deadline, f"the extension never released {row}"
        time.sleep(0.05)
    assert row == {"key": key, "protocol": 2, "fence": 1}  # free, counter kept
    with SyncDistributedLock(
        other_client, table=lock_table, key=key, wait_timeout=0, fencing=True
    ) as successor:
        assert successor.fencing_token == 2


def test_without_the_extension_the_successor_waits_for_the_lease(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = plane_factory("plain", extension=False, timeout=2.0)
    invocation, successor = _hold_then_stop(plane, other_client, lock_table, tmp_path, lease=5.0)
    assert invocation.status == "timeout"
    assert successor.took_over  # the row was left: taken over once its lease ran out
    # The 5 s lease, counted from the last renewal the contender saw (about 1.7 s in).
    assert successor.after_s > 3.0
    assert not (tmp_path / "journal").exists()  # no journal without the extension


def test_a_thirty_second_lease_is_free_within_a_second_of_the_timeout(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = plane_factory("plain", timeout=2.0)
    invocation, successor = _hold_then_stop(plane, other_client, lock_table, tmp_path, lease=30.0)
    assert invocation.status == "timeout"
    print(f"30 s lease, timeout -> successor acquired in {successor.after_s:.3f} s")
    assert not successor.took_over  # freed, not waited out; benchmarks/ prints the figure


@pytest.mark.parametrize("then", ["exit", "kill"])
def test_a_crash_mid_hold_frees_the_lock_at_once(
    then: str,
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    plane = plane_factory("plain", timeout=20.0)
    invocation, successor = _hold_then_stop(
        plane, other_client, lock_table, tmp_path, lease=5.0, then=then
    )
    assert invocation.status == "crash"
    assert not successor.took_over  # freed, not waited out (the lease is 5 s)


def test_an_sqs_batch_holding_several_record_locks_frees_them_all(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    keys = [f"rec-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    event = {
        "Records": [{"body": json.dumps({"key": key})} for key in keys],
        "mark": str(tmp_path / "mark-batch"),
    }
    plane = plane_factory("batch", timeout=2.0)
    invocation = plane.invoke(event)
    assert invocation.status == "timeout"
    assert [_owner(other_client, lock_table, key) for key in keys] == [None, None, None]
    logs = "".join(p.read_text() for p in (tmp_path / "logs-f").glob("*dynalease-recovery.log"))
    assert all(key_hash(key) in logs for key in keys)  # hashed in the log
    assert not any(key in logs for key in keys)


def test_a_multi_key_lock_held_at_a_timeout_has_every_row_freed(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    keys = [f"mk-{uuid.uuid4().hex[:6]}" for _ in range(4)]
    event = {"keys": keys, "lease": 30.0, "mark": str(tmp_path / "mark-multikey")}
    plane = plane_factory("multikey", timeout=2.0)
    invocation = plane.invoke(event)
    assert invocation.status == "timeout"
    # The 30 s rows are gone at once: the journal named every key, not only the first.
    assert [_owner(other_client, lock_table, key) for key in keys] == [None] * 4
    assert list(journal.entries(str(tmp_path / "journal"))) == []
    logs = "".join(p.read_text() for p in (tmp_path / "logs-f").glob("*dynalease-recovery.log"))
    assert "and its 3 other keys" in logs


def test_a_lease_taken_over_before_the_timeout_keeps_the_new_owners_row(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    event = _event(tmp_path, key, 3.0)
    plane = plane_factory("plain", timeout=3.0)
    result = _run_in_background(plane, event)
    holder = _wait_for(Path(event["mark"]))
    # Another process takes the row over (as after a partition that outlived the lease).
    other_client.sync_put_item(
        lock_table,
        {"key": key, "owner": "other-owner", "version": "v", "lease_ms": 30_000, "protocol": 1},
    )
    invocation = result()
    assert invocation.status == "timeout"
    assert holder["owner"] != "other-owner"
    assert _owner(other_client, lock_table, key) == "other-owner"


def test_an_entry_whose_writer_lives_or_whose_owner_moved_on_is_left_alone(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "journal")
    alive_key, moved_key = f"alive-{uuid.uuid4().hex[:6]}", f"moved-{uuid.uuid4().hex[:6]}"
    with SyncDistributedLock(other_client, table=lock_table, key=alive_key) as alive:
        # An earlier sandbox's entry for a row this (live) process holds...
        journal.Journal(directory).record(lock_table, alive_key, alive.owner)
        # ...and a dead writer's entry whose row now has another owner.
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        other_client.sync_put_item(
            lock_table,
            {"key": moved_key, "owner": "new", "version": "v", "lease_ms": 30_000, "protocol": 1},
        )
        old_owner = str(uuid.uuid4())
        (tmp_path / "journal" / f"{old_owner}.json").write_text(
            json.dumps(
                {
                    "format": 1,
                    "table": lock_table,
                    "key": moved_key,
                    "owner": old_owner,
                    "pid": int(dead.stdout),
                    "started": None,
                }
            )
        )
        plane = plane_factory("plain", timeout=2.0)
        invocation, _ = _hold_then_stop(plane, other_client, lock_table, tmp_path, lease=3.0)
        assert invocation.status == "timeout"
        assert _owner(other_client, lock_table, alive_key) == alive.owner
        assert _owner(other_client, lock_table, moved_key) == "new"
    left = sorted(entry.key for entry in journal.entries(directory))
    assert left == [alive_key]  # the live writer's entry stays; the moved-on one is done


def test_an_invocation_that_ends_normally_sends_no_extra_request(
    plane_factory: Callable[..., ControlPlane],
    counting_proxy: Any,
    lock_table: str,
    tmp_path: Path,
) -> None:
    counts = {}
    for extension in (False, True):
        plane = plane_factory(
            "plain",
            extension=extension,
            timeout=10.0,
            endpoint=counting_proxy.url,
            name=str(extension),
        )
        plane.invoke(_event(tmp_path, f"warm-{extension}", 3.0, "return"))  # cold start
        counting_proxy.reset()
        invocation = plane.invoke(_event(tmp_path, f"n-{uuid.uuid4().hex[:6]}", 3.0, "return"))
        assert invocation.status == "ok"
        counts[extension] = dict(counting_proxy.counts)
        plane.close()  # spindown: the runtime stops cleanly, nothing to recover
        counts[f"{extension} after spindown"] = dict(counting_proxy.counts)
    assert counts[True] == counts[False] == {"PutItem": 1, "DeleteItem": 1}
    assert counts["True after spindown"] == counts[True]
    assert list(journal.entries(str(tmp_path / "journal"))) == []


@pytest.mark.parametrize("committed", [True, False], ids=["row-written", "row-never-written"])
def test_a_timeout_during_the_acquisition_request_is_covered(
    committed: bool,
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    endpoint: str,
    lock_table: str,
    tmp_path: Path,
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    with FaultProxy(endpoint) as proxy:
        # A 30 s lease: the create's own timeout (5 s) outlasts the 2 s function timeout.
        if committed:
            rule = proxy.lose_response("PutItem", times=1, how="silence")
        else:
            rule = proxy.hold("PutItem", times=1, max_hold=20.0)
        plane = plane_factory("plain", timeout=2.0, endpoint=proxy.url)
        invocation = plane.invoke(_event(tmp_path, key, 30.0))
        assert invocation.status == "timeout"
        assert rule.fired == 1
        assert not Path(_event(tmp_path, key, 30.0)["mark"]).exists()  # never acquired
        deletes = proxy.seen("DeleteItem")
        assert len(deletes) == 1  # the extension's, with the dead runtime's owner
        assert _owner(other_client, lock_table, key) is None
        logs = "".join(p.read_text() for p in (tmp_path / "logs-f").glob("*recovery.log"))
        assert ("released lock" in logs) is committed
        assert ("no longer its owner's" in logs) is not committed
        assert list(journal.entries(str(tmp_path / "journal"))) == []
        if not committed:
            rule.release()  # a create that lands after the recovery: the limit docs/lambda.md names


def test_the_built_layer_zip_recovers_a_timeout(
    plane_factory: Callable[..., ControlPlane],
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
) -> None:
    """The layer as shipped: python/ and extensions/ from build_layer's zip, unpacked."""
    from dynalease.cdk.build import build_layer

    build = build_layer(cache_dir=tmp_path / "cache")
    layer = tmp_path / "zip-layer"
    with zipfile.ZipFile(build.zip_path) as archive:
        archive.extractall(layer)
        mode = archive.getinfo("extensions/dynalease-recovery").external_attr >> 16
    (layer / "extensions" / "dynalease-recovery").chmod(mode & 0o777)  # as Lambda unpacks it
    plane = plane_factory("plain", timeout=2.0, layer=layer)
    invocation, successor = _hold_then_stop(plane, other_client, lock_table, tmp_path, lease=5.0)
    assert invocation.status == "timeout"
    assert not successor.took_over  # freed, not waited out (the lease is 5 s)
    logs = "".join(p.read_text() for p in (tmp_path / "logs-f").glob("*recovery.log"))
    assert "released lock" in logs


def test_the_timeout_example_handler_runs(
    example: Callable[[str], Callable[..., Any]], lock_table: str
) -> None:
    from dynalease_dev.invoke import CountdownContext

    handler = example("timeout_handler")
    result = handler(
        {"customer_id": f"c-{uuid.uuid4().hex[:6]}", "work_s": 0}, CountdownContext(15)
    )
    assert set(result) == {"customer_id", "waited_ms"}


def test_the_demos_lambda_timeout_shows_the_successor_barely_waiting(lock_table: str) -> None:
    from dynalease_dev.demo.lambda_timeout import scenario

    # A 30 s lease (the demo's is 3 s): a successor that waited it out would wait 30 s,
    # one that found the row deleted waits a moment, even on a starved machine (a 3 s lease
    # once made the two indistinguishable under two test runs at once). The longest window
    # (see LONGEST_WINDOW_MS): with Lambda's 2 s, the extension's delete once missed it
    # under make test's three suites, and the successor rightly waited 31.4 s.
    key = f"demo-{uuid.uuid4().hex[:6]}"
    text = scenario(lock_table, key=key, lease_s=30.0, shutdown_window_ms=LONGEST_WINDOW_MS)
    assert "killed at its 2 s timeout; the recovery extension deleted its row" in text, text
    waited = float(text.split("waited ")[1].split(" s")[0])
    assert waited < 15.0  # the row was gone, not waited out


def test_the_control_plane_reports_handler_errors_and_init_errors(
    plane_factory: Callable[..., ControlPlane],
) -> None:
    failing = plane_factory("raises", timeout=5.0, name="raises")
    invocation = failing.invoke({"x": 1})
    assert invocation.status == "error"
    assert invocation.payload["errorType"] == "ValueError"
    assert failing.invoke({"x": 2}).status == "error"  # same warm sandbox
    assert failing.sandboxes_started == 1
    missing = plane_factory("no_such_handler", timeout=5.0, name="missing")
    broken = missing.invoke({})
    assert broken.status == "crash"  # the runtime posted /init/error and exited
    assert "no_such_handler" in json.dumps(broken.payload)
