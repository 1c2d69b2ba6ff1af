"""The ``semaphore`` workload: a semaphore's acquisitions beside a lock's, dynalease only.

pydynox has no semaphore, so this compares dynalease with itself, as ``fenced``
does: batches of 10 sequential uncontended acquire+release cycles, alternately a
``SyncDistributedSemaphore`` with 3 permits (a free permit: one create) and a
``SyncDistributedLock``, then a guard that waits while all 3 permits are held, whose
reads (one BatchGetItem per poll), writes and CPU are counted over its 1 s wait.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from dynalease import LockNotAcquired, SyncDistributedLock, SyncDistributedSemaphore

from .libs import Cost

if TYPE_CHECKING:
    from .workloads import Context, Figures

BATCH = 10
PERMITS = 3
FULL_WAIT_S = 1.0


def semaphore(name: str, ctx: Context) -> Figures:
    """Semaphore and lock cycles interleaved in batches; then polls while full."""
    client = ctx.lib(name).client
    batches = 3 if ctx.quick else 10
    keys = {True: ctx.key("semaphore"), False: ctx.key("lock")}
    cost = {True: Cost(), False: Cost()}
    cpu = {True: 0.0, False: 0.0}

    def guard(permits: bool) -> Any:
        if permits:
            return SyncDistributedSemaphore(
                client, table=ctx.table, key=keys[True], permits=PERMITS
            )
        return SyncDistributedLock(client, table=ctx.table, key=keys[False])

    for permits in (True, False):  # warm
        with guard(permits):
            pass
    for index in range(batches):
        for permits in (True, False) if index % 2 == 0 else (False, True):
            started = time.process_time()
            for _ in range(BATCH):
                held = guard(permits)
                with held:
                    pass
                cost[permits].add(held)
            cpu[permits] += time.process_time() - started
    cycles = batches * BATCH

    full_key = ctx.key("full")
    holders = [
        SyncDistributedSemaphore(client, table=ctx.table, key=full_key, permits=PERMITS)
        for _ in range(PERMITS)
    ]
    for holder in holders:
        holder.__enter__()
    waiter = SyncDistributedSemaphore(
        client, table=ctx.table, key=full_key, permits=PERMITS, wait_timeout=FULL_WAIT_S
    )
    started = time.process_time()
    try:
        waiter.__enter__()
    except LockNotAcquired:
        pass
    else:
        raise AssertionError("a fourth holder got a permit of a full 3-permit semaphore")
    full_cpu = time.process_time() - started
    for holder in holders:
        holder.__exit__(None, None, None)
    metrics = waiter.metrics
    reads = max(int(metrics.read_requests), 1)  # one BatchGetItem per poll (benchmarks.semaphore)
    return {
        "semaphore_requests_per_cycle": cost[True].requests / cycles,
        "lock_requests_per_cycle": cost[False].requests / cycles,
        "semaphore_cpu_ms_per_cycle": cpu[True] / cycles * 1000,
        "lock_cpu_ms_per_cycle": cpu[False] / cycles * 1000,
        "semaphore_over_lock_cpu": cpu[True] / cpu[False] if cpu[False] else 0.0,
        "full_reads_per_s": reads / FULL_WAIT_S,
        "full_writes": float(metrics.write_requests),
        "full_cpu_ms_per_read": full_cpu / reads * 1000,
    }
