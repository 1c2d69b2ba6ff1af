"""``dynalease invoke``: run a Lambda handler with a counting-down context.

The command parses its own arguments: the handler, the event and the settings
are :mod:`dynalease._lambda.invoke`'s, which the demo and the tests also use to
call handlers. This module lists the command in ``dynalease --help`` and hands
the rest of the command line over.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from .common import EXIT_FAILED, Parser, exit_status

_MACHINERY = "dynalease._lambda.invoke"
_LIFECYCLE = "--lifecycle"


def add_parser(commands: Any) -> None:
    """List ``invoke`` in ``dynalease --help``; its own parser answers ``invoke --help``."""
    commands.add_parser(
        "invoke",
        help="run a Lambda handler with a counting-down context (see `dynalease invoke --help`;"
        " --lifecycle runs it under a local Lambda control plane, timeouts enforced)",
        add_help=False,
    )


def run(argv: list[str]) -> int:
    """Run ``dynalease invoke ARGV``; returns the exit status.

    With ``--lifecycle`` the handler runs under the local control plane
    (``_tooling/lifecycle.py``) instead of in this interpreter.
    """
    if _LIFECYCLE in argv:
        from .._tooling import lifecycle

        try:
            return lifecycle.main([a for a in argv if a != _LIFECYCLE], Parser)
        except SystemExit as exit_:
            return exit_status(exit_)
    # Imported by name: the Lambda tooling is an optional part of an installation.
    try:
        module = importlib.import_module(_MACHINERY)
    except ModuleNotFoundError as error:
        if error.name != _MACHINERY:
            raise
        print(
            f"dynalease invoke: unavailable in this installation ({_MACHINERY} is missing)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        status: int = module.main(argv, Parser)
    except SystemExit as exit_:  # its argparse exits on --help and usage errors
        return exit_status(exit_)
    return status
