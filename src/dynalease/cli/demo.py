"""``dynalease demo``: its options, and the call into :mod:`dynalease_dev.demo`.

The demo itself (processes, checks, the live view) is part of the development
tools (``dev/`` in the repository, ``pip install -e ./dev``; ``make demo`` installs
them), not of the dynalease wheel, and is imported only when the command runs; the
embedded moto server needs the ``dev`` extra. The demo reports a run that could not
happen as :class:`dynalease_dev.demo.plan.DemoError`, which this module turns into
the command's one-line error and exit status.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    NEEDS_MOTO,
    CommandError,
    connection_options,
    count,
    dev_module,
    moto_missing,
    positive_seconds,
    table_name,
)


def add_parser(commands: Any) -> None:
    """Register ``demo`` and its options on the ``dynalease`` subcommands."""
    demo = commands.add_parser(
        "demo",
        help="run workers, Lambda handlers and a crash on a local DynamoDB-compatible server, "
        "and check that no two owners overlapped",
        description="Run worker processes and Lambda-style invocations contending for a few "
        "customer locks, SIGKILL one holder mid-lease, then check the history: no two owners "
        "overlapped and no write committed after its owner was taken over. Without --endpoint "
        "or --region it starts its own moto server on a free loopback port.",
    )
    connection_options(
        demo,
        "an embedded moto server, unless --region is given (then AWS, with --table and the "
        "configured credentials)",
    )
    demo.add_argument(
        "--table",
        type=table_name,
        default=None,
        help="lock table (default: dynalease-demo-locks-<random>); created if missing",
    )
    demo.add_argument(
        "--duration",
        type=positive_seconds,
        default=None,
        help="seconds the workers run (default 100; --quick: 15)",
    )
    demo.add_argument("--quick", action="store_true", help="a short run (about 20 s in all)")
    demo.add_argument(
        "--workers", type=count, default=None, help="worker processes (default 4; --quick: 3)"
    )
    demo.add_argument(
        "--keys", type=count, default=3, help="customer keys the workers contend on (default 3)"
    )
    demo.add_argument(
        "--plain", action="store_true", help="plain progress lines instead of the live view"
    )
    demo.add_argument(
        "--paused-holder",
        action="store_true",
        help="only the paused-holder scenario: a holder stopped past its lease writes late, "
        "without fencing (it lands) and with fencing=True (refused)",
    )
    demo.add_argument(
        "--keep-tables",
        action="store_true",
        help="keep the demo's tables afterwards (tables on an embedded server always go)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when it found no violation, 1 when it did."""
    plan, runner = dev_module("demo.plan"), dev_module("demo.runner")
    if args.endpoint is None and args.region is None and moto_missing():
        raise CommandError(f"{NEEDS_MOTO}, or pass --endpoint URL of a DynamoDB-compatible server")
    # Every field of DemoOptions is an option of the parser above, under its name.
    options = plan.DemoOptions(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(plan.DemoOptions)}
    )
    try:
        return EXIT_OK if runner.run_demo(options) else EXIT_FAILED
    except plan.DemoError as error:
        raise CommandError(str(error), EXIT_USAGE if error.usage else EXIT_FAILED) from None
