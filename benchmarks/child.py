"""Workloads that need a process of their own: cold start, and 1,000 held leases.

``python -m benchmarks.child startup LIB ENDPOINT TABLE`` imports the library,
makes a client and takes a first lock, printing one JSON line of timings.
``python -m benchmarks.child scale LIB ENDPOINT TABLE --guards N --lease S --hold S``
holds N async guards on distinct keys across renewals and prints wall, CPU,
peak RSS and thread counts. A fresh process per run keeps RSS and threads
honest: nothing from the other library is loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time


def _threads() -> int:
    """Native threads of this process (Python's and any runtime's, e.g. tokio)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def startup(lib_name: str, endpoint: str, table: str) -> dict[str, float]:
    """Import, client, first lock (acquire and release), each timed."""
    start = time.perf_counter()
    from benchmarks.libs import make  # the adapter imports the library lazily

    if lib_name == "dynalease":
        import dynalease.lock  # noqa: F401
    else:
        import pydynox.lock  # noqa: F401
    imported = time.perf_counter()
    lib = make(lib_name, endpoint)
    made = time.perf_counter()
    with lib.sync(table, "startup"):
        locked = time.perf_counter()
    released = time.perf_counter()
    return {
        "import_s": imported - start,
        "client_s": made - imported,
        "first_acquire_s": locked - made,
        "first_lock_s": released - start,
        "cpu_s": _cpu(),
    }


#: A guard of ``scale`` that has not come in or out this long after it should have
#: (it waits at most 60 s) is reported as stuck, and the run goes on without it.
_STUCK_AFTER_S = 120.0


def scale(lib_name: str, endpoint: str, table: str, guards: int, lease: float, hold: float) -> dict:
    """Hold ``guards`` async guards on distinct keys for ``hold`` seconds."""
    import asyncio

    from benchmarks.libs import Cost, make

    lib = make(lib_name, endpoint)
    base_threads = _threads()

    async def run() -> dict[str, float]:
        acquired = 0
        all_acquired = asyncio.Event()
        release = asyncio.Event()
        cost = Cost()
        failures: list[BaseException] = []

        async def hold_one(index: int) -> None:
            nonlocal acquired
            guard = lib.async_(table, f"scale-{index}", lease=lease, wait=60)
            try:
                async with guard:
                    acquired += 1
                    if acquired == guards:
                        all_acquired.set()
                    await release.wait()
            except Exception as error:  # counted and reported, never hidden
                failures.append(error)
                if acquired + len(failures) == guards:
                    all_acquired.set()
            cost.add(guard)

        begin = time.perf_counter()
        cpu_begin = _cpu()
        tasks = [asyncio.ensure_future(hold_one(i)) for i in range(guards)]
        # Every guard waits at most 60 s; a library whose guard is still neither
        # in nor out well after that has a request hanging. Count it, go on.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_acquired.wait(), _STUCK_AFTER_S)
        acquire_s = time.perf_counter() - begin
        acquire_cpu = _cpu() - cpu_begin
        # The hold: only renewals (and whatever the library does per lease) cost CPU.
        hold_start, hold_cpu0 = time.perf_counter(), _cpu()
        hold_usage0 = resource.getrusage(resource.RUSAGE_SELF)
        threads_held = _threads()
        await asyncio.sleep(hold)
        hold_wall = time.perf_counter() - hold_start
        hold_cpu = _cpu() - hold_cpu0
        hold_system = resource.getrusage(resource.RUSAGE_SELF).ru_stime - hold_usage0.ru_stime
        release_start = time.perf_counter()
        release.set()
        _, stuck = await asyncio.wait(tasks, timeout=_STUCK_AFTER_S)
        release_s = time.perf_counter() - release_start
        return {
            "acquire_all_s": acquire_s,
            "acquire_cpu_ms_per_guard": acquire_cpu / guards * 1000,
            "hold_cpu_pct_of_core": hold_cpu / hold_wall * 100,
            # the kernel's share: on loopback it includes TCP work for the server's side
            "hold_system_pct_of_core": hold_system / hold_wall * 100,
            "renewals": float(cost.renewals),
            "lost_or_failed": float(cost.lost + len(failures)),
            "stuck": float(len(stuck)),
            "release_all_s": release_s,
            "threads_base": float(base_threads),
            "threads_held": float(threads_held),
            "wall_s": time.perf_counter() - begin,
            "cpu_s": _cpu() - cpu_begin,
        }

    loop = asyncio.new_event_loop()
    # Not asyncio.run: at exit it would wait for every task, stuck ones included.
    result = loop.run_until_complete(run())
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=["startup", "scale"])
    parser.add_argument("lib")
    parser.add_argument("endpoint")
    parser.add_argument("table")
    parser.add_argument("--guards", type=int, default=1000)
    parser.add_argument("--lease", type=float, default=15.0)
    parser.add_argument("--hold", type=float, default=11.0)
    args = parser.parse_args()
    from benchmarks.libs import use_test_credentials

    use_test_credentials()
    if args.workload == "startup":
        result = startup(args.lib, args.endpoint, args.table)
    else:
        result = scale(args.lib, args.endpoint, args.table, args.guards, args.lease, args.hold)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    # Without waiting for what a stuck guard left running (see ``scale``).
    os._exit(0)


if __name__ == "__main__":
    main()
