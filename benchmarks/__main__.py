"""``python -m benchmarks``: dynalease and pydynox 1.8 side by side on one moto server.

Every workload runs both libraries alternately (the first one swaps each
round) against the same server in the same run, then prints the median of
each figure, the ratio dynalease / pydynox, and the project's goal where one
applies. Examples::

    python -m benchmarks                      # every workload, full size
    python -m benchmarks --quick              # a short run of every workload
    python -m benchmarks one_key uncontended  # selected workloads
    python -m benchmarks --keep-alive         # a moto server that keeps connections open
    python -m benchmarks long_hold --long-hold 600 --long-hold-lease 30   # the 10-minute run
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

from dynalease._tooling.local_server import LocalServer

from .libs import LIBRARIES, create_table, use_test_credentials
from .workloads import ONLY, WORKLOADS, Context, Figures


@dataclass(frozen=True)
class Goal:
    """A target for one figure: a ratio to pydynox, or an absolute bound on dynalease."""

    workload: str
    figure: str
    limit: float
    ratio: bool
    text: str

    def met(self, mine: float, theirs: float) -> bool:
        """True when dynalease's median meets the goal."""
        if self.ratio:
            return theirs > 0 and mine / theirs <= self.limit
        return mine <= self.limit


GOALS = [
    Goal("uncontended", "cpu_ms_per_cycle", 1.0, True, "CPU per cycle <= 1.0x"),
    Goal("uncontended", "cpu_over_floor", 1.5, False, "CPU <= 1.5x the bare client's"),
    Goal("one_key", "elapsed_s", 0.5, True, "elapsed <= 0.5x"),
    Goal("one_key", "requests_per_completion", 1.0, True, "requests/completion <= 1.0x"),
    Goal("independent", "elapsed_s", 1.0, True, "elapsed <= 1.0x"),
    Goal("startup", "process_to_first_lock_s", 1.0, True, "fresh process to first lock <= 1.0x"),
    Goal("processes", "elapsed_s", 0.5, True, "elapsed <= 0.5x"),
    Goal("processes", "requests_per_completion", 1.0, True, "requests/completion <= 1.0x"),
    Goal("script_start", "process_wall_s", 1.0, True, "script start <= 1.0x"),
    *(
        Goal("lambda_cold", f"py{v}_cold_s", 0.8, True, "cold (init + 1st invoke) <= 0.8x")
        for v in ("3.11", "3.12", "3.13", "3.14")
    ),
    Goal("recovery", "recovery_s", 3.25, False, "recovery <= lease + 0.25 s"),
    Goal("scale", "hold_cpu_pct_of_core", 5.0, False, "renewing 1,000 leases <= 5% of a core"),
    Goal("scale", "threads_held", 64.0, False, "no thread per lease (< 64 threads)"),
    Goal("fenced", "fenced_requests_per_cycle", 2.0, False, "fenced cycle <= 2 requests"),
    Goal(
        "semaphore", "semaphore_requests_per_cycle", 2.0, False, "free permit: 2 requests a cycle"
    ),
]


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def _versions() -> str:
    from importlib.metadata import version

    names = ("dynalease", "pydynox", "boto3", "moto")
    return ", ".join(f"{name} {version(name)}" for name in names)


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def run_workload(name: str, ctx: Context, rounds: int) -> dict[str, list[Figures]]:
    """Run one workload ``rounds`` times per library, alternating who goes first."""
    libraries = ONLY.get(name, LIBRARIES)
    results: dict[str, list[Figures]] = {lib: [] for lib in LIBRARIES}
    for index in range(rounds):
        ctx.round = index
        order = libraries if index % 2 == 0 else tuple(reversed(libraries))
        for lib in order:
            results[lib].append(WORKLOADS[name](lib, ctx))
    return results


#: Said of a --quick run's verdicts: its medians of two rounds move, on a shared machine,
#: by more than some goals' margins (docs/benchmarks.md).
INDICATIVE = "indicative only: a --quick run's few rounds on a shared machine"


def report(
    name: str, results: dict[str, list[Figures]], *, quick: bool = False
) -> list[tuple[str, str, float, float]]:
    """Print one workload's medians and ratios; return (workload, figure, mine, theirs) rows.

    ``quick``: the verdicts are marked as indicative only.
    """
    mine_runs, theirs_runs = results["dynalease"], results["pydynox"]
    rows = []
    caveat = f"; verdicts {INDICATIVE}" if quick else ""
    print(f"\n## {name}  ({len(mine_runs)} rounds each, medians{caveat})")
    print(f"| {'figure':<28} | {'dynalease':>10} | {'pydynox':>10} | {'ratio':>6} | goal")
    print(f"|{'-' * 30}|{'-' * 12}|{'-' * 12}|{'-' * 8}|------")
    for figure in mine_runs[0]:
        mine = statistics.median(run[figure] for run in mine_runs)
        # 0 (shown as "-" in the ratio) when pydynox cannot run the workload.
        theirs = statistics.median(run[figure] for run in theirs_runs) if theirs_runs else 0.0
        ratio = f"{mine / theirs:.2f}" if theirs else "-"
        goals = [g for g in GOALS if g.workload == name and g.figure == figure]
        verdict = "; ".join(
            f"{g.text}: {'met' if g.met(mine, theirs) else 'NOT met'}"
            + (" (indicative)" if quick else "")
            for g in goals
        )
        shown = _fmt(theirs) if theirs_runs else "-"
        print(f"| {figure:<28} | {_fmt(mine):>10} | {shown:>10} | {ratio:>6} | {verdict}")
        rows.append((name, figure, mine, theirs))
    sys.stdout.flush()
    return rows


def _trace_into_nothing() -> None:
    """An SDK tracer provider whose spans are recorded, batched and then dropped."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)
    print("tracing: an OpenTelemetry SDK tracer provider (batched, exported nowhere)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help=f"workloads to run (default: all): {', '.join(WORKLOADS)}",
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds and shorter holds")
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds per library (default 5; independent and uncontended 11, active and "
        "long_hold 3, scale 1; quick 2)",
    )
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="serve moto with HTTP keep-alive, as DynamoDB does",
    )
    parser.add_argument("--long-hold", type=float, default=10.0, help="long_hold: seconds held")
    parser.add_argument("--long-hold-lease", type=float, default=3.0, help="long_hold: lease (s)")
    parser.add_argument("--scale-guards", type=int, default=1000, help="scale: guards held")
    parser.add_argument(
        "--cold-python",
        action="append",
        default=[],
        metavar="3.N",
        help="lambda_cold: a Python version to run (repeat; default every one found)",
    )
    parser.add_argument(
        "--cold-without-bytecode",
        dest="cold_bytecode",
        action="store_false",
        help="lambda_cold: dynalease's layer without its bytecode, as built before (to compare)",
    )
    parser.add_argument(
        "--cold-init-type",
        default="on-demand",
        metavar="TYPE",
        help="lambda_cold: AWS_LAMBDA_INITIALIZATION_TYPE in the function's environment "
        "(default on-demand; provisioned-concurrency, snap-start or lambda-managed-instances: "
        "dynalease imports its lock request path during init)",
    )
    parser.add_argument(
        "--tracer-provider",
        action="store_true",
        help="configure an OpenTelemetry SDK tracer provider (spans batched, then dropped): "
        "what tracing costs dynalease; without it no OpenTelemetry module is loaded",
    )
    args = parser.parse_args(argv)
    if args.tracer_provider:
        _trace_into_nothing()
    unknown = [name for name in args.workloads if name not in WORKLOADS]
    if unknown:
        names = ", ".join(WORKLOADS)
        parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {names}")
    selected = args.workloads or list(WORKLOADS)
    use_test_credentials()
    print(f"# dynalease vs pydynox, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {_machine()}")
    print(f"versions: {_versions()}")
    server = "moto, keep-alive" if args.keep_alive else "moto, a connection per request (werkzeug)"
    print(
        f"server: {server}; ratio = dynalease / pydynox; transport: "
        f"{os.environ.get('DYNALEASE_TRANSPORT') or 'default'}"
    )
    rows = []
    started = time.perf_counter()
    with LocalServer(keep_alive=args.keep_alive) as moto:
        endpoint = moto.url
        table = f"bench-{uuid.uuid4().hex[:8]}"
        create_table(endpoint, table)
        ctx = Context(
            endpoint=endpoint,
            table=table,
            quick=args.quick,
            long_hold_s=args.long_hold,
            long_hold_lease_s=args.long_hold_lease,
            scale_guards=args.scale_guards,
            cold_pythons=args.cold_python,
            cold_bytecode=args.cold_bytecode,
            cold_init_type=args.cold_init_type,
        )
        for name in selected:
            rounds = args.rounds or (1 if name == "scale" else 2 if args.quick else 5)
            if name in ("scale", "long_hold", "active") and not args.rounds:
                rounds = min(rounds, 1 if name == "scale" else 3)
            if name in ("independent", "uncontended") and not args.rounds and not args.quick:
                # Short runs (a third of a second set by the server; 100 cycles) whose
                # ratio moves by about 0.1 between 5-round runs on a shared machine:
                # more of them for a steadier median.
                rounds = 11
            # On stderr, so the report on stdout stays one clean document.
            print(
                f"bench: {name} ({rounds} round{'s' if rounds > 1 else ''} of each library) ...",
                file=sys.stderr,
                flush=True,
            )
            rows += report(name, run_workload(name, ctx, rounds), quick=args.quick)
            sys.stdout.flush()
    print("\n## every ratio (dynalease / pydynox)")
    for name, figure, mine, theirs in rows:
        ratio = f"{mine / theirs:.2f}" if theirs else "-"
        print(f"{name:>12} {figure:<28} {ratio:>6}   ({_fmt(mine)} vs {_fmt(theirs)})")
    if args.quick:
        print(f"\nverdicts above: {INDICATIVE}; `python -m benchmarks` (without --quick) decides")
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
