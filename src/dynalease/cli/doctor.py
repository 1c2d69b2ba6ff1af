"""``dynalease doctor``: check that a table is usable as a lock table, with a fix for each problem.

The checks themselves are :func:`dynalease._tooling.diagnose.diagnose`, which
the demo runs too; this module is the command around them.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from .._tooling import measure as timing
from ..lock import SyncDistributedLock
from ..transaction import SyncTransaction
from .common import EXIT_FAILED, EXIT_OK, CommandError, make_client, table_command, whole_number

#: The probe's lease: short, so each cycle sees one renewal (every L/3) within a second.
PROBE_LEASE_S = 1.5


def add_parser(commands: Any) -> None:
    """Register ``doctor`` and its options on the ``dynalease`` subcommands."""
    parser = table_command(
        commands,
        "doctor",
        "check that a table is usable as a lock table, with a fix for each problem",
        "Check a lock table: reachable with these credentials, partition key 'key' "
        "of type S, no sort key, TTL disabled (or on dynalease_expires, single-flight "
        "results only), no global-table replicas. Prints each finding "
        "with its fix; exits 1 when there is a problem. Read-only, unless --measure.",
    )
    parser.add_argument(
        "--measure",
        action="store_true",
        help="also run real lock cycles on a probe key (acquire, renew, check_in, release: "
        "the lock's exact permissions), print p50/p99 per request type and the settings "
        "they support; the probe row is removed",
    )
    parser.add_argument(
        "--tries",
        type=whole_number(1),
        default=20,
        metavar="N",
        help="lock cycles for --measure (default 20, about 0.7 s each)",
    )


def run(args: argparse.Namespace) -> int:
    """Print every finding and the verdict; 1 when there is a problem."""
    from .._tooling.diagnose import PROBLEM, diagnose, render  # urllib.request: `doctor` only

    client = make_client(args)
    findings = diagnose(client, args.table)
    print(render(findings))
    if any(f.status == PROBLEM for f in findings):
        return EXIT_FAILED
    if args.measure:
        print()
        print(measure(client, args.table, args.tries))
    return EXIT_OK


def measure(client: Any, table: str, tries: int) -> str:
    """Run ``tries`` lock cycles on a probe key and render their request latencies."""
    timings = timing.Timings()
    timings.install(client)
    key = f"dynalease-doctor-probe-{uuid.uuid4().hex}"
    for _ in range(tries):
        lock = SyncDistributedLock(
            client, table=table, key=key, lease_duration=PROBE_LEASE_S, wait_timeout=5
        )
        with lock as lease:
            renewals = lease.metrics.renewals
            deadline = time.monotonic() + PROBE_LEASE_S
            while lease.metrics.renewals == renewals and time.monotonic() < deadline:
                time.sleep(0.02)
            with SyncTransaction(client) as transaction:
                lease.check_in(transaction)
    if not timings.samples.get("UpdateItem"):
        raise CommandError("--measure saw no renewal; the probe lock was not renewed in time")
    return timing.render(timings, tries)
