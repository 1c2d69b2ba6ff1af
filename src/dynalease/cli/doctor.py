"""``dynalease doctor``: check that a table is usable as a lock table, with a fix for each problem.

The checks themselves are :func:`dynalease._tooling.diagnose.diagnose`, which
the demo runs too; this module is the command around them.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_FAILED, EXIT_OK, make_client, table_command


def add_parser(commands: Any) -> None:
    """Register ``doctor`` and its options on the ``dynalease`` subcommands."""
    table_command(
        commands,
        "doctor",
        "check that a table is usable as a lock table, with a fix for each problem",
        "Check a lock table: reachable with these credentials, partition key 'key' "
        "of type S, no sort key, TTL disabled, no global-table replicas. Prints each finding "
        "with its fix; exits 1 when there is a problem. Read-only.",
    )


def run(args: argparse.Namespace) -> int:
    """Print every finding and the verdict; 1 when there is a problem."""
    from .._tooling.diagnose import PROBLEM, diagnose, render

    findings = diagnose(make_client(args), args.table)
    print(render(findings))
    return EXIT_FAILED if any(f.status == PROBLEM for f in findings) else EXIT_OK
