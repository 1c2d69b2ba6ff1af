"""``dynalease run --elect``: the command runs on the leader of an election among N machines.

Every machine runs the same ``dynalease run --elect``; each campaigns (until it
leads, or for ``--wait`` seconds when given) on a fenced row at ``--key``, and the
leader runs the command as ``run`` runs it under a lock (stopped on loss the same way).
When the leader dies or loses its lease a standby leads and runs the command; a
command that exits ends its leader's ``run`` with its status and frees the row.
"""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from ..election import SyncElection
from ..lock import SyncDistributedLock
from .common import EXIT_USAGE, CommandError

__all__ = ["add_option", "check", "enter", "wait_given"]


def add_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--elect`` to ``run``'s parser."""
    parser.add_argument(
        "--elect",
        action="store_true",
        help="leader election: run the command on one of the machines running the same "
        "`run --elect`; the others wait (without --wait: for ever) and take over when it "
        "dies or loses its lease. Fenced: the command gets its term as "
        "DYNALEASE_FENCING_TOKEN (docs/election.md)",
    )


def wait_given(args: argparse.Namespace) -> bool:
    """Whether ``--wait`` (or DYNALEASE_WAIT) bounds the campaign; else it has no bound.

    Asked before ``run`` fills its defaults in (a lock's default wait is 0).
    """
    return args.wait is not None or bool(os.environ.get("DYNALEASE_WAIT", "").strip())


def check(args: argparse.Namespace, keys: list[str]) -> None:
    """Refuse what an election cannot be: several keys, or permits."""
    if args.elect and (len(keys) > 1 or args.permits > 1):
        flag = "--permits" if args.permits > 1 else "several --key flags"
        raise CommandError(f"--elect elects one leader on one key; drop {flag}", EXIT_USAGE)


def enter(
    guard: SyncDistributedLock, args: argparse.Namespace, bounded: bool
) -> SyncDistributedLock:
    """Enter ``guard`` (no ``--elect``), or campaign and return the leader's fenced guard."""
    if not args.elect:
        guard.__enter__()
        return guard
    options: dict[str, Any] = {"table": args.table, "name": args.key[0]}
    election = SyncElection(guard._client, lease_duration=args.lease, **options)
    leadership = election.campaign(
        value=socket.gethostname(), wait_timeout=args.wait if bounded else None
    )
    lock = leadership.lock
    assert isinstance(lock, SyncDistributedLock)
    return lock
