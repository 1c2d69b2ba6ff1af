"""``dynalease-dev demo``: see the locks work, and see them checked.

The supervisor (this module) starts an embedded moto server unless the options
point elsewhere (an endpoint or a Region), creates the lock, results and history
tables, and spawns worker processes (:mod:`dynalease_dev.demo.worker`) that contend
for a few customer keys, plus one process that invokes the example Lambda
handlers on the sample events (:mod:`dynalease_dev.demo.lambda_invocations`). Part
way through it SIGKILLs a worker that holds a lock, so the others must recover
the row by observation. At the end it checks what was written
(:mod:`dynalease_dev.demo.checks`); any failure makes the run fail.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
import uuid
from typing import Any

from dynalease._engine.store import Request
from dynalease._tooling import LOCAL_CREDENTIALS, LOCAL_REGION
from dynalease._tooling.console import use_rich
from dynalease._tooling.local_server import LocalServer

from .checks import check_run, plural
from .plan import DemoError, DemoOptions, Plan
from .processes import Events, Process
from .state import RELEASED_ROW, DemoState
from .view import SUMMARY_FOOTNOTE, live_view, progress_line, summary_table

KILL_AT = 0.3
PROGRESS_EVERY_S = 5.0
ROW_CHECK_S = 0.1
FRAME_S = 0.25
LAMBDA_FOOTNOTE = "lambda: done = invocations returned, gave up = lock busy, wait = invocation time"
EXIT_GRACE_S = 30.0
START_TIMEOUT_S = 120.0


class Demo:
    """One run: setup, supervision, checks and the summary."""

    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.embedded = options.endpoint is None and options.region is None
        self.plan = Plan.from_options(options, uuid.uuid4().hex[:8])
        self.server: LocalServer | None = None
        self.endpoint: str | None = options.endpoint
        self.region: str | None = options.region
        self.env = dict(os.environ)
        self.started = time.monotonic()
        self.state = DemoState(self.started)
        self.processes: dict[str, Process] = {}
        self.events: Events = queue.Queue()
        self.created: list[str] = []
        self.failures: list[str] = []
        self.running: set[str] = set()

    # --- setup ------------------------------------------------------------------

    def connect(self) -> Any:
        from dynalease.client import DynamoDBClient

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
            profile=self.options.profile,
            connect_timeout=3.0,
            max_retries=2,
        )

    def create_tables(self, client: Any) -> None:
        from dynalease._tooling.diagnose import PROBLEM, diagnose

        from . import history
        from .worker import CUSTOMER_ATTR

        tables = self.plan.tables
        if not client.sync_table_exists(tables["locks"]):
            client.sync_create_table(tables["locks"], partition_key=("key", "S"), wait=True)
            self.created.append(tables["locks"])
        problems = [f for f in diagnose(client, tables["locks"]) if f.status == PROBLEM]
        if problems:
            raise DemoError(
                f"table {tables['locks']!r} is not usable for locks: {problems[0].detail} "
                f"(run `dynalease doctor --table {tables['locks']}`)"
            )
        if not client.sync_table_exists(tables["results"]):
            client.sync_create_table(
                tables["results"], partition_key=(CUSTOMER_ATTR, "S"), wait=True
            )
            self.created.append(tables["results"])
        if client.sync_table_exists(tables["history"]):
            raise DemoError(
                f"history table {tables['history']!r} already exists; the check needs a fresh "
                "one: delete it or pick another --table"
            )
        history.create_history_table(client, tables["history"])
        self.created.append(tables["history"])

    def drop_tables(self, client: Any) -> None:
        if self.embedded or self.options.keep_tables:
            return
        for table in self.created:
            try:
                client._items.handle(Request("DeleteTable", {"TableName": table}))
            except Exception as error:  # report and go on: the run's verdict stands
                print(f"could not delete demo table {table!r}: {error}", file=sys.stderr)

    # --- processes --------------------------------------------------------------

    def spawn(self) -> None:
        plan = self.plan
        common = {
            "endpoint": self.endpoint,
            "region": self.region,
            "profile": None if self.embedded else self.options.profile,
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
            self._start(name, "dynalease_dev.demo.worker", config)
        from .lambda_invocations import lambda_plan

        lambda_config = lambda_plan(common)
        if lambda_config is None:
            self.state.note("Lambda invocations skipped: examples/lambda or events/ not found")
        else:
            self._start(
                "lambda", "dynalease_dev.demo.lambda_invocations", lambda_config, kind="lambda"
            )

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
            stuck = sorted(set(self.processes) - (self.running - waiting))
            tail = self.processes[stuck[0]].error_tail()
            raise DemoError(
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
        if use_rich(self.options.plain):
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
        from dynalease.exceptions import DynaleaseError

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
        """Check what the run wrote; failures go to ``self.failures``, lines are returned."""
        lines, failures = check_run(client, self.plan, self.state, self.processes)
        self.failures.extend(failures)
        return lines

    # --- the run ----------------------------------------------------------------

    def run(self) -> bool:
        """Set up, run, check and print the summary; True when no violation was found."""
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
        # Plain text even on a terminal: it fits 80 columns, as the README shows it.
        print(summary_table(self.state))
        print(SUMMARY_FOOTNOTE)
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
                f"result: FAILED, {plural(len(self.failures), 'problem')} (wall time {wall:.0f} s)"
            )
            return False
        print(f"result: OK, 0 violations (wall time {wall:.0f} s)")
        return True


def run_demo(options: DemoOptions) -> bool:
    """Run the demo; True when it found no violation. Raises :class:`DemoError`."""
    if options.paused_holder:
        return run_paused(Demo(options))
    return Demo(options).run()


def run_paused(demo: Demo) -> bool:
    """``--paused-holder``: only the paused-holder scenario (:mod:`.paused`), both ways."""
    from .paused import run_paused_holder

    client = demo.connect()
    table = demo.plan.tables["locks"]
    try:
        if not client.sync_table_exists(table):
            client.sync_create_table(table, partition_key=("key", "S"), wait=True)
            demo.created.append(table)
        ok = run_paused_holder(client, demo.endpoint, demo.region, table, demo.env)
    finally:
        try:
            demo.drop_tables(client)
        finally:
            if demo.server is not None:
                demo.server.stop()
    print(f"result: {'OK' if ok else 'FAILED'}")
    return ok
