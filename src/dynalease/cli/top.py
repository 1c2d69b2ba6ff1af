"""``dynalease top``: a live view of the lock rows, sorted by age or churn, with takeovers
and releases as they happen.

Each refresh is one paced Scan (``ls``'s: ``--max-rcu``), so its cost is the table's size
in read units (about 0.06 RCU per lock row with strongly consistent reads); the footer
says what each refresh read. On a terminal the view redraws in place; otherwise (a pipe,
a log) each refresh prints plain text, as ``inspect --watch`` does (it shares the loop).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from .._redact import escaped
from .common import make_client, table_command
from .inspect import follow, follow_options
from .lock_rows import Row, ScanCost, count_rows, held_for, kind_of, who_holds
from .ls import scan, scan_options

TOP_HEADERS = ("key", "kind", "holder", "held for", "renewals", "takeovers", "last event")


def add_parser(commands: Any) -> None:
    """Register ``top`` on the ``dynalease`` subcommands."""
    command = table_command(
        commands,
        "top",
        "a live view of who holds what, by age or churn, with takeovers and releases",
        "Re-read the lock rows every --interval seconds (one paced Scan each) and show them "
        "sorted by how long they have been held (--sort age) or how often they changed hands "
        "or renewed (--sort churn), with the takeovers and releases seen since it started.",
    )
    scan_options(command)
    command.add_argument("--sort", choices=("age", "churn"), default="age", help="default age")
    follow_options(command, "", interval=2.0)


class Churn:
    """What changed between reads: renewals and takeovers per key, releases, events."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, str]] = {}  # key -> (owner, version)
        self.renewals: dict[str, int] = {}
        self.takeovers: dict[str, int] = {}
        self.last: dict[str, str] = {}
        self.released = 0

    def update(self, rows: list[Row], clock: str) -> None:
        now: dict[str, tuple[str, str]] = {}
        for row in rows:
            if row.parsed is None:
                continue
            key, owner, version = row.key, row.parsed.owner, row.parsed.version
            now[key] = (owner, version)
            before = self._seen.get(key)
            if before is None:
                self.last[key] = f"acquired {clock}" if self._seen else "held at start"
            elif before[0] != owner:
                self.takeovers[key] = self.takeovers.get(key, 0) + 1
                self.last[key] = f"taken over {clock}"
            elif before[1] != version:
                self.renewals[key] = self.renewals.get(key, 0) + 1
        for key in self._seen.keys() - now.keys():
            self.released += 1
            self.last.pop(key, None)
        self._seen = now

    def churn(self, key: str) -> int:
        return self.renewals.get(key, 0) + 10 * self.takeovers.get(key, 0)


def run(args: argparse.Namespace) -> int:
    """Refresh every ``--interval`` until ``--for`` ends or Ctrl-C."""
    client = make_client(args)
    churn = Churn()

    def frame() -> tuple[str, list[tuple[str, ...]]]:
        cost = ScanCost()
        started = time.monotonic()
        rows = scan(client, args, cost)
        seconds, clock, wall = time.monotonic() - started, time.strftime("%H:%M:%S"), time.time()
        churn.update(rows, clock)
        held = [row for row in rows if row.parsed is not None]
        if args.sort == "age":
            held.sort(key=lambda row: -(held_for(row, wall) or 0.0))
        else:
            held.sort(key=lambda row: -churn.churn(row.key))
        cells = [_cells(row, churn, wall) for row in held]
        title = (
            f"{args.table} at {clock}: {count_rows(rows)}, {churn.released} released and "
            f"{sum(churn.takeovers.values())} taken over since start; this refresh read "
            f"{cost.pages} page(s), {cost.rcu:g} RCU in {seconds:.2f} s"
        )
        return title, cells

    return follow(args, TOP_HEADERS, frame)


def _cells(row: Row, churn: Churn, wall: float) -> tuple[str, ...]:
    since = held_for(row, wall)
    return (
        escaped(row.key),
        kind_of(row),
        who_holds(row),
        "-" if since is None else f"{since:.0f} s",
        str(churn.renewals.get(row.key, 0)),
        str(churn.takeovers.get(row.key, 0)),
        churn.last.get(row.key, ""),
    )
