"""``processes``: 8 processes take one key 5 times each, from a common start.

Every Lambda invocation, ECS task and cron job is its own process: waiters
there learn of a release only by polling (no in-process hand-over). Each
worker (``python -m benchmarks.processes LIB ENDPOINT TABLE KEY``) makes its
client, says ``ready`` and waits for ``go`` on stdin; the parent sends ``go``
to all once every worker is ready. A worker then takes the key 5 times with a
sync guard (lease 5 s, hold 20 ms) and prints its guards' requests and capacity
and when it finished (``time.monotonic()``, one clock for every process on a
machine). Elapsed is from ``go`` to the last worker's last release.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from typing import Any

WORKERS = 8
EACH = 5
HOLD_S = 0.020
LEASE_S = 5.0


def run(
    lib_name: str, endpoint: str, table: str, key: str, workers: int = WORKERS
) -> dict[str, Any]:
    """Start ``workers`` processes, release them together, and sum what they report."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.processes", lib_name, endpoint, table, key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a {lib_name} worker did not start: {line!r}")
        go = time.monotonic()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise RuntimeError(f"a {lib_name} worker failed (exit {proc.returncode})")
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    completions = sum(r["completions"] for r in reports)
    # Who held the key when: the idle time between holds, within one process's run
    # and at a switch to another process (where only polling can tell of the release).
    spans = sorted((s[1], s[2], i) for i, r in enumerate(reports) for s in r["spans"])
    gaps = [(b[0] - a[1], a[2] != b[2]) for a, b in itertools.pairwise(spans)]
    return {
        "elapsed_s": max(r["finished"] for r in reports) - go,
        "completions": completions,
        "requests": sum(r["requests"] for r in reports),
        "reads": sum(r["reads"] for r in reports),
        "capacity": sum(r["capacity"] for r in reports),
        "overlaps": sum(r["overlaps"] for r in reports),
        "gap_same_s": sum(gap for gap, switch in gaps if not switch),
        "gap_switch_s": sum(gap for gap, switch in gaps if switch),
        "switches": sum(switch for _, switch in gaps),
        "held_s": sum(b - a for a, b, _ in spans),
    }


def _worker(lib_name: str, endpoint: str, table: str, key: str) -> None:
    import os

    from benchmarks.libs import make, use_test_credentials

    use_test_credentials()
    lib = make(lib_name, endpoint)
    marker = f"/tmp/dynalease-bench-{key}"  # a crude overlap check: who is inside now
    print("ready", flush=True)
    sys.stdin.readline()
    requests = reads = 0
    capacity = 0.0
    overlaps = 0
    spans = []
    for _ in range(EACH):
        guard = lib.sync(table, key, lease=LEASE_S, wait=60.0)
        asked = time.monotonic()
        with guard:
            entered = time.monotonic()
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                overlaps += 1
                fd = -1
            time.sleep(HOLD_S)
            if fd >= 0:
                os.close(fd)
                os.unlink(marker)
        spans.append((asked, entered, time.monotonic()))
        metrics = guard.metrics
        reads += int(metrics.read_requests)
        requests += int(metrics.read_requests) + int(metrics.write_requests)
        capacity += float(metrics.consumed_rcu) + float(metrics.consumed_wcu)
    finished = time.monotonic()
    print(
        json.dumps(
            {
                "completions": EACH,
                "requests": requests,
                "reads": reads,
                "capacity": capacity,
                "overlaps": overlaps,
                "finished": finished,
                "spans": spans,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    _worker(*sys.argv[1:5])
