"""Multi-key locks, uncontended, on the local moto server: `python -m benchmarks.multikey`.

For a single-key lock and for multi-key locks of N = 1, 5, 25, 100 keys, prints per
acquire-release cycle: the requests by operation (goal: 2 writes whatever N), the
wall time and this process's CPU time (the client and its runtime thread; the
server runs in its own process), and the write capacity DynamoDB would charge
(moto reports none for a transaction: computed from DynamoDB's rule, a
transactional write of an item up to 1 KB costs 2 WCU, a plain write 1 WCU).

Then the renewal choice: one ``TransactWriteItems`` of N updates against N
``UpdateItem`` requests, wall time per renewal of N rows.

Timings on a shared machine are rough: compare the rows, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from benchmarks.semaphore import counted_client
from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine import protocol as p
from dynalease._tooling.local_server import LocalServer

SIZES = (1, 5, 25, 100)


def _cycles(
    client: DynamoDBClient, counting: Any, options: dict[str, Any], cycles: int
) -> dict[str, Any]:
    walls, cpus = [], []
    counting.counts.clear()
    for _ in range(cycles):
        wall, cpu = time.perf_counter(), time.process_time()
        with SyncDistributedLock(client, table="locks", **options):
            pass
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    counts = {op: n / cycles for op, n in sorted(counting.counts.items())}
    return {"wall": statistics.median(walls), "cpu": statistics.mean(cpus), "counts": counts}


def _renewals(client: DynamoDBClient, n: int, rounds: int) -> tuple[float, float]:
    """Median wall (s) of renewing n rows: one transaction, and n UpdateItem requests."""
    store, runtime = client._lock_store, client._runtime()
    keys = tuple(f"renew:{n}:{index}" for index in range(n))
    owner, version = p.new_token(), p.new_token()
    for key in keys:
        client.sync_put_item(
            "locks",
            {"key": key, "owner": owner, "version": version, "lease_ms": 30000, "protocol": 1},
        )
    together, apart = [], []
    for _ in range(rounds):
        new = p.new_token()
        start = time.perf_counter()
        runtime.run(store.renew_rows("locks", keys, owner, version, new))
        together.append(time.perf_counter() - start)
        version, new = new, p.new_token()

        async def each(current: str, new: str) -> None:
            for key in keys:
                await store.renew_rows("locks", (key,), owner, current, new)

        start = time.perf_counter()
        runtime.run(each(version, new))
        apart.append(time.perf_counter() - start)
        version = new
    return statistics.median(together), statistics.median(apart)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=40, help="cycles per row (default 40)")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with LocalServer() as server:
        client, counting = counted_client(server.url)
        client.sync_create_table("locks", partition_key=("key", "S"), wait=True)
        print(f"{'lock':<18} {'requests per cycle':<38} {'wall ms':>8} {'CPU ms':>7} {'WCU':>5}")
        rows: list[tuple[str, dict[str, Any], int]] = [("single key", {"key": "single"}, 2)]
        rows += [
            (f"keys, N={n}", {"keys": [f"k{n}:{i}" for i in range(n)]}, 4 * n if n > 1 else 2)
            for n in SIZES
        ]
        for name, options, wcu in rows:
            result = _cycles(client, counting, options, args.cycles)
            counts = ", ".join(f"{count:g} {op}" for op, count in result["counts"].items())
            print(
                f"{name:<18} {counts:<38} {result['wall'] * 1000:>8.2f} "
                f"{result['cpu'] * 1000:>7.2f} {wcu:>5}"
            )
        print()
        heads = ("1 TransactWriteItems ms", "N UpdateItem ms", "WCU")
        print(f"{'renewal of N rows':<18} {heads[0]:>24} {heads[1]:>16} {heads[2]:>10}")
        for n in SIZES[1:]:
            together, apart = _renewals(client, n, max(5, args.cycles // 4))
            wcu = f"{2 * n} vs {n}"
            print(f"{'N=' + str(n):<18} {together * 1000:>24.2f} {apart * 1000:>16.2f} {wcu:>10}")


if __name__ == "__main__":
    main()
