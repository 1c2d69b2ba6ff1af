"""How the demo shows itself: a live rich view, plain progress lines, the summary table."""

from __future__ import annotations

import time
from typing import Any

from dynalease._tooling.console import plain_table, rich_table

from .state import COMPLETED, GAVE_UP, LOST, DemoState, WorkerStats, percentile

RECENT = 8

#: Short enough for an 80-column terminal; SUMMARY_FOOTNOTE says what they count.
SUMMARY_HEADERS = (
    "worker",
    "done",
    "gave up",
    "lost",
    "wait p50",
    "wait p95",
    "writes",
    "reads",
    "renewals",
)
SUMMARY_FOOTNOTE = "done = guards completed, wait = time to acquire, writes/reads = requests a lock"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _mean(values: list[int]) -> str:
    return "-" if not values else f"{sum(values) / len(values):.2f}"


def summary_rows(state: DemoState) -> list[tuple[str, ...]]:
    """One row per process: completions, waits and requests per lock."""
    rows: list[tuple[str, ...]] = []
    for stats in state.workers.values():
        name = stats.name + (" (killed)" if stats.killed else "")
        rows.append(
            (
                name,
                str(stats.outcomes[COMPLETED]),
                str(stats.outcomes[GAVE_UP]),
                str(stats.outcomes[LOST]),
                _ms(percentile(stats.waits_ms, 0.5)),
                _ms(percentile(stats.waits_ms, 0.95)),
                _mean(stats.writes),
                _mean(stats.reads),
                str(stats.renewals),
            )
        )
    return rows


def _doing(stats: WorkerStats, now: float) -> str:
    if stats.state in ("holding", "waiting"):
        return f"{stats.state} {stats.key} ({now - stats.since:.1f} s)"
    return stats.state


def progress_line(state: DemoState, duration: float) -> str:
    """One plain line of progress."""
    holders = ", ".join(f"{key}={s.holder or '-'}" for key, s in sorted(state.keys.items()) if key)
    return (
        f"[{state.elapsed():5.1f}/{duration:.0f} s] acquisitions {state.acquisitions}, "
        f"renewals {state.renewals}, takeovers {state.takeovers}; holders: {holders}"
    )


def live_view(state: DemoState, duration: float, where: str) -> Any:
    """The rich renderable for one refresh."""
    from rich.console import Group
    from rich.text import Text

    now = time.monotonic()
    keys = rich_table(
        "locks",
        ("key", "holder", "held for", "renewals", "waiting"),
        [
            (
                key,
                s.holder or "-",
                f"{now - s.since:.1f} s" if s.holder else "-",
                str(s.renewals) if s.holder else "-",
                ", ".join(sorted(s.waiting)) or "-",
            )
            for key, s in sorted(state.keys.items())
            if key
        ],
    )
    workers = rich_table(
        "processes",
        ("process", "doing", "completions", "gave up", "renewals"),
        [
            (
                w.name,
                _doing(w, now),
                str(w.outcomes[COMPLETED]),
                str(w.outcomes[GAVE_UP]),
                str(w.renewals),
            )
            for w in state.workers.values()
        ],
    )
    header = Text(
        f"dynalease-dev demo on {where}: {state.elapsed(now):.0f}/{duration:.0f} s, "
        f"{state.acquisitions} acquisitions, {state.renewals} renewals, "
        f"{state.takeovers} takeovers",
        style="bold",
    )
    return Group(header, keys, workers, Text("\n".join(state.log[-RECENT:]) or "(no events yet)"))


def summary_table(state: DemoState) -> str:
    """The final per-process table as plain text."""
    return plain_table(SUMMARY_HEADERS, summary_rows(state))
