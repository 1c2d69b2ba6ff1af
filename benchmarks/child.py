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


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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


def script_start(lib_name: str, endpoint: str, table: str) -> dict[str, float]:
    """A script's start as the reference examples write it: import, client, table check, lock."""
    start = time.perf_counter()
    if lib_name == "dynalease":
        from dynalease import DynamoDBClient, SyncDistributedLock
    else:
        from pydynox import DynamoDBClient  # type: ignore[no-redef]
        from pydynox.lock import SyncDistributedLock  # type: ignore[assignment]
    imported = time.perf_counter()
    client = DynamoDBClient(endpoint_url=endpoint)
    made = time.perf_counter()
    if not client.sync_table_exists(table):
        raise RuntimeError(f"the benchmark's table {table!r} is missing")
    checked = time.perf_counter()
    with SyncDistributedLock(client, table=table, key="script:start"):
        pass
    done = time.perf_counter()
    return {
        "import_s": imported - start,
        "client_s": made - imported,
        "table_exists_s": checked - made,
        "first_lock_s": done - checked,
        # botocore's client machinery (not only its exception classes) was loaded
        "botocore_client_loaded": float("botocore.client" in sys.modules),
    }


class _Context:
    """What Lambda hands a handler: a name, an ARN, a request id and the time left."""

    function_name = "bench-cold"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-cold"
    log_group_name = "/aws/lambda/bench-cold"
    log_stream_name = "2026/12/04/[$LATEST]bench"

    def __init__(self, timeout_s: float) -> None:
        # Lambda's runtime client takes the request id as text from the Runtime API's
        # Lambda-Runtime-Aws-Request-Id header and imports no uuid module: neither does this
        # stand-in, or the first invoke would be charged uuid's import (with platform's,
        # about 10 ms on 3.11) for whichever library had not loaded it in Init.
        digits = os.urandom(16).hex()
        self.aws_request_id = "-".join(
            (digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:])
        )
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _bytecode_use(layer: str) -> tuple[int, int]:
    """Modules loaded from ``layer``: (with a bytecode file beside them, compiled from source)."""
    with_bytecode = from_source = 0
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        origin = getattr(spec, "origin", None) or ""
        if not origin.startswith(layer) or not origin.endswith(".py"):
            continue
        if spec.cached and os.path.exists(spec.cached):
            with_bytecode += 1
        else:
            from_source += 1
    return with_bytecode, from_source


def lambda_cold(lib_name: str, endpoint: str, table: str) -> dict[str, float]:
    """Lambda's Init and first invocation: import the handler module, build the context, invoke."""
    import io
    import logging

    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    os.environ["DYNALEASE_TABLE"] = table
    os.environ["AWS_LAMBDA_FUNCTION_NAME"] = "bench-cold"
    start = time.perf_counter()
    # Powertools first (both handlers import it first), so the next import times the lock library.
    from aws_lambda_powertools import Logger  # noqa: F401

    powertools = time.perf_counter()
    if lib_name == "dynalease":
        import dynalease.middleware  # noqa: F401

        library = time.perf_counter()
        from benchmarks.handlers import dynalease_handler as module
    else:
        import pydynox.lock  # noqa: F401

        library = time.perf_counter()
        from benchmarks.handlers import pydynox_handler as module  # type: ignore[no-redef]
    imported = time.perf_counter()
    # Powertools' log lines go to a buffer: the benchmark's stdout carries one JSON line.
    for handler in logging.getLogger("bench-cold").handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(io.StringIO())
    context = _Context(30.0)
    result = module.handler({"customer_id": "c-cold"}, context)
    invoked = time.perf_counter()
    if result.get("lock_key") != "customer:c-cold":
        raise RuntimeError(f"the handler answered {result!r}")
    figures = {
        "powertools_import_s": powertools - start,
        "library_import_s": library - powertools,
        "init_s": imported - start,
        "invoke_s": invoked - imported,
        "peak_rss_mb": _peak_rss_mb(),
    }
    layer = os.environ.get("DYNALEASE_BENCH_LAYER")
    if layer:  # run from a layer (benchmarks/layer_cold.py): say where bytecode came from
        figures["layer_modules_with_bytecode"], figures["layer_modules_compiled"] = _bytecode_use(
            layer
        )
    return figures


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
    parser.add_argument("workload", choices=["startup", "script_start", "lambda_cold", "scale"])
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
    elif args.workload == "script_start":
        result = script_start(args.lib, args.endpoint, args.table)
    elif args.workload == "lambda_cold":
        result = lambda_cold(args.lib, args.endpoint, args.table)
    else:
        result = scale(args.lib, args.endpoint, args.table, args.guards, args.lease, args.hold)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    # Without waiting for what a stuck guard left running (see ``scale``).
    os._exit(0)


if __name__ == "__main__":
    main()
