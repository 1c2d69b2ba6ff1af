"""``dynalease ls`` and ``top`` on 1,000 held rows: `python -m benchmarks.operators`.

Holds 1,000 rows on the local moto server (ten multi-key guards of 100 keys, each row
with its holder map), then times the read one ``ls`` (or one ``top`` refresh) makes: a
strongly consistent Scan in pages of 100. Prints per refresh the pages, the wall time,
the read units moto reports and the read units DynamoDB would charge, computed from its
rule (a strongly consistent Scan: 1 RCU per 4 KB of items read, per page, rounded up;
moto may report none). The pacing (``--max-rcu``) is off here so the time is the read's
own; with the default 100 RCU/s a refresh of 1,000 rows takes at least ~0.6 s.

Timings on a shared machine are rough: the read units are the figure to plan with.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from typing import Any

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine.store import Request
from dynalease._tooling.local_server import LocalServer
from dynalease.cli.lock_rows import ScanCost, read_rows

ROWS = 1_000


def item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item, near enough: names plus values as UTF-8 (numbers ~ text)."""
    return sum(len(name.encode()) + len(json.dumps(value).encode()) for name, value in item.items())


def billed_rcu(client: DynamoDBClient, table: str) -> tuple[float, int]:
    """The RCU a strongly consistent Scan of ``table`` in 100-item pages costs, and the
    median row size."""
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True, "Limit": 100}
    units, sizes = 0.0, []
    while True:
        page = client._items.handle(Request("Scan", params))
        page_sizes = [item_bytes(item) for item in page.get("Items", [])]
        sizes += page_sizes
        units += math.ceil(sum(page_sizes) / 4096)
        if "LastEvaluatedKey" not in page:
            return units, int(statistics.median(sizes))
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=5, help="reads timed (default 5)")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with LocalServer() as server:
        client = DynamoDBClient(region="us-east-1", endpoint_url=server.url)
        client.sync_create_table("locks", partition_key=("key", "S"), wait=True)
        guards = [
            SyncDistributedLock(
                client,
                table="locks",
                keys=[f"job:{g}:{i:02}" for i in range(100)],
                lease_duration=60,
                metadata={"batch": g},
            )
            for g in range(ROWS // 100)
        ]
        for guard in guards:
            guard.__enter__()
        walls, reported = [], []
        for _ in range(args.refreshes):
            cost = ScanCost()
            start = time.perf_counter()
            rows = read_rows(client, "locks", cost=cost)
            walls.append(time.perf_counter() - start)
            reported.append(cost.rcu)
            assert len(rows) == ROWS
        billed, size = billed_rcu(client, "locks")
        for guard in guards:
            guard.__exit__(None, None, None)
    print(f"ls / top refresh of {ROWS} held rows (median row {size} bytes with its holder)")
    print(f"  pages per refresh        {cost.pages}")
    print(f"  wall per refresh         {statistics.median(walls) * 1000:.0f} ms (moto, unpaced)")
    print(f"  RCU moto reported        {statistics.median(reported):g}")
    print(f"  RCU DynamoDB would bill  {billed:g} (strongly consistent, 4 KB per unit per page)")
    print(f"  at --max-rcu 100         >= {billed / 100:.2f} s per refresh")


if __name__ == "__main__":
    main()
