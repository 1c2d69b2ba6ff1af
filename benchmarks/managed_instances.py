"""``python -m benchmarks.managed_instances``: the two figures docs/lambda.md quotes for the
recovery journal and Lambda Managed Instances, with the conditions they were taken in.

- a guard's journal entry: the time to write it and remove it (``Journal.record`` then
  ``Journal.forget``, as every guard does where the recovery extension is installed), one
  pair at a time, and the size of one entry, in ``--journal-dir`` (default: a directory in
  ``/tmp``, where Lambda's journal lives), naming that directory's filesystem;
- a killed runtime worker's release: awslambdaric's multi-concurrent workers (Python 3.13)
  under the local control plane's Managed Instances mode, the recovery extension from the
  repository's sources, a moto server this run starts. Each round holds a lock in one
  worker, kills that worker (SIGKILL) at a random point of the watch's 0.25 s period, and
  reads the row every 5 ms until it is gone: the seconds from the kill to the first read
  that finds no row. The first release of each
  extension process also loads its request path (client, event loop), so it is shown apart.

    python -m benchmarks.managed_instances                 # both, about a minute
    python -m benchmarks.managed_instances --no-release    # the journal entry only
    python -m benchmarks.managed_instances --python /path/to/python3.13
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from dynalease import DynamoDBClient
from dynalease._engine.journal import Journal
from dynalease._extension.workers import INTERVAL_S

ROOT = Path(__file__).resolve().parents[1]
#: The handlers of the Managed Instances tests (``managed.hold``).
TASK = ROOT / "tests" / "lambda" / "plane_task"
LAUNCHER = ROOT / "src" / "dynalease" / "_extension" / "dynalease-recovery"
#: The key of the README's example, as a guard's entry names it.
EXAMPLE_KEY = "customer:c-1001"


def filesystem(path: Path) -> str:
    """``type (device, options)`` of the mount that holds ``path``, from /proc/self/mounts."""
    target = str(path.resolve())
    best = ("", "unknown", "?", "")
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            device, point, kind, options, *_ = line.split()
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best[0]):
                best = (point, kind, device, options)
    return f"{best[1]} ({best[2]} on {best[0]}, {best[3]})"


def machine() -> str:
    model = "unknown CPU"
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{each:.2f}" for each in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({model}), load average {load}, "
        f"Python {platform.python_version()}, Linux {platform.release()}"
    )


def journal_entry(directory: Path, guards: int = 2_000) -> tuple[list[float], int]:
    """Seconds of each guard's entry (written, then removed), and one entry's bytes."""
    journal = Journal(str(directory))
    journal.record("locks", "warm-up", "warm-up")  # makes and checks the directory once
    journal.forget("warm-up")
    times = []
    for _ in range(guards):
        owner = str(uuid.uuid4())
        start = time.perf_counter()
        journal.record("locks", EXAMPLE_KEY, owner)
        journal.forget(owner)
        times.append(time.perf_counter() - start)
    owner = str(uuid.uuid4())
    journal.record("locks", EXAMPLE_KEY, owner)
    size = (directory / f"{owner}.json").stat().st_size
    journal.forget(owner)
    return times, size


def _spread(seconds: list[float], unit: float, name: str) -> str:
    ordered = [each * unit for each in sorted(seconds)]
    if len(ordered) <= 12:  # too few for percentiles: every figure
        return f"{', '.join(f'{each:.0f}' for each in ordered)} {name}"
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (
        f"median {statistics.median(ordered):.0f}, p90 {p90:.0f}, min {ordered[0]:.0f}, "
        f"max {ordered[-1]:.0f} {name} over {len(ordered)}"
    )


def _python313(given: str | None) -> str:
    if given:
        return given
    if sys.version_info >= (3, 13):
        return sys.executable
    return str(ROOT / ".venv-3.13" / "bin" / "python")  # tests/support/python_venv.sh 3.13


def _layer(directory: Path) -> Path:
    """The layer as the Lambda tests lay it out: the sources, and the extension's launcher."""
    (directory / "python").mkdir(parents=True)
    (directory / "python" / "dynalease").symlink_to(ROOT / "src" / "dynalease")
    (directory / "extensions").mkdir()
    shutil.copy2(LAUNCHER, directory / "extensions" / "dynalease-recovery")
    return directory


def _wait_for(path: Path, within: float = 60.0) -> dict[str, Any]:
    give_up = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > give_up:
            raise TimeoutError(f"{path} never appeared: see the plane's logs")
        time.sleep(0.005)
    body: dict[str, Any] = json.loads(path.read_text())
    return body


def killed_worker_releases(
    python: str, directory: Path, planes: int, kills: int
) -> list[tuple[int, float]]:
    """(kill number in its extension's life, seconds from the kill to the row gone)."""
    from dynalease_dev.lambda_plane import ControlPlane

    from dynalease._tooling.local_server import LocalServer

    from .libs import use_test_credentials

    use_test_credentials()
    found: list[tuple[int, float]] = []
    with LocalServer() as server:
        table = f"mi-{uuid.uuid4().hex[:8]}"
        client = DynamoDBClient(region="us-east-1", endpoint_url=server.url)
        client.sync_create_table(table, partition_key=("key", "S"), wait=True)
        environment = {
            **os.environ,
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_DYNAMODB": server.url,
            "DYNALEASE_TABLE": table,
        }
        for number in range(planes):
            plane = ControlPlane(
                task=TASK,
                handler="managed.hold",
                layer=_layer(directory / f"layer-{number}"),
                environment=environment,
                timeout=30.0,
                journal=directory / f"journal-{number}",
                logs=directory / f"logs-{number}",
                max_concurrency=kills + 1,  # one worker is left to the last answer
                python=python,
            )
            with plane:
                for kill in range(kills):
                    key = f"mi-{uuid.uuid4().hex[:8]}"
                    mark = directory / f"mark-{uuid.uuid4().hex[:8]}"
                    event = {"key": key, "mark": str(mark), "go": str(mark) + ".never"}
                    holder = threading.Thread(target=plane.invoke, args=(event,))
                    holder.start()
                    pid = _wait_for(mark)["pid"]
                    # Each round starts just after the watch's last release: without a
                    # random pause every kill would land at one point of its 0.25 s period.
                    time.sleep(random.uniform(0, INTERVAL_S))
                    os.kill(pid, signal.SIGKILL)
                    killed = time.monotonic()
                    while client.sync_get_item(table, {"key": key}, consistent_read=True):
                        if time.monotonic() - killed > 30:
                            raise TimeoutError(f"the killed worker's row {key} stayed")
                        time.sleep(0.005)
                    found.append((kill, time.monotonic() - killed))
                    holder.join()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal-dir", type=Path, help="where entries go (default: in /tmp)")
    parser.add_argument("--guards", type=int, default=2_000, help="journal entries timed")
    parser.add_argument("--no-release", action="store_true", help="skip the killed workers")
    parser.add_argument("--python", help="a Python 3.13 with awslambdaric (the runtime's)")
    parser.add_argument("--planes", type=int, default=2, help="environments, one extension each")
    parser.add_argument("--kills", type=int, default=5, help="workers killed per environment")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(dir=args.journal_dir or "/tmp") as temporary:
        directory = Path(temporary)
        times, size = journal_entry(directory / "journal", args.guards)
        print(f"journal directory: {directory} on {filesystem(directory)}")
        print(
            f"journal entry (written, then removed), each timed: {_spread(times, 1e6, 'us')}; "
            f"one entry of key {EXAMPLE_KEY!r} in table 'locks': {size} bytes"
        )
        if args.no_release:
            return 0
        python = _python313(args.python)
        releases = killed_worker_releases(python, directory, args.planes, args.kills)
        firsts = [seconds for kill, seconds in releases if kill == 0]
        laters = [seconds for kill, seconds in releases if kill > 0]
        print(f"killed worker -> row gone, first of its extension: {_spread(firsts, 1e3, 'ms')}")
        print(f"killed worker -> row gone, later ones: {_spread(laters, 1e3, 'ms')}")
        print(f"killed worker -> row gone, all: {_spread([s for _, s in releases], 1e3, 'ms')}")
        print(f"machine after: {machine()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
