"""The ``dynalease`` command: inspect, doctor, local, run, break, ls, top and gc.

Importing this package loads argument parsing and the library's faces (which every
command but ``--help`` uses); boto3, moto and rich are imported by the subcommand
that needs them, so ``dynalease --help`` answers at once. Every failure a user
can cause (a bad option, an unknown table, missing credentials, an unreachable
endpoint) is reported as one line on stderr with exit code 2 (bad input) or 1 (the
environment or the check failed), never as a traceback.

Each command is a module here with ``add_parser(commands)`` and ``run(args)``;
what they share (exit codes, :class:`~dynalease.cli.common.CommandError`, the
connection options, the client factory) is in :mod:`dynalease.cli.common`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence

from .. import __version__
from . import breaking, doctor, gc, inspect, local, ls, run, top
from .common import Parser, parsed_command, run_command

__all__ = ["main"]

_DESCRIPTION = """\
Distributed locks (leases) on one DynamoDB table.
"""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``dynalease`` with every subcommand."""
    parser = Parser(
        prog="dynalease",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dynalease {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in (inspect, doctor, local, run, breaking, ls, top, gc):
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dynalease`` command; returns the exit status."""
    try:
        status = _dispatch(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a reader that went away shows here, not as Python exits
    except BrokenPipeError:
        # `dynalease doctor | head -2`: stop quietly, as Unix tools do, with the status
        # of a tool a SIGPIPE ended; what is left to write goes nowhere.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return status


def _dispatch(args_list: list[str]) -> int:
    # `run` splits its options from the command at `--` itself.
    if args_list[:1] == ["run"]:
        return run.main(args_list[1:])
    args = parsed_command(build_parser(), args_list)
    if isinstance(args, int):
        return args
    commands = {"inspect": inspect, "doctor": doctor, "local": local}
    commands.update({"break": breaking, "ls": ls, "top": top, "gc": gc})
    command = commands[args.command]
    return run_command(args.command, lambda: command.run(args))
