"""The workloads of issue 7. Each runs one library once and returns named figures.

In-process workloads share one client per library for the whole run (recovery
makes a fresh one, as a restarted process would); ``startup`` and ``scale`` run
in a child process (:mod:`benchmarks.child`). CPU is this process's CPU time
(all threads, user and system), so a library's background threads count.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .fenced import fenced
from .floor import floor_cycles, floor_elapsed
from .libs import Cost, Lib, make, put_abandoned_row
from .permits import semaphore

Figures = dict[str, float]


@dataclass
class Context:
    """What a workload run needs: the server, a table, the libraries' clients, options."""

    endpoint: str
    table: str
    quick: bool
    libs: dict[str, Lib] = field(default_factory=dict)
    long_hold_s: float = 10.0
    long_hold_lease_s: float = 3.0
    scale_guards: int = 1000
    #: moto answers a few hundred requests a second here: 1,000 leases renewing every
    #: lease/3 must stay well inside that, so the lease is long and the hold spans
    #: one renewal of every lease.
    scale_lease_s: float = 45.0
    scale_hold_s: float = 18.0
    #: Python versions ``lambda_cold`` runs (empty: every one with an interpreter here).
    cold_pythons: list[str] = field(default_factory=list)
    #: False: ``lambda_cold`` runs dynalease's layer without its bytecode (for comparison).
    cold_bytecode: bool = True
    #: ``AWS_LAMBDA_INITIALIZATION_TYPE`` of ``lambda_cold``'s function.
    cold_init_type: str = "on-demand"
    round: int = 0

    def lib(self, name: str) -> Lib:
        """The run's client of library ``name``, made once."""
        if name not in self.libs:
            self.libs[name] = make(name, self.endpoint)
        return self.libs[name]

    def key(self, label: str) -> str:
        """A key no earlier round or library used."""
        return f"{label}-{self.round}-{uuid.uuid4().hex[:8]}"


def _cpu() -> float:
    return time.process_time()


def uncontended(name: str, ctx: Context) -> Figures:
    """100 sequential sync acquire+release cycles on one key, nobody else around."""
    lib = ctx.lib(name)
    cycles = 30 if ctx.quick else 100
    key = ctx.key("uncontended")
    with lib.sync(ctx.table, key):  # warm: the first request may build clients
        pass
    cost = Cost()
    wall, cpu = time.perf_counter(), _cpu()
    for _ in range(cycles):
        guard = lib.sync(ctx.table, key)
        with guard:
            pass
        cost.add(guard)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    # The floor right after, on the same server: a bare client sending the same two
    # signed requests per cycle (benchmarks/floor.py), with no lock logic.
    floor = floor_cycles(ctx.endpoint, ctx.table, ctx.key("floor-cycle"), cycles)
    return {
        "cpu_ms_per_cycle": cpu / cycles * 1000,
        "floor_cpu_ms_per_cycle": floor,
        "cpu_over_floor": cpu / cycles * 1000 / floor,
        "wall_ms_per_cycle": wall / cycles * 1000,
        "requests_per_cycle": cost.requests / cycles,
        "capacity_per_cycle": cost.capacity / cycles,
    }


async def _contenders(
    lib: Lib, table: str, keys: list[str], each: int, hold: float, lease: float
) -> Cost:
    cost = Cost()

    async def contender(key: str) -> None:
        for _ in range(each):
            guard = lib.async_(table, key, lease=lease, wait=60)
            async with guard:
                await asyncio.sleep(hold)
            cost.add(guard)

    await asyncio.gather(*(contender(key) for key in keys))
    return cost


def _contention(name: str, ctx: Context, keys: list[str]) -> Figures:
    lib = ctx.lib(name)
    each = 3 if ctx.quick else 5
    wall, cpu = time.perf_counter(), _cpu()
    cost = asyncio.run(_contenders(lib, ctx.table, keys, each, 0.010, 3.0))
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    completions = len(keys) * each
    return {
        "elapsed_s": wall,
        "cpu_ms_per_completion": cpu / completions * 1000,
        "requests_per_completion": cost.requests / completions,
        "capacity_per_completion": cost.capacity / completions,
    }


def one_key(name: str, ctx: Context) -> Figures:
    """10 async contenders take one key 5 times each, holding it 10 ms (lease 3 s)."""
    key = ctx.key("one-key")
    return _contention(name, ctx, [key] * 10)


def independent(name: str, ctx: Context) -> Figures:
    """10 async contenders take their own key 5 times each, holding it 10 ms.

    Right before, the same requests go out from a bare client (:mod:`.floor`):
    ``elapsed_over_floor`` near 1 means the library waited on the server, which
    serves one request at a time, and not on itself.
    """
    floor = floor_elapsed(
        ctx.endpoint,
        ctx.table,
        [ctx.key(f"floor-{i}") for i in range(10)],
        3 if ctx.quick else 5,
        0.010,
    )
    figures = _contention(name, ctx, [ctx.key(f"independent-{i}") for i in range(10)])
    figures["floor_elapsed_s"] = floor
    figures["elapsed_over_floor"] = figures["elapsed_s"] / floor
    return figures


def active(name: str, ctx: Context) -> Figures:
    """10 locks held together for 4 s on a 3 s lease: renewals while work runs."""
    lib = ctx.lib(name)
    hold = 2.0 if ctx.quick else 4.0
    keys = [ctx.key(f"active-{i}") for i in range(10)]
    wall, cpu = time.perf_counter(), _cpu()
    cost = asyncio.run(_contenders(lib, ctx.table, keys, 1, hold, 3.0))
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    return {
        "elapsed_s": wall,
        "cpu_ms_per_lock": cpu / len(keys) * 1000,
        "renewals_per_lock": cost.renewals / len(keys),
        "requests_per_lock": cost.requests / len(keys),
        "capacity_per_lock": cost.capacity / len(keys),
        "lost": float(cost.lost),
    }


def recovery(name: str, ctx: Context) -> Figures:
    """A crashed holder left a 3 s lease; a fresh client takes the lock over."""
    key = ctx.key("recovery")
    put_abandoned_row(ctx.endpoint, ctx.table, key, 3000)
    lib = make(name, ctx.endpoint)  # a restarted process has no observations
    guard = lib.sync(ctx.table, key, lease=3.0, wait=10.0)
    start = time.perf_counter()
    with guard:
        taken = time.perf_counter() - start
    cost = Cost()
    cost.add(guard)
    return {
        "recovery_s": taken,
        "requests_per_recovery": float(cost.requests),
        "capacity_per_recovery": cost.capacity,
    }


def long_hold(name: str, ctx: Context) -> Figures:
    """One lock held for many leases: what keeping it costs in writes and capacity."""
    lib = ctx.lib(name)
    lease = ctx.long_hold_lease_s
    hold = min(ctx.long_hold_s, 4.0) if ctx.quick else ctx.long_hold_s
    guard = lib.sync(ctx.table, ctx.key("long-hold"), lease=lease)
    cpu = _cpu()
    with guard:
        time.sleep(hold)
    cpu = _cpu() - cpu
    metrics = guard.metrics
    return {
        "writes_per_hold": float(metrics.write_requests),
        "writes_per_lease_held": metrics.write_requests / (hold / lease),
        "capacity_per_hold": float(metrics.consumed_rcu + metrics.consumed_wcu),
        "cpu_ms_per_hold": cpu * 1000,
        "lost": float(bool(metrics.lost)),
    }


def _child(args: list[str], timeout: float) -> tuple[dict[str, Any], float, float]:
    """Run ``python -m benchmarks.child ARGS``; its JSON, spawn-to-exit wall and child CPU."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.child", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child {args[:2]} failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout.strip().splitlines()[-1]), wall, cpu


def _compile_sources() -> None:
    """Write bytecode for dynalease and the benchmarks, as installing a wheel does.

    pip compiles an installed package's modules (pydynox and botocore arrive
    that way), but an editable checkout run with PYTHONDONTWRITEBYTECODE set (as
    some sandboxes and CI images do) would compile dynalease afresh in every new
    process, and ``startup`` would time the compiler. ``compileall`` writes the
    files even then; imports only read them.
    """
    import compileall
    import os

    import dynalease

    for package in (os.path.dirname(dynalease.__file__), os.path.dirname(__file__)):
        compileall.compile_dir(package, quiet=1)


def startup(name: str, ctx: Context) -> Figures:
    """A fresh process: interpreter, import, client, first lock taken and released."""
    if ctx.round == 0:
        _compile_sources()
    report, wall, cpu = _child(["startup", name, ctx.endpoint, ctx.table], 120)
    return {
        "process_to_first_lock_s": wall,
        "first_lock_s": report["first_lock_s"],
        "import_s": report["import_s"],
        "client_s": report["client_s"],
        "first_acquire_s": report["first_acquire_s"],
        "process_cpu_s": cpu,
    }


def script_start(name: str, ctx: Context) -> Figures:
    """A fresh script: import, client, ``sync_table_exists``, first lock (as the examples do)."""
    if ctx.round == 0:
        _compile_sources()
    report, wall, cpu = _child(["script_start", name, ctx.endpoint, ctx.table], 120)
    return {
        "process_wall_s": wall,
        "process_cpu_s": cpu,
        "import_s": report["import_s"],
        "client_s": report["client_s"],
        "table_exists_s": report["table_exists_s"],
        "first_lock_s": report["first_lock_s"],
        "botocore_client_loaded": report["botocore_client_loaded"],
    }


def lambda_cold(name: str, ctx: Context) -> Figures:
    """Lambda's Init plus first invocation, from the library's layer, per Python version.

    Powertools' Logger, the handler module and one locked invoke in a fresh
    interpreter of each version, the layer unpacked where nothing writes bytecode
    (:mod:`benchmarks.layer_cold`). ``cold_s`` is init plus the first invoke;
    ``bytecode``/``compiled`` count the layer's modules loaded with and without
    bytecode on disk.
    """
    from . import layer_cold

    if not ctx.cold_pythons:
        ctx.cold_pythons = layer_cold.available()
        if not ctx.cold_pythons:
            raise RuntimeError("no Python 3.11+ interpreter found for lambda_cold")
    figures: Figures = {}
    for version in ctx.cold_pythons:
        runtime = layer_cold.prepare(version, bytecode=ctx.cold_bytecode)
        report, wall, cpu = layer_cold.run(
            name, runtime, ctx.endpoint, ctx.table, init_type=ctx.cold_init_type
        )
        prefix = f"py{version}_"
        figures[prefix + "cold_s"] = report["init_s"] + report["invoke_s"]
        figures[prefix + "library_import_s"] = report["library_import_s"]
        figures[prefix + "init_s"] = report["init_s"]
        figures[prefix + "invoke_s"] = report["invoke_s"]
        figures[prefix + "process_wall_s"] = wall
        figures[prefix + "process_cpu_s"] = cpu
        figures[prefix + "peak_rss_mb"] = report["peak_rss_mb"]
        figures[prefix + "bytecode"] = report["layer_modules_with_bytecode"]
        figures[prefix + "compiled"] = report["layer_modules_compiled"]
    return figures


def processes(name: str, ctx: Context) -> Figures:
    """8 processes x 5 acquisitions of one key (hold 20 ms, lease 5 s) from a common start.

    Capacity is what the guards report (successful requests); ``cost_rru`` prices
    every request as on-demand bills a small item, failed conditional writes
    included: a write request unit at about five read request units.
    """
    from .processes import run

    report = run(name, ctx.endpoint, ctx.table, ctx.key("processes"))
    if report["overlaps"]:
        raise RuntimeError(f"{name}: two processes held the key at once")
    done = report["completions"]
    writes = report["requests"] - report["reads"]
    return {
        "elapsed_s": report["elapsed_s"],
        "requests_per_completion": report["requests"] / done,
        "reads_per_completion": report["reads"] / done,
        "writes_per_completion": writes / done,
        "capacity_per_completion": report["capacity"] / done,
        "cost_rru_per_completion": (5 * writes + report["reads"]) / done,
        "idle_at_switches_s": report["gap_switch_s"],
        "switches": report["switches"],
    }


def scale(name: str, ctx: Context) -> Figures:
    """1,000 async guards on distinct keys held across renewals, in a process of their own."""
    hold = ctx.scale_hold_s
    lease = ctx.scale_lease_s
    args = [
        "scale",
        name,
        ctx.endpoint,
        ctx.table,
        f"--guards={ctx.scale_guards}",
        f"--lease={lease}",
        f"--hold={hold}",
    ]
    report, _, _ = _child(args, 600)
    return {key: float(value) for key, value in report.items()}


WORKLOADS: dict[str, Callable[[str, Context], Figures]] = {
    "uncontended": uncontended,
    "one_key": one_key,
    "independent": independent,
    "active": active,
    "recovery": recovery,
    "long_hold": long_hold,
    "processes": processes,
    "startup": startup,
    "script_start": script_start,
    "lambda_cold": lambda_cold,
    "scale": scale,
    "fenced": fenced,
    "semaphore": semaphore,
}
#: Workloads that only dynalease can run (pydynox has no fencing tokens).
ONLY = {"fenced": ("dynalease",), "semaphore": ("dynalease",)}
