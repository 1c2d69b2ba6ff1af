"""What the demo's tables must show at the end of a run.

- the history (:mod:`dynalease_dev.demo.history`): no stale commits, no overlaps;
- the counters: each customer's counter equals the commits reported for it
  (a lost update means two holders at once);
- the audits under ``distributed_lock``: no counter changed while held;
- the killed holder's lock was taken over;
- every other process exited cleanly.
"""

from __future__ import annotations

from typing import Any

from . import history
from .plan import Plan
from .processes import Process
from .state import DemoState
from .worker import COMMITS_ATTR, CUSTOMER_ATTR


def check_run(
    client: Any, plan: Plan, state: DemoState, processes: dict[str, Process]
) -> tuple[list[str], list[str]]:
    """The summary lines of a finished run, and its failures (none when all is well)."""
    lines: list[str] = []
    failures: list[str] = []
    report = history.check_history(client, plan.tables["history"])
    lines.append(
        f"history: {plural(report.keys, 'key')}, "
        f"{plural(report.acquisitions, 'acquisition')}, {plural(report.commits, 'commit')}, "
        f"{plural(report.takeovers, 'takeover')}: "
        f"{report.stale_commits} stale commits, {report.overlaps} overlaps"
    )
    for violation in report.violations:
        failures.append(f"history: {violation}")
    counted = {}
    for customer in plan.customers:
        item = client.sync_get_item(
            plan.tables["results"], {CUSTOMER_ATTR: customer}, consistent_read=True
        )
        counted[customer] = int(item[COMMITS_ATTR]) if item else 0
        reported = state.committed.get(customer, 0)
        uncertain = state.uncertain.get(customer, 0)
        if not reported <= counted[customer] <= reported + uncertain:
            failures.append(
                f"counter of {customer} is {counted[customer]} but {reported} commits were "
                "reported: an update was lost, so two holders overlapped"
            )
    lines.append(
        f"counters: {sum(counted.values())} increments counted, "
        f"{sum(state.committed.values())} commits reported"
        + (f" ({sum(state.uncertain.values())} uncertain)" if state.uncertain else "")
    )
    lines.append(
        f"audits under distributed_lock: {state.audits}, "
        f"{state.audit_changes} saw the counter change while holding the lock"
    )
    if state.audit_changes:
        failures.append(f"{state.audit_changes} audits saw a change under the lock")
    crash = state.crash
    if crash is None:
        failures.append("the planned crash did not happen (no holder was killed)")
    elif crash.takeover_after_s is None:
        failures.append(f"nobody took over {crash.key} after {crash.worker} was killed")
        lines.append(f"crash: SIGKILLed {crash.worker} holding {crash.key}; not taken over")
    else:
        lines.append(
            f"crash: SIGKILLed {crash.worker} holding {crash.key} (lease "
            f"{plan.lease_s:g} s); {state.successor()} took it over "
            f"{crash.takeover_after_s:.1f} s later"
        )
        if crash.ledger_after and report.takeovers < 1:
            failures.append("the history shows no takeover after the crash")
    for name, stats in state.workers.items():
        if not stats.killed and stats.exit_code != 0:
            tail = processes[name].error_tail()
            failures.append(f"{name} exited with {stats.exit_code}: {tail}")
    if state.invocations:
        lines.append(
            "Lambda invocations: "
            + ", ".join(
                f"{handler} {c['ok']} ok, {c['contended']} contended, {c['error']} errors"
                for handler, c in sorted(state.invocations.items())
            )
        )
    return lines, failures


def plural(number: int, noun: str) -> str:
    """``1 key``, ``2 keys``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
