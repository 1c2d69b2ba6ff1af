"""``dynalease gc``: delete abandoned lock rows, by observation, never by TTL.

Two reads of the rows (paced as ``ls``'s): a row whose owner, version and lease are the
same in both, over a window longer than its stored lease, was not renewed: its holder
is gone, by the rule a contender uses to take a row over. Each such row is deleted only
if it still shows that owner and version (:func:`dynalease.admin.break_lock`), so a row
renewed at the last moment is kept. ``--dry-run`` lists them and deletes nothing.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..admin import break_lock
from ..exceptions import LockNotBroken
from .common import EXIT_OK, make_client, positive_seconds, table_command
from .lock_rows import ScanCost, abandoned_rows
from .ls import scan, scan_options

#: Added to the longest lease, so that a row renewed right at its lease is seen renewed.
_WINDOW_MARGIN_S = 0.5


def add_parser(commands: Any) -> None:
    """Register ``gc`` on the ``dynalease`` subcommands."""
    command = table_command(
        commands,
        "gc",
        "delete abandoned lock rows (unchanged for longer than their lease, observed)",
        "Read the rows twice, a little more than the longest stored lease apart; delete each "
        "row unchanged in between (its holder stopped renewing), only if it is still "
        "unchanged. Never TTL: a live holder's row always changes within its lease.",
    )
    scan_options(command)
    command.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    command.add_argument(
        "--window",
        type=positive_seconds,
        default=None,
        help="observe at most this long (default: the longest stored lease); rows with a "
        "longer lease are left undecided",
    )


def run(args: argparse.Namespace) -> int:
    """Observe, then delete (or list) the abandoned rows; print what was done."""
    client = make_client(args)
    cost = ScanCost()
    first = scan(client, args, cost)
    seen = time.monotonic()
    leases = [row.parsed.lease_ms / 1000 for row in first if row.parsed is not None]
    window = max(leases, default=0.0) + _WINDOW_MARGIN_S
    if args.window is not None:
        window = min(window, args.window)
    time.sleep(max(0.0, seen + window - time.monotonic()))
    start = time.monotonic()
    second = scan(client, args, cost)
    found = abandoned_rows(first, second, start - seen)
    undecided = sum(1 for lease in leases if lease >= start - seen)
    deleted = kept = 0
    for row in found:
        assert row.parsed is not None
        if args.dry_run:
            print(f"abandoned: {row.key!r} (owner {row.parsed.owner})")
            continue
        try:
            break_lock(
                client,
                table=args.table,
                key=row.key,
                owner=row.parsed.owner,
                version=row.parsed.version,
            )
        except LockNotBroken:
            kept += 1  # renewed, released or taken over since: not abandoned after all
        else:
            deleted += 1
            print(f"deleted: {row.key!r} (owner {row.parsed.owner})")
    verb = "would delete" if args.dry_run else "deleted"
    print(
        f"gc {args.table}: {len(second)} rows read twice {start - seen:.1f} s apart, "
        f"{len(found)} abandoned, {verb} {len(found) if args.dry_run else deleted}, "
        f"{kept} changed before the delete, {undecided} with a lease over the window; "
        f"scans read {cost.rcu:g} RCU"
    )
    return EXIT_OK
