"""``dynalease demo``: see the locks work, and see them checked.

The supervisor (this module) starts an embedded moto server unless
``--endpoint``/``--region`` point elsewhere, creates the lock, results and
history tables, and spawns worker processes (:mod:`dynalease._demo_worker`)
that contend for a few customer keys, plus one process that invokes the example
Lambda handlers on the sample events (:mod:`dynalease._demo_lambda`). Part way
through it SIGKILLs a worker that holds a lock, so the others must recover the
row by observation. At the end it checks what was written:

- the history (``dynalease._history``): no stale commits, no overlaps;
- the counters: each customer's counter equals the commits reported for it
  (a lost update means two holders at once);
- the audits under ``distributed_lock``: no counter changed while held;
- the killed holder's lock was taken over;
- every other process exited cleanly.

Any failure makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ._console import use_rich
from ._demo_state import RELEASED_ROW, DemoState
from ._demo_view import live_view, progress_line, summary_table
from ._local_server import LOCAL_CREDENTIALS, LOCAL_REGION, LocalServer

MIN_DURATION_S = 10.0
KILL_AT = 0.3
PROGRESS_EVERY_S = 5.0
ROW_CHECK_S = 0.1
FRAME_S = 0.25
LAMBDA_FOOTNOTE = (
    "lambda: completions = invocations that returned, gave up = invocations that found "
    "the lock busy, wait = invocation time"
)
EXIT_GRACE_S = 30.0
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Plan:
    """How one demo run is shaped."""

    duration_s: float
    workers: int
    customers: list[str]
    lease_s: float
    hold_max_s: float
    tables: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace, suffix: str) -> Plan:
        quick = bool(args.quick)
        duration = args.duration or (15.0 if quick else 100.0)
        if duration < MIN_DURATION_S:
            from .cli import EXIT_USAGE, CommandError

            raise CommandError(
                f"--duration must be at least {MIN_DURATION_S:g} s so a crash and its "
                f"takeover fit in the run, got {duration:g}",
                EXIT_USAGE,
            )
        locks = args.table or f"dynalease-demo-locks-{suffix}"
        return cls(
            duration_s=duration,
            workers=args.workers or (3 if quick else 4),
            # The sample events name c-1001 and c-2002: the Lambda handlers and the
            # workers contend for the same customers.
            customers=[f"c-{n}00{n}" for n in range(1, args.keys + 1)],
            # A short lease keeps the crash recovery visible within the run.
            lease_s=3.0 if duration < 40 else 5.0,
            hold_max_s=1.2 if duration < 40 else 2.5,
            tables={"locks": locks, "results": f"{locks}-results", "history": f"{locks}-history"},
        )


class Process:
    """One spawned demo process and the thread that reads its events."""

    def __init__(self, name: str, module: str, config: dict[str, Any], env: dict[str, str]):
        self.name = name
        # Closed with the process object; read only to explain a crash.
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )

    def pump(self, events: queue.Queue[tuple[str, dict[str, Any] | None]]) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            try:
                events.put((self.name, json.loads(line)))
            except json.JSONDecodeError:
                continue
        events.put((self.name, None))

    def start(self, timing: dict[str, float]) -> None:
        """Send the run's timing; the process starts working when it reads it."""
        assert self.popen.stdin is not None
        try:
            self.popen.stdin.write(json.dumps(timing).encode() + b"\n")
            self.popen.stdin.close()
        except OSError:
            pass  # it already died; its exit is reported with its events

    def error_tail(self) -> str:
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""


class Demo:
    """One run: setup, supervision, checks and the summary."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.embedded = args.endpoint is None and args.region is None
        self.plan = Plan.from_args(args, uuid.uuid4().hex[:8])
        self.server: LocalServer | None = None
        self.endpoint: str | None = args.endpoint
        self.region: str | None = args.region
        self.env = dict(os.environ)
        self.started = time.monotonic()
        self.state = DemoState(self.started)
        self.processes: dict[str, Process] = {}
        self.events: queue.Queue[tuple[str, dict[str, Any] | None]] = queue.Queue()
        self.created: list[str] = []
        self.failures: list[str] = []
        self.running: set[str] = set()

    # --- setup ------------------------------------------------------------------

    def connect(self) -> Any:
        from .client import DynamoDBClient

        if self.embedded:
            print("starting an embedded moto server on a free loopback port ...", flush=True)
            self.server = LocalServer()
            self.endpoint = self.server.start()
            self.region = LOCAL_REGION
            self.env.update(LOCAL_CREDENTIALS)
            self.env.pop("AWS_PROFILE", None)
            return DynamoDBClient(
                region=self.region,
                endpoint_url=self.endpoint,
                access_key=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                secret_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                connect_timeout=3.0,
            )
        return DynamoDBClient(
            region=self.region,
            endpoint_url=self.endpoint,
            profile=self.args.profile,
            connect_timeout=3.0,
            max_retries=2,
        )

    def create_tables(self, client: Any) -> None:
        from . import _history as history
        from ._demo_worker import CUSTOMER_ATTR
        from ._doctor import PROBLEM, diagnose

        tables = self.plan.tables
        if not client.sync_table_exists(tables["locks"]):
            client.sync_create_table(tables["locks"], partition_key=("key", "S"), wait=True)
            self.created.append(tables["locks"])
        problems = [f for f in diagnose(client, tables["locks"]) if f.status == PROBLEM]
        if problems:
            from .cli import CommandError

            raise CommandError(
                f"table {tables['locks']!r} is not usable for locks: {problems[0].detail} "
                f"(run `dynalease doctor --table {tables['locks']}`)"
            )
        if not client.sync_table_exists(tables["results"]):
            client.sync_create_table(
                tables["results"], partition_key=(CUSTOMER_ATTR, "S"), wait=True
            )
            self.created.append(tables["results"])
        if client.sync_table_exists(tables["history"]):
            from .cli import CommandError

            raise CommandError(
                f"history table {tables['history']!r} already exists; the check needs a fresh "
                "one: delete it or pick another --table"
            )
        history.create_history_table(client, tables["history"])
        self.created.append(tables["history"])

    def drop_tables(self, client: Any) -> None:
        if self.embedded or self.args.keep_tables:
            return
        for table in self.created:
            try:
                client._items.call("DeleteTable", {"TableName": table})
            except Exception as error:  # report and go on: the run's verdict stands
                print(f"could not delete demo table {table!r}: {error}", file=sys.stderr)

    # --- processes --------------------------------------------------------------

    def spawn(self) -> None:
        plan = self.plan
        common = {
            "endpoint": self.endpoint,
            "region": self.region,
            "profile": None if self.embedded else self.args.profile,
            "locks": plan.tables["locks"],
            "results": plan.tables["results"],
            "history": plan.tables["history"],
            "customers": plan.customers,
            "lease_s": plan.lease_s,
            "hold_max_s": plan.hold_max_s,
        }
        for number in range(1, plan.workers + 1):
            name = f"w{number}"
            config = {
                **common,
                "name": name,
                "seed": number,
                "victim": number == 1,
            }
            self._start(name, "dynalease._demo_worker", config)
        from ._demo_lambda import lambda_plan

        lambda_config = lambda_plan(common)
        if lambda_config is None:
            self.state.note("Lambda invocations skipped: examples/lambda or events/ not found")
        else:
            self._start("lambda", "dynalease._demo_lambda", lambda_config, kind="lambda")

    def _start(self, name: str, module: str, config: dict[str, Any], kind: str = "worker") -> None:
        process = Process(name, module, config, self.env)
        self.processes[name] = process
        self.running.add(name)
        self.state.worker(name, kind)
        threading.Thread(target=process.pump, args=(self.events,), daemon=True).start()

    def start_all(self) -> float:
        """Wait until every process is ready, then start them together; returns the end."""
        waiting = set(self.processes)
        deadline = time.monotonic() + START_TIMEOUT_S
        while waiting and time.monotonic() < deadline:
            try:
                name, event = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            if event is None:
                self.running.discard(name)
                waiting.discard(name)
                self.state.exited(name, self.processes[name].popen.wait())
            elif event.get("event") == "ready":
                waiting.discard(name)
                self.state.apply(name, event, time.monotonic())
        if waiting or self.running != set(self.processes):
            from .cli import CommandError

            stuck = sorted(set(self.processes) - (self.running - waiting))
            tail = self.processes[stuck[0]].error_tail()
            raise CommandError(
                f"demo processes did not start: {', '.join(stuck)}" + (f" ({tail})" if tail else "")
            )
        wall, monotonic = time.time(), time.monotonic()
        duration = self.plan.duration_s
        timing = {"end_at": wall + duration, "victim_at": wall + KILL_AT * duration}
        for process in self.processes.values():
            process.start(timing)
        self.state.started = monotonic
        return monotonic + duration

    def stop_processes(self) -> None:
        """Kill whatever is still running (after an interrupt or an error)."""
        for process in self.processes.values():
            if process.popen.poll() is None:
                process.popen.kill()
                process.popen.wait()

    def supervise(self, client: Any, end_at_monotonic: float) -> None:
        live: Any = None
        if use_rich(self.args.plain):
            from rich.live import Live

            live = Live(auto_refresh=False, transient=False)
            live.start()
        where = self.endpoint or f"AWS {self.region}"
        running = self.running
        next_progress = time.monotonic() + PROGRESS_EVERY_S
        hard_stop = end_at_monotonic + 2 * self.plan.lease_s + 2 + EXIT_GRACE_S
        shown = 0
        next_row_check = next_frame = 0.0
        try:
            while running:
                try:
                    name, event = self.events.get(timeout=ROW_CHECK_S)
                except queue.Empty:
                    name, event = "", None
                now = time.monotonic()
                if name and event is None:
                    running.discard(name)
                    process = self.processes[name]
                    self.state.exited(name, process.popen.wait())
                    if process.popen.returncode not in (0, -signal.SIGKILL):
                        self.state.note(
                            f"{name} exited with {process.popen.returncode}: {process.error_tail()}"
                        )
                elif name and event is not None:
                    self.state.apply(name, event, now)
                    self._maybe_kill(name, event, now)
                if now >= next_row_check:
                    self._watch_crashed_row(client, now)
                    next_row_check = now + ROW_CHECK_S
                if now > hard_stop:
                    for name in running:
                        self.failures.append(f"{name} did not finish in time; killed")
                        self.processes[name].popen.kill()
                    hard_stop = float("inf")
                if live is not None:
                    if now >= next_frame:
                        live.update(
                            live_view(self.state, self.plan.duration_s, where), refresh=True
                        )
                        next_frame = now + FRAME_S
                else:
                    for line in self.state.log[shown:]:
                        print(line, flush=True)
                    shown = len(self.state.log)
                    if now >= next_progress:
                        print(progress_line(self.state, self.plan.duration_s), flush=True)
                        next_progress = now + PROGRESS_EVERY_S
        finally:
            if live is not None:
                live.stop()

    def _watch_crashed_row(self, client: Any, now: float) -> None:
        # The row itself says when the lock changed hands, whoever took it (a worker
        # or a Lambda handler): its owner is no longer the killed holder's.
        crash = self.state.crash
        if crash is None or crash.takeover_after_s is not None:
            return
        from .exceptions import DynaleaseError

        try:
            row = client.sync_get_item(
                self.plan.tables["locks"], {"key": crash.key}, consistent_read=True
            )
        except DynaleaseError:
            return  # a throttled or failed read: look again at the next check
        owner = RELEASED_ROW if row is None else str(row.get("owner", ""))
        if owner != crash.owner:
            self.state.taken_over(owner, now)

    def _maybe_kill(self, name: str, event: dict[str, Any], now: float) -> None:
        # Kill right after a confirmed renewal: the row is fresh, so recovery takes
        # a whole observed lease, not a shortcut through an already stale row.
        if (
            self.state.crash is None
            and name == self.state.victim_ready
            and event.get("event") == "renewed"
        ):
            self.processes[name].popen.send_signal(signal.SIGKILL)
            self.state.killed(name, now)

    # --- checks -----------------------------------------------------------------

    def check(self, client: Any) -> list[str]:
        from . import _history as history
        from ._demo_worker import COMMITS_ATTR, CUSTOMER_ATTR

        lines = []
        report = history.check_history(client, self.plan.tables["history"])
        lines.append(
            f"history: {_count(report.keys, 'key')}, "
            f"{_count(report.acquisitions, 'acquisition')}, {_count(report.commits, 'commit')}, "
            f"{_count(report.takeovers, 'takeover')}: "
            f"{report.stale_commits} stale commits, {report.overlaps} overlaps"
        )
        for violation in report.violations:
            self.failures.append(f"history: {violation}")
        counted = {}
        for customer in self.plan.customers:
            item = client.sync_get_item(
                self.plan.tables["results"], {CUSTOMER_ATTR: customer}, consistent_read=True
            )
            counted[customer] = int(item[COMMITS_ATTR]) if item else 0
            reported = self.state.committed.get(customer, 0)
            uncertain = self.state.uncertain.get(customer, 0)
            if not reported <= counted[customer] <= reported + uncertain:
                self.failures.append(
                    f"counter of {customer} is {counted[customer]} but {reported} commits were "
                    "reported: an update was lost, so two holders overlapped"
                )
        lines.append(
            f"counters: {sum(counted.values())} increments counted, "
            f"{sum(self.state.committed.values())} commits reported"
            + (f" ({sum(self.state.uncertain.values())} uncertain)" if self.state.uncertain else "")
        )
        lines.append(
            f"audits under distributed_lock: {self.state.audits}, "
            f"{self.state.audit_changes} saw the counter change while holding the lock"
        )
        if self.state.audit_changes:
            self.failures.append(f"{self.state.audit_changes} audits saw a change under the lock")
        crash = self.state.crash
        if crash is None:
            self.failures.append("the planned crash did not happen (no holder was killed)")
        elif crash.takeover_after_s is None:
            self.failures.append(f"nobody took over {crash.key} after {crash.worker} was killed")
            lines.append(f"crash: SIGKILLed {crash.worker} holding {crash.key}; not taken over")
        else:
            lines.append(
                f"crash: SIGKILLed {crash.worker} holding {crash.key} (lease "
                f"{self.plan.lease_s:g} s); {self.state.successor()} took it over "
                f"{crash.takeover_after_s:.1f} s later"
            )
            if crash.ledger_after and report.takeovers < 1:
                self.failures.append("the history shows no takeover after the crash")
        for name, stats in self.state.workers.items():
            if not stats.killed and stats.exit_code != 0:
                tail = self.processes[name].error_tail()
                self.failures.append(f"{name} exited with {stats.exit_code}: {tail}")
        if self.state.invocations:
            lines.append(
                "Lambda invocations: "
                + ", ".join(
                    f"{handler} {c['ok']} ok, {c['contended']} contended, {c['error']} errors"
                    for handler, c in sorted(self.state.invocations.items())
                )
            )
        return lines

    # --- the run ----------------------------------------------------------------

    def run(self) -> int:
        from .cli import EXIT_FAILED, EXIT_OK

        client = self.connect()
        try:
            self.create_tables(client)
            plan = self.plan
            print(
                f"{plan.workers} workers contend on {len(plan.customers)} customer keys for "
                f"{plan.duration_s:g} s (lease {plan.lease_s:g} s) on "
                f"{self.endpoint or 'AWS ' + str(self.region)}; tables "
                + ", ".join(plan.tables.values()),
                flush=True,
            )
            self.state = DemoState(time.monotonic())
            self.spawn()
            self.supervise(client, self.start_all())
            lines = self.check(client)
        finally:
            self.stop_processes()
            try:
                self.drop_tables(client)
            finally:
                if self.server is not None:
                    self.server.stop()
        print()
        if use_rich(self.args.plain):
            from rich.console import Console

            from ._console import rich_table
            from ._demo_view import SUMMARY_HEADERS, summary_rows

            Console().print(rich_table("summary", SUMMARY_HEADERS, summary_rows(self.state)))
        else:
            print(summary_table(self.state))
        if "lambda" in self.state.workers:
            print(LAMBDA_FOOTNOTE)
        print()
        for line in lines:
            print(line)
        wall = time.monotonic() - self.started
        if self.failures:
            for failure in self.failures:
                print(f"FAILED: {failure}")
            print(
                f"result: FAILED, {_count(len(self.failures), 'problem')} (wall time {wall:.0f} s)"
            )
            return EXIT_FAILED
        print(f"result: OK, 0 violations (wall time {wall:.0f} s)")
        return EXIT_OK


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def run_demo(args: argparse.Namespace) -> int:
    """Entry point of ``dynalease demo``."""
    return Demo(args).run()


def repository_root() -> Path | None:
    """The checkout holding examples/ and events/: the working directory or the source tree."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (candidate / "events").is_dir() and (candidate / "examples" / "lambda").is_dir():
            return candidate
    return None
