"""Requests a semaphore sends, by type, on the local moto server: `python -m benchmarks.semaphore`.

Prints, for N permits: the requests of an uncontended acquisition (goal: one
PutItem), of an acquisition whose first permit is taken but another is free,
and, while every permit is held, the requests per poll of a waiting guard
(goal: one BatchGetItem) over its whole wait. Counts come from a wrapper on the
measuring client's lock transport; nothing is timed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
from typing import Any

from dynalease import DynamoDBClient, LockNotAcquired, SyncDistributedSemaphore
from dynalease._engine.store import Request
from dynalease._tooling.local_server import LocalServer


class Counting:
    """The client's lock transport, counting each operation it sends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.counts: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def handle_async(self, request: Request) -> dict[str, Any]:
        self.counts[request.operation] += 1
        result: dict[str, Any] = await self.inner.handle_async(request)
        return result

    def handle(self, request: Request) -> dict[str, Any]:
        self.counts[request.operation] += 1
        result: dict[str, Any] = self.inner.handle(request)
        return result


def counted_client(url: str) -> tuple[DynamoDBClient, Counting]:
    client = DynamoDBClient(region="us-east-1", endpoint_url=url)
    counting = Counting(client._lock_store.transport)
    client._lock_store.transport = counting
    return client, counting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permits", type=int, default=3)
    parser.add_argument("--wait", type=float, default=3.0, help="the full guard's wait (s)")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with LocalServer() as server:
        client, counting = counted_client(server.url)
        client.sync_create_table("locks", partition_key=("key", "S"), wait=True)
        options: dict[str, Any] = {"table": "locks", "key": "bench", "permits": args.permits}
        uncontended = []
        for _ in range(20):
            counting.counts.clear()
            with SyncDistributedSemaphore(client, **options):
                uncontended.append(counting.counts["PutItem"] + counting.counts["BatchGetItem"])
        held = [SyncDistributedSemaphore(client, **options) for _ in range(args.permits - 1)]
        for guard in held:
            guard.__enter__()
        one_free: collections.Counter[str] = collections.Counter()
        for _ in range(20):
            counting.counts.clear()
            with SyncDistributedSemaphore(client, **options):
                pattern = ", ".join(f"{n} {op}" for op, n in sorted(counting.counts.items()))
                one_free[pattern] += 1
        last = SyncDistributedSemaphore(client, **options)
        last.__enter__()
        held.append(last)
        counting.counts.clear()
        waiting = SyncDistributedSemaphore(client, wait_timeout=args.wait, **options)
        with contextlib.suppress(LockNotAcquired):
            waiting.__enter__()
        full = dict(counting.counts)
        polls = full.get("BatchGetItem", 0)
        for guard in held:
            guard.__exit__(None, None, None)
    print(f"## semaphore requests, {args.permits} permits, moto server")
    print(
        f"uncontended acquisition (first permit free), 20 runs: "
        f"{min(uncontended)}..{max(uncontended)} request(s), "
        f"{sum(uncontended) / len(uncontended):.2f} on average (goal 1 PutItem)"
    )
    shown = "; ".join(f"{pattern} x{runs}" for pattern, runs in one_free.most_common())
    print(f"{args.permits - 1} of {args.permits} held, 20 acquisitions of the last: {shown}")
    print(
        f"all {args.permits} held, one guard waiting {args.wait:g} s: {full}; "
        f"{polls} polls, {full.get('BatchGetItem', 0) / max(polls, 1):.2f} BatchGetItem "
        f"and {full.get('GetItem', 0) / max(polls, 1):.2f} GetItem per poll (goal 1 read)"
    )


if __name__ == "__main__":
    main()
