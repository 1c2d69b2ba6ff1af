"""``python -m benchmarks.lambda_recovery``: the recovery extension under the local control plane.

The layer is the real zip (``build_layer``), unpacked, with and without
``extensions/dynalease-recovery``; the runtime is awslambdaric; the control
plane is ``dynalease_dev.lambda_plane`` (a stand-in for Lambda written from
its published APIs); the table is on a moto server this run starts. Figures:

- a handler holding a lock with a ``--lease`` (30 s) lease is killed at the
  function timeout: seconds from the kill to the *next invocation's*
  acquisition (a fresh sandbox, as after a timeout), to a contender's that was
  already waiting (its poll interval counts), and until the extension exited
  (its deletes done); with the extension and without;
- the same for a crash (``os._exit`` while holding);
- the extension's init time (process start to its first ``event/next``) and
  its resident memory while it waits;
- the DynamoDB requests of an invocation that ends normally, with and without;
- what a guard's journal entry costs (write and remove) in the temporary directory.

    python -m benchmarks.lambda_recovery            # 30 s lease: about two minutes
    python -m benchmarks.lambda_recovery --lease 5  # quicker
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

from dynalease_dev.lambda_plane import ControlPlane

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._tooling.local_server import LocalServer
from dynalease.cdk.build import build_layer
from tests.support.counting_proxy import CountingProxy  # a test tool: not in the wheel

from .libs import use_test_credentials
from .managed_instances import journal_entry

ROOT = Path(__file__).resolve().parents[1]
#: The handlers the recovery tests use (``holders.plain``).
TASK = ROOT / "tests" / "lambda" / "plane_task"
WALL = time.time() - time.monotonic()  # monotonic -> wall, for the handlers' wall stamps


def _layer(directory: Path, *, recovery: bool) -> Path:
    build = build_layer(include_recovery=recovery, cache_dir=directory / "cache")
    layer = directory / ("layer-with" if recovery else "layer-without")
    with zipfile.ZipFile(build.zip_path) as archive:
        archive.extractall(layer)
    launcher = layer / "extensions" / "dynalease-recovery"
    if launcher.exists():
        launcher.chmod(0o755)  # zipfile does not restore modes; Lambda does
    return layer


def _journal_us(directory: Path) -> float:
    """Microseconds a guard spends on its journal entry (written, then removed): the median
    of ``benchmarks.managed_instances``' measurement."""
    times, _ = journal_entry(directory)
    return statistics.median(times) * 1e6


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Run:
    def __init__(self, directory: Path, endpoint: str, table: str, lease: float) -> None:
        self.directory = directory
        self.endpoint = endpoint
        self.table = table
        self.lease = lease
        self.contender_client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)

    def plane(self, layer: Path, name: str, *, endpoint: str | None = None) -> ControlPlane:
        environment = {
            **os.environ,
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_DYNAMODB": endpoint or self.endpoint,
            "DYNALEASE_TABLE": self.table,
        }
        return ControlPlane(
            task=TASK,
            handler="holders.plain",
            layer=layer,
            environment=environment,
            timeout=2.0,
            journal=self.directory / f"journal-{name}",
            logs=self.directory / f"logs-{name}",
        )

    def event(self, key: str, then: str, wait: float = 5.0) -> dict[str, Any]:
        mark = str(self.directory / f"mark-{uuid.uuid4().hex[:8]}")
        return {"key": key, "lease": self.lease, "then": then, "mark": mark, "wait": wait}

    def stopped_then_next(self, plane: ControlPlane, then: str) -> tuple[float, float]:
        """(kill -> next invocation acquired, kill -> extension done), in seconds."""
        key = f"next-{uuid.uuid4().hex[:8]}"
        stopped = plane.invoke(self.event(key, then))
        assert stopped.stopped_at is not None and stopped.shutdown_done is not None
        follow = self.event(key, "return", wait=self.lease + 15)
        result = plane.invoke(follow, timeout=self.lease + 20)
        assert result.status == "ok", result
        acquired = json.loads(Path(follow["mark"]).read_text())["at"]
        return acquired - (stopped.stopped_at + WALL), stopped.shutdown_done - stopped.stopped_at

    def waiting_contender(self, plane: ControlPlane) -> float:
        """kill -> acquired by a contender that was already waiting, in seconds."""
        key = f"wait-{uuid.uuid4().hex[:8]}"
        event = self.event(key, "sleep")
        box: list[Any] = []
        holder = threading.Thread(target=lambda: box.append(plane.invoke(event)))
        holder.start()
        while not Path(event["mark"]).exists():
            time.sleep(0.01)
        acquired: list[float] = []

        def contend() -> None:
            with SyncDistributedLock(
                self.contender_client,
                table=self.table,
                key=key,
                lease_duration=self.lease,
                wait_timeout=self.lease + 15,
            ):
                acquired.append(time.monotonic())

        contender = threading.Thread(target=contend)
        contender.start()
        holder.join()
        contender.join()
        assert box[0].stopped_at is not None
        return float(acquired[0] - box[0].stopped_at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease", type=float, default=30.0, help="the holder's lease (s)")
    args = parser.parse_args(argv)
    use_test_credentials()
    with LocalServer() as server, tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        table = f"recovery-{uuid.uuid4().hex[:8]}"
        setup = DynamoDBClient(region="us-east-1", endpoint_url=server.url)
        setup.sync_create_table(table, partition_key=("key", "S"), wait=True)
        run = Run(directory, server.url, table, args.lease)
        layers = {True: _layer(directory, recovery=True), False: _layer(directory, recovery=False)}
        print(f"lease {args.lease:g} s, function timeout 2 s, moto at {server.url}")
        print(f"{'':44} {'with extension':>16} {'without':>10}")
        rows: dict[str, dict[bool, float]] = collections.defaultdict(dict)
        init: list[float] = []
        rss: list[int] = []
        for extension in (True, False):
            name = "with" if extension else "without"
            with run.plane(layers[extension], name) as plane:
                timeout_next, timeout_done = run.stopped_then_next(plane, "sleep")
                if extension:
                    for process in plane.extension_processes():
                        rss.append(_rss_kib(process.pid))
                rows["timeout -> next invocation acquired (s)"][extension] = timeout_next
                rows["timeout -> extension done (s)"][extension] = timeout_done
                rows["timeout -> waiting contender acquired (s)"][extension] = (
                    run.waiting_contender(plane)
                )
                crash_next, _ = run.stopped_then_next(plane, "exit")
                rows["crash (os._exit) -> next invocation (s)"][extension] = crash_next
                if extension:
                    init.extend(plane.extension_init)
        for label, figures in rows.items():
            print(f"{label:44} {figures[True]:>16.3f} {figures[False]:>10.3f}")
        median_ms, max_ms = statistics.median(init) * 1000, max(init) * 1000
        print(
            f"extension init (start -> first event/next): median {median_ms:.0f} ms, "
            f"max {max_ms:.0f} ms over {len(init)} sandboxes"
        )
        print(f"extension resident memory while waiting: {max(rss) / 1024:.1f} MiB")
        print(
            f"journal entry per guard (written before the first request, removed after the "
            f"release), median, in {directory}: {_journal_us(directory / 'journal-cost'):.0f} us"
        )
        with CountingProxy(server.url) as counter:
            for extension in (True, False):
                name = f"count-{extension}"
                with run.plane(layers[extension], name, endpoint=counter.url) as plane:
                    plane.invoke(run.event(f"warm-{uuid.uuid4().hex[:6]}", "return"))
                    counter.reset()
                    plane.invoke(run.event(f"count-{uuid.uuid4().hex[:6]}", "return"))
                    counts = dict(counter.counts)
                label = "with extension" if extension else "without"
                print(f"requests of a normal warm invocation, {label}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
