"""Single flight on the local server: `python -m benchmarks.single_flight`.

Prints the requests of one call by type (a plain lock's cycle, a single-flight
runner, a later caller within ``result_ttl``), then a burst: N callers (``--callers``,
20) for one key released at once, the function taking ``--work`` seconds (1.0): how many
runs, the requests of the whole burst, and the time from the runner's return to the last
caller's, once with the callers in one process (one client: the release wakes them) and
once each with a client of its own, as separate processes have (they poll the lock row).
Counts are exact; times move with the machine's load (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import threading
import time

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._tooling.local_server import LocalServer
from dynalease.single_flight import SingleFlight, single_flight

from .semaphore import Counting


def counted(url: str, counts: collections.Counter[str]) -> DynamoDBClient:
    """A client whose lock and item requests are all counted in ``counts``."""
    client = DynamoDBClient(region="us-east-1", endpoint_url=url)
    locks, items = Counting(client._lock_store.transport), Counting(client._items)
    locks.counts = items.counts = counts
    client._lock_store.transport = locks
    client._items = items
    return client


def shown(counts: collections.Counter[str]) -> str:
    return f"{sum(counts.values())} ({', '.join(f'{n} {op}' for op, n in sorted(counts.items()))})"


def burst(clients: list[DynamoDBClient], callers: int, work_s: float) -> tuple[int, float]:
    """``callers`` calls for one key at once: the runs, and the runner's return to the last."""
    key = f"burst-{time.monotonic_ns()}"
    runs: list[float] = []
    returned: list[float] = []
    barrier = threading.Barrier(callers)

    def call(client: DynamoDBClient) -> None:
        @single_flight(client, table="locks", key=key, lease_duration=30, wait_timeout=120)
        def work() -> str:
            time.sleep(work_s)
            runs.append(time.monotonic())
            return "done"

        barrier.wait()
        work()
        returned.append(time.monotonic())

    threads = [
        threading.Thread(target=call, args=(clients[i % len(clients)],)) for i in range(callers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(runs), max(returned) - runs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=20)
    parser.add_argument("--work", type=float, default=1.0, help="the function's seconds")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with LocalServer() as server:
        counts: collections.Counter[str] = collections.Counter()
        client = counted(server.url, counts)
        client.sync_create_table("locks", partition_key=("key", "S"), wait=True)
        with SyncDistributedLock(client, table="locks", key="warm"):
            pass
        counts.clear()
        with SyncDistributedLock(client, table="locks", key="plain"):
            pass
        print(f"plain lock cycle:                      {shown(counts)}")
        counts.clear()

        @single_flight(client, table="locks", key="once", flight=SingleFlight(result_ttl=60))
        def once() -> int:
            return 1

        once()
        print(f"runner (result_ttl=60):                {shown(counts)}")
        counts.clear()
        once()
        print(f"later caller within result_ttl:        {shown(counts)}")

        for label, clients in (
            ("one process (one client)", [client]),
            ("a client each (as processes)", None),
        ):
            drains, runs_seen = [], []
            for _ in range(args.rounds):
                if clients is None:
                    each = [counted(server.url, counts) for _ in range(args.callers)]
                else:
                    each = clients
                counts.clear()
                runs, drain = burst(each, args.callers, args.work)
                drains.append(drain)
                runs_seen.append(runs)
            print(
                f"burst of {args.callers}, {label}: runs {runs_seen}, last burst's requests "
                f"{shown(counts)}, runner's return to the last caller's: median "
                f"{statistics.median(drains):.3f} s (min {min(drains):.3f}, "
                f"max {max(drains):.3f})"
            )


if __name__ == "__main__":
    main()
