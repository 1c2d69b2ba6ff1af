"""The ``dynalease-dev`` command: ``demo`` and ``invoke``, the development tools' commands.

They live here, not in the ``dynalease`` command, because what they run (the demo, the
invoke runner, the local Lambda control plane) is this distribution's, which the
dynalease wheel does not carry. The options, errors and exit codes are the
``dynalease`` command's own (:mod:`dynalease.cli.common`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from dynalease.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    NEEDS_MOTO,
    CommandError,
    Parser,
    connection_options,
    count,
    exit_status,
    moto_missing,
    parsed_command,
    positive_seconds,
    run_command,
    table_name,
)

__all__ = ["main"]

PROG = "dynalease-dev"
_LIFECYCLE = "--lifecycle"


def _add_demo(commands: Any) -> None:
    """Register ``demo`` and its options."""
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


def _add_invoke(commands: Any) -> None:
    """List ``invoke`` in ``--help``; its own parser answers ``invoke --help``."""
    commands.add_parser(
        "invoke",
        help=f"run a Lambda handler with a counting-down context (see `{PROG} invoke --help`;"
        " --lifecycle runs it under a local Lambda control plane, timeouts enforced)",
        add_help=False,
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``dynalease-dev`` with both subcommands."""
    parser = Parser(
        prog=PROG, description=f"dynalease's development tools. `make demo` runs `{PROG} demo`."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    _add_demo(commands)
    _add_invoke(commands)
    return parser


def demo(args: argparse.Namespace) -> int:
    """Run the demo; 0 when it found no violation, 1 when it did."""
    from .demo import plan, runner

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


def invoke(argv: list[str]) -> int:
    """Run ``dynalease-dev invoke ARGV``; returns the exit status.

    With ``--lifecycle`` the handler runs under the local control plane
    (:mod:`dynalease_dev.lifecycle`) instead of in this interpreter.
    """
    with_lifecycle = _LIFECYCLE in argv
    module: Any
    if with_lifecycle:
        from . import lifecycle as module
    else:
        from . import invoke as module
    try:
        status: int = module.main([a for a in argv if a != _LIFECYCLE], Parser)
    except CommandError as error:
        print(f"{PROG} invoke: error: {error}", file=sys.stderr)
        return error.code
    except SystemExit as exit_:  # its argparse exits on --help and usage errors
        if not with_lifecycle and exit_.code == 0 and {"-h", "--help"} & set(argv):
            # One --help shows both forms: --lifecycle's options are its parser's.
            from . import lifecycle

            print(f"\nwith {_LIFECYCLE}:")
            print(lifecycle._parser(Parser).format_help())
        return exit_status(exit_)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dynalease-dev`` command; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["invoke"]:  # it parses its own arguments (handler and event)
        return invoke(args_list[1:])
    args = parsed_command(build_parser(), args_list)
    if isinstance(args, int):
        return args
    return run_command("demo", lambda: demo(args), prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
