"""``python -m benchmarks.local_server_memory``: the local server's memory under ``check_in``.

Runs lock cycles against the project's local server (``dynalease._tooling.local_server``,
the one behind ``dynalease local``, the demo, the tests and the soak) in its own
process: each cycle acquires a lock, commits a transaction holding the lock's
``check_in`` and a put of a new item into a table that grows by one item per
cycle, and releases. moto deep-copies every table a transaction names, so before
the item-level snapshots the server grew with the table on every transaction
(2,306 cycles took it from 52 MB to 1.85 GB) and slowed down as it grew.

Printed: the server's resident memory at the start, its peak (``VmHWM``) and at
the end, and transactions per second over the first and the last window of
cycles. The goal: a peak under 300 MB over 10,000 cycles, and an end rate close
to the start rate.
"""

from __future__ import annotations

import argparse
import time
import uuid

from dynalease import DynamoDBClient
from dynalease._tooling.local_server import LocalServer
from dynalease.lock import SyncDistributedLock
from dynalease.transaction import SyncTransaction

from .libs import REGION, create_table, use_test_credentials

GOAL_PEAK_MB = 300.0
PAYLOAD = "x" * 200


def _status_mb(pid: int, field: str) -> float:
    """A memory figure of process ``pid`` from ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} for process {pid}")


def _cycles(client: DynamoDBClient, locks: str, results: str, first: int, count: int) -> float:
    """Run ``count`` cycles (items ``first``.. into ``results``); their transactions per second."""
    started = time.perf_counter()
    for n in range(first, first + count):
        with (
            SyncDistributedLock(client, table=locks, key=f"job-{n % 16}") as lease,
            SyncTransaction(client) as transaction,
        ):
            lease.check_in(transaction)
            transaction.put(results, {"key": f"result-{n:08d}", "payload": PAYLOAD})
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10_000, help="lock cycles (default 10000)")
    parser.add_argument(
        "--window", type=int, default=500, help="cycles per rate window (default 500)"
    )
    args = parser.parse_args()
    if args.cycles < 2 * args.window or args.window < 1:
        parser.error("--cycles must be at least twice --window, and --window at least 1")
    use_test_credentials()
    with LocalServer() as server:
        assert server.pid is not None
        suffix = uuid.uuid4().hex[:8]
        locks, results = f"memory-locks-{suffix}", f"memory-results-{suffix}"
        create_table(server.url, locks)
        create_table(server.url, results)
        client = DynamoDBClient(region=REGION, endpoint_url=server.url)
        start_mb = _status_mb(server.pid, "VmRSS")
        print(
            f"{args.cycles:,} lock cycles (check_in + a put into a growing table) against "
            f"the local server (pid {server.pid}); rates over {args.window:,}-cycle windows"
        )
        done, rates = 0, []
        while done < args.cycles:
            count = min(args.window, args.cycles - done)
            rate = _cycles(client, locks, results, done, count)
            done += count
            rates.append(rate)
            rss = _status_mb(server.pid, "VmRSS")
            print(f"  {done:>7,} cycles  {rate:7.1f} tx/s  server RSS {rss:7.1f} MB", flush=True)
        peak_mb = _status_mb(server.pid, "VmHWM")
        end_mb = _status_mb(server.pid, "VmRSS")
    verdict = "met" if peak_mb < GOAL_PEAK_MB else "MISSED"
    print(f"server RSS: start {start_mb:.1f} MB, peak {peak_mb:.1f} MB, end {end_mb:.1f} MB")
    print(f"transactions per second: start {rates[0]:.1f}, end {rates[-1]:.1f}")
    print(f"goal (peak under {GOAL_PEAK_MB:.0f} MB over {args.cycles:,} cycles): {verdict}")


if __name__ == "__main__":
    main()
