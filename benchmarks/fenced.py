"""The ``fenced`` workload: an uncontended fenced cycle beside an unfenced one, dynalease only.

pydynox has no fencing tokens, so this workload compares dynalease with itself:
batches of 10 sequential sync acquire+release cycles on one key, alternately
``fencing=True`` and the default, so drift on the machine lands on both alike.
The goal is the issue's: a fenced cycle costs the same two requests as an
unfenced one (acquire, release), with no read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .libs import Cost

if TYPE_CHECKING:
    from .workloads import Context, Figures

BATCH = 10


def fenced(name: str, ctx: Context) -> Figures:
    """Fenced and unfenced uncontended cycles, interleaved in batches."""
    lib = ctx.lib(name)
    batches = 3 if ctx.quick else 10
    keys = {True: ctx.key("fenced"), False: ctx.key("unfenced")}
    cost = {True: Cost(), False: Cost()}
    cpu = {True: 0.0, False: 0.0}
    wall = {True: 0.0, False: 0.0}
    tokens: list[int] = []

    def guard(fencing: bool) -> object:
        return lib.sync_lock(lib.client, table=ctx.table, key=keys[fencing], fencing=fencing)

    for fencing in (True, False):  # warm: the first request may build clients
        with guard(fencing):  # type: ignore[attr-defined]
            pass
    for index in range(batches):
        for fencing in (True, False) if index % 2 == 0 else (False, True):
            started, started_cpu = time.perf_counter(), time.process_time()
            for _ in range(BATCH):
                held = guard(fencing)
                with held:  # type: ignore[attr-defined]
                    if fencing:
                        tokens.append(held.fencing_token)  # type: ignore[attr-defined]
                cost[fencing].add(held)
            wall[fencing] += time.perf_counter() - started
            cpu[fencing] += time.process_time() - started_cpu
    if tokens != sorted(set(tokens)):
        raise AssertionError(f"fencing tokens did not strictly increase: {tokens}")
    cycles = batches * BATCH
    return {
        "fenced_requests_per_cycle": cost[True].requests / cycles,
        "unfenced_requests_per_cycle": cost[False].requests / cycles,
        "fenced_cpu_ms_per_cycle": cpu[True] / cycles * 1000,
        "unfenced_cpu_ms_per_cycle": cpu[False] / cycles * 1000,
        "fenced_over_unfenced_cpu": cpu[True] / cpu[False] if cpu[False] else 0.0,
        "fenced_wall_ms_per_cycle": wall[True] / cycles * 1000,
        "unfenced_wall_ms_per_cycle": wall[False] / cycles * 1000,
        "fenced_capacity_per_cycle": cost[True].capacity / cycles,
    }
