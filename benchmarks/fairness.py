"""Fair against unfair waiting on one key: `python -m benchmarks.fairness`.

``--threads`` threads (default 10) spread over ``--processes`` processes (default 3)
loop on one key for ``--seconds``, each hold lasting ``--hold`` seconds, three times:
with :class:`~dynalease.fair.SyncFairLock`, with the unfair
:class:`~dynalease.SyncDistributedLock`, and with pydynox 1.8's lock. For each, on the
local moto server:

- the spread of waits: median, p99 and max wait, and max / median;
- overtakes: for each acquisition, how many acquisitions that were *called* later got
  the key first (summed, and the most for one acquisition). Arrival for a fair guard is
  its append to the queue, a request after the call: two calls within that request's
  time may be queued either way, which counts here as an overtake;
- requests per completion (each guard's ``metrics``: reads and writes, renewals too).

Times and counts depend on the machine and its load (printed); nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import threading
import time
from typing import Any

from dynalease._tooling.local_server import LocalServer

from .libs import use_test_credentials

LEASE_S = 10.0
WAIT_S = 120.0
KINDS = ("fair", "unfair", "pydynox")


def _guard(kind: str, client: Any, table: str) -> Any:
    options: dict[str, Any] = {"table": table, "key": "hot", "lease_duration": LEASE_S}
    if kind == "pydynox":
        from pydynox.lock import SyncDistributedLock as PydynoxLock

        return PydynoxLock(client, wait_timeout=WAIT_S, **options)
    if kind == "fair":
        from dynalease.fair import SyncFairLock

        return SyncFairLock(client, wait_timeout=WAIT_S, **options)
    from dynalease import SyncDistributedLock

    return SyncDistributedLock(client, wait_timeout=WAIT_S, **options)


def _client(kind: str, endpoint: str) -> Any:
    if kind == "pydynox":
        import pydynox

        return pydynox.DynamoDBClient(endpoint_url=endpoint, region="us-east-1")
    from dynalease import DynamoDBClient

    return DynamoDBClient(region="us-east-1", endpoint_url=endpoint)


def worker(
    kind: str, endpoint: str, table: str, threads: int, hold: float, until: float, out: Any
) -> None:
    """``threads`` threads looping on the key until ``until`` (time.monotonic, one machine)."""
    use_test_credentials()
    client = _client(kind, endpoint)
    records: list[tuple[float, float, int]] = []
    lock = threading.Lock()

    def loop() -> None:
        while time.monotonic() < until:
            guard = _guard(kind, client, table)
            called = time.monotonic()
            with guard:
                acquired = time.monotonic()
                time.sleep(hold)
            metrics = guard.metrics
            with lock:
                records.append(
                    (called, acquired, int(metrics.read_requests) + int(metrics.write_requests))
                )

    running = [threading.Thread(target=loop) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    out.put(records)


def overtakes(records: list[tuple[float, float, int]]) -> tuple[int, int]:
    """Total and most, over acquisitions, of later calls that acquired first."""
    counts = [
        sum(1 for c2, a2, _ in records if c2 > called and a2 < acquired)
        for called, acquired, _ in records
    ]
    return sum(counts), max(counts, default=0)


def run(kind: str, endpoint: str, args: argparse.Namespace) -> str:
    from dynalease import DynamoDBClient

    table = f"fair-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    DynamoDBClient(region="us-east-1", endpoint_url=endpoint).sync_create_table(
        table, partition_key=("key", "S"), wait=True
    )
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    until = time.monotonic() + 3.0 + args.seconds  # the spawned processes' start included
    shares = [
        args.threads // args.processes + (i < args.threads % args.processes)
        for i in range(args.processes)
    ]
    processes = [
        spawn.Process(target=worker, args=(kind, endpoint, table, n, args.hold, until, out))
        for n in shares
    ]
    for process in processes:
        process.start()
    records = [
        record for _ in processes for record in out.get(timeout=until - time.monotonic() + 180)
    ]
    for process in processes:
        process.join(30)
    waits = [acquired - called for called, acquired, _ in records]
    median = statistics.median(waits)
    ordered = sorted(waits)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    total, most = overtakes(records)
    requests = sum(sent for _, _, sent in records) / len(records)
    return (
        f"{kind:8} {len(records):4} completions, waits median {median:.3f} s, p99 {p99:.3f} s, "
        f"max {max(waits):.3f} s, max/median {max(waits) / median:.1f}; overtakes {total} "
        f"(most for one acquisition {most}); {requests:.2f} requests per completion"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--hold", type=float, default=0.05)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("kinds", nargs="*", default=list(KINDS))
    args = parser.parse_args()
    use_test_credentials()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at the start")
    with LocalServer() as server:
        for kind in args.kinds:
            print(run(kind, server.url, args), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
