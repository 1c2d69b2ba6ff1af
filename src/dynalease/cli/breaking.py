"""``dynalease break KEY``: force-release a stuck holder, after showing it.

Shows the row's holder, asks (or ``--yes``), then breaks only the row shown
(:func:`dynalease.admin.break_lock` with its owner and version): a holder that renewed
in between is not broken. A fenced row keeps its counter. Prints one audit line.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from ..admin import break_lock, holder_of, read_lock_row
from ..keys import validate_key
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandError, make_client, table_command
from .lock_rows import Row, holder_text, row_of


def add_parser(commands: Any) -> None:
    """Register ``break`` on the ``dynalease`` subcommands."""
    command = table_command(
        commands,
        "break",
        "force-release a stuck lock: show its holder, ask, delete only that row",
        "Show who holds KEY, ask, then delete the row only if it still shows that holder "
        "(same owner and version): a holder that renewed in between is never broken. A fenced "
        "row is left free with its counter, so the evicted holder's fenced writes stay "
        "refused. Prints one audit line. The broken holder finds out at its next renewal.",
    )
    command.add_argument("key", metavar="KEY", help="the lock key to break")
    command.add_argument("--yes", action="store_true", help="break without asking")


def run(args: argparse.Namespace) -> int:
    """Show the holder, confirm, break; the audit line goes to stdout."""
    validate_key(args.key, parameter="KEY")
    if not args.yes and not sys.stdin.isatty():
        raise CommandError(
            "stdin is not a terminal, so break cannot ask: pass --yes to break without asking",
            EXIT_USAGE,
        )
    client = make_client(args)
    item = read_lock_row(client, args.table, args.key)
    shown: Row | None = None if item is None else row_of(item, args.table)
    if shown is None or shown.parsed is None:
        what = "no row" if shown is None else shown.problem or "a released fenced row"
        raise CommandError(f"nothing to break at {args.key!r} in {args.table}: {what}")
    parsed = shown.parsed
    print(f"lock {args.key!r} in {args.table}")
    print(f"  owner {parsed.owner}, version {parsed.version}, lease {parsed.lease_ms / 1000:g} s")
    print(f"  holder: {holder_text(holder_of(item or {}))}")
    if parsed.fenced:
        print(f"  fenced, token {parsed.fence}: the counter is kept")
    if not args.yes:
        answer = input("Break this lock? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("not broken")
            return EXIT_FAILED
    broken = break_lock(
        client, table=args.table, key=args.key, owner=parsed.owner, version=parsed.version
    )
    fence = f"; fence kept at {broken.fence}" if broken.fence is not None else ""
    print(
        f"dynalease break: {_who()} broke lock {args.key!r} in table {args.table}, held by "
        f"owner {broken.owner} version {broken.version} ({holder_text(broken.holder)}){fence}"
    )
    return EXIT_OK


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment or the password database
        user = f"uid {os.getuid()}"
    return f"{user}@{os.uname().nodename}"
