"""``dynalease ls``: who holds what in a lock table: key, kind, holder, held for, lease, fence.

Reads only: a paginated, strongly consistent Scan kept under ``--max-rcu`` read capacity
units a second (about 1 RCU per 4 KB read, so ~0.06 RCU per lock row), so listing never
throttles the table the locks live on. The rows and the observation rule are in
:mod:`dynalease.cli.lock_rows`.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from .._tooling.console import plain_table
from .common import EXIT_OK, make_client, table_command
from .lock_rows import LS_HEADERS, Row, ScanCost, count_rows, holder_text, listed, ls_cells
from .lock_rows import read_rows as read_lock_rows

#: The default read rate: a few percent of an on-demand table's first-second capacity.
DEFAULT_MAX_RCU = 100.0


def add_parser(commands: Any) -> None:
    """Register ``ls`` on the ``dynalease`` subcommands."""
    command = table_command(
        commands,
        "ls",
        "list who holds what: key, kind, holder, held for, lease, fencing token",
        "List the lock rows of a table with their holders (host, PID, Lambda function and "
        "request id, run's command, metadata). Read-only, paginated and kept under --max-rcu "
        "read capacity units a second.",
    )
    scan_options(command)
    command.add_argument("--holder", help="only rows whose holder or owner contains this text")
    command.add_argument("--json", action="store_true", help="one JSON document, for scripts")


def scan_options(command: argparse.ArgumentParser) -> None:
    """``--prefix`` and ``--max-rcu``, shared by the commands that scan (ls, top, gc)."""
    command.add_argument("--prefix", help="only keys starting with this text")
    command.add_argument(
        "--max-rcu",
        type=float,
        default=DEFAULT_MAX_RCU,
        help=f"read capacity units a second the scan stays under (default {DEFAULT_MAX_RCU:g})",
    )


def scan(client: Any, args: argparse.Namespace, cost: ScanCost) -> list[Row]:
    """The rows ``--prefix`` selects, read at ``--max-rcu``."""
    if args.max_rcu <= 0:
        raise ValueError(f"--max-rcu must be more than 0, got {args.max_rcu:g}")
    cost.max_rcu = args.max_rcu
    return read_lock_rows(client, args.table, prefix=args.prefix, cost=cost)


def run(args: argparse.Namespace) -> int:
    """Print the rows once (or as JSON), with what the read cost."""
    client = make_client(args)
    cost = ScanCost()
    started = time.monotonic()
    rows = scan(client, args, cost)
    seconds = time.monotonic() - started
    if args.holder:
        rows = [row for row in rows if _matches(row, args.holder)]
    now = time.time()
    if args.json:
        document = {
            "table": args.table,
            "rows": [listed(row, now) for row in rows],
            "read": {"pages": cost.pages, "rcu": cost.rcu, "seconds": round(seconds, 3)},
        }
        print(json.dumps(document, indent=2, default=str))
        return EXIT_OK
    print(plain_table(LS_HEADERS, ls_cells(rows, now)))
    print(
        f"{count_rows(rows)} in {args.table}; read {cost.pages} page(s), "
        f"{cost.rcu:g} RCU in {seconds:.2f} s"
    )
    return EXIT_OK


def _matches(row: Row, text: str) -> bool:
    owner = row.parsed.owner if row.parsed else ""
    return text in owner or text in holder_text(row.holder)
