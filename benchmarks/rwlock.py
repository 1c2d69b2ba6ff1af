"""Read/write locks on the local moto server: `python -m benchmarks.rwlock`.

Prints two figures (docs/rwlocks.md, "What it costs"):

- **Writer waits under continuous reads**: ``--threads`` reader threads take the key
  for reading back to back (each read holds it ``--hold`` seconds) while one writer
  thread writes every ``--gap`` seconds: the writer's waits, p50, p99 and max, and how
  many reads completed meanwhile. With writer preference the bound is the longest read
  in progress plus the writer's polling, not the stream of reads.
- **A 90%-read workload beside an exclusive lock**: ``--threads`` threads each loop
  over operations, 9 reads in 10, every operation holding the key ``--hold`` seconds;
  once under ``SyncReadLock``/``SyncWriteLock``, once with every operation under one
  ``SyncDistributedLock``: completions per second and requests per completion of each.

Times depend on the machine and its load (printed with the figures); nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._tooling.local_server import LocalServer
from dynalease.rwlock import SyncReadLock, SyncWriteLock

from .semaphore import counted_client

LEASE_S = 10.0
WAIT_S = 60.0


def _loop_until(stop: threading.Event, body: Callable[[], None]) -> None:
    while not stop.is_set():
        body()


def writer_waits(
    client: DynamoDBClient, table: str, threads: int, hold: float, gap: float, seconds: float
) -> tuple[list[float], int]:
    """The writer's waits while ``threads`` readers read continuously; reads completed."""
    stop = threading.Event()
    reads = [0]
    options: dict[str, Any] = {"table": table, "key": "cfg", "lease_duration": LEASE_S}

    def read() -> None:
        with SyncReadLock(client, wait_timeout=WAIT_S, **options):
            time.sleep(hold)
        reads[0] += 1

    readers = [threading.Thread(target=_loop_until, args=(stop, read)) for _ in range(threads)]
    for thread in readers:
        thread.start()
    time.sleep(1.0)  # the readers are in
    waits = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        began = time.monotonic()
        with SyncWriteLock(client, wait_timeout=WAIT_S, **options):
            waits.append(time.monotonic() - began)
            time.sleep(hold)
        time.sleep(gap)
    stop.set()
    for thread in readers:
        thread.join()
    return waits, reads[0]


def mixed(
    client: DynamoDBClient, table: str, threads: int, hold: float, seconds: float, shared: bool
) -> int:
    """Completions of 9-in-10 reads over ``seconds`` (read/write lock, or one exclusive lock)."""
    stop = threading.Event()
    done = [0]
    options: dict[str, Any] = {"table": table, "key": "mixed", "lease_duration": LEASE_S}

    def operation() -> None:
        reading = random.random() < 0.9
        if shared:
            guard: Any = (SyncReadLock if reading else SyncWriteLock)(
                client, wait_timeout=WAIT_S, **options
            )
        else:
            guard = SyncDistributedLock(client, wait_timeout=WAIT_S, **options)
        with guard:
            time.sleep(hold)
        done[0] += 1

    workers = [threading.Thread(target=_loop_until, args=(stop, operation)) for _ in range(threads)]
    for thread in workers:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in workers:
        thread.join()
    return done[0]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--hold", type=float, default=0.02, help="seconds each hold lasts")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between writes")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each phase")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    load = os.getloadavg()[0]
    print(f"cores {os.cpu_count()}, load average {load:.1f} at the start")
    with LocalServer() as server:
        client, counting = counted_client(server.url)
        client.sync_create_table("locks", partition_key=("key", "S"), wait=True)
        waits, reads = writer_waits(
            client, "locks", args.threads, args.hold, args.gap, args.seconds
        )
        print(
            f"writer waits under continuous reads from {args.threads} threads (each read "
            f"{args.hold * 1000:.0f} ms): {len(waits)} writes, "
            f"p50 {statistics.median(waits):.3f} s, "
            f"p99 {_percentile(waits, 0.99):.3f} s, max {max(waits):.3f} s; "
            f"{reads} reads meanwhile"
        )
        for shared in (True, False):
            counting.counts.clear()
            done = mixed(client, "locks", args.threads, args.hold, args.seconds, shared)
            sent = sum(counting.counts.values())
            name = "read/write lock" if shared else "exclusive lock "
            print(
                f"90% reads, {name}: {done / args.seconds:.1f} completions/s, "
                f"{sent / max(done, 1):.2f} requests per completion"
            )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
