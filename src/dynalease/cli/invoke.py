"""``dynalease invoke``: run a Lambda handler with a counting-down context.

The command parses its own arguments: the handler, the event and the settings
are :mod:`dynalease_dev.invoke`'s (the development tools, ``dev/`` in the
repository), which the demo and the tests also use to call handlers; with
``--lifecycle``, :mod:`dynalease_dev.lifecycle`'s. This module lists the command
in ``dynalease --help`` and hands the rest of the command line over.
"""

from __future__ import annotations

import sys
from typing import Any

from .common import CommandError, Parser, dev_module, exit_status

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
    (``dynalease_dev/lifecycle.py``) instead of in this interpreter.
    """
    lifecycle = _LIFECYCLE in argv
    try:
        module = dev_module("lifecycle" if lifecycle else "invoke")
        status: int = module.main([a for a in argv if a != _LIFECYCLE], Parser)
    except CommandError as error:
        print(f"dynalease invoke: error: {error}", file=sys.stderr)
        return error.code
    except SystemExit as exit_:  # its argparse exits on --help and usage errors
        if not lifecycle and exit_.code == 0 and {"-h", "--help"} & set(argv):
            # One --help shows both forms: --lifecycle's options are its parser's.
            print(f"\nwith {_LIFECYCLE}:")
            print(dev_module("lifecycle")._parser(Parser).format_help())
        return exit_status(exit_)
    return status
