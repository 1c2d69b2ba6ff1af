"""The ``dynalease`` command: demo, inspect, doctor and invoke.

Importing this module is cheap: argument parsing only. boto3, moto and rich are
imported by the subcommand that needs them, so ``dynalease --help`` answers at
once. Every failure a user can cause (a bad option, an unknown table, missing
credentials, an unreachable endpoint) is reported as one line on stderr with
exit code 2 (bad input) or 1 (the environment or the check failed), never as a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .client import DynamoDBClient

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_DESCRIPTION = """\
Distributed locks (leases) on one DynamoDB table. `make demo` runs `dynalease demo`.
"""


class CommandError(Exception):
    """A failure to report as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def _connection_options(parser: argparse.ArgumentParser, endpoint_default: str = "") -> None:
    group = parser.add_argument_group("AWS connection")
    group.add_argument(
        "--endpoint",
        metavar="URL",
        help="DynamoDB endpoint URL (e.g. http://127.0.0.1:8000); default: "
        + (
            endpoint_default
            or "the AWS configuration chain (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, "
            "or AWS itself)"
        ),
    )
    group.add_argument(
        "--region", metavar="REGION", help="AWS Region; default: AWS_REGION or the profile's"
    )
    group.add_argument(
        "--profile", metavar="NAME", help="named profile from the shared AWS config files"
    )


def _table_name(value: str) -> str:
    from .client import check_table_name

    try:
        return check_table_name(value)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not 0 < seconds <= 86_400:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 86400], got {value!r}")
    return seconds


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if not 1 <= number <= 64:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to 64, got {value!r}")
    return number


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dynalease",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"dynalease {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    demo = commands.add_parser(
        "demo",
        help="run workers, Lambda handlers and a crash on a local DynamoDB-compatible server, "
        "and check that no two owners overlapped",
        description="Run worker processes and Lambda-style invocations contending for a few "
        "customer locks, SIGKILL one holder mid-lease, then check the history: no two owners "
        "overlapped and no write committed after its owner was taken over. Without --endpoint "
        "or --region it starts its own moto server on a free loopback port.",
    )
    _connection_options(
        demo,
        "an embedded moto server, unless --region is given (then AWS, with --table and the "
        "configured credentials)",
    )
    demo.add_argument(
        "--table",
        type=_table_name,
        default=None,
        help="lock table (default: dynalease-demo-locks-<random>); created if missing",
    )
    demo.add_argument(
        "--duration",
        type=_positive_seconds,
        default=None,
        help="seconds the workers run (default 100; --quick: 15)",
    )
    demo.add_argument("--quick", action="store_true", help="a short run (about 20 s in all)")
    demo.add_argument(
        "--workers", type=_count, default=None, help="worker processes (default 4; --quick: 3)"
    )
    demo.add_argument(
        "--keys", type=_count, default=3, help="customer keys the workers contend on (default 3)"
    )
    demo.add_argument(
        "--plain", action="store_true", help="plain progress lines instead of the live view"
    )
    demo.add_argument(
        "--keep-tables",
        action="store_true",
        help="keep the demo's tables afterwards (tables on an embedded server always go)",
    )

    inspect = commands.add_parser(
        "inspect",
        help="show the lock rows of a table (read-only); --watch follows renewals",
        description="Show the lock rows of a table: key, owner, version, lease and whether the "
        "row is a valid protocol-1 row. Read-only: it never writes. --watch re-reads the rows "
        "and shows renewals and how long each row has been observed unchanged, by the same "
        "rule a contender uses to decide a takeover.",
    )
    _connection_options(inspect)
    inspect.add_argument("--table", required=True, type=_table_name, help="lock table")
    which = inspect.add_mutually_exclusive_group()
    which.add_argument("--key", help="show only this key (one strongly consistent read)")
    which.add_argument("--prefix", help="show only keys starting with this text")
    inspect.add_argument("--watch", action="store_true", help="re-read until interrupted")
    inspect.add_argument(
        "--interval",
        type=_positive_seconds,
        default=1.0,
        help="seconds between reads with --watch (default 1)",
    )
    inspect.add_argument(
        "--for",
        dest="watch_for",
        metavar="SECONDS",
        type=_positive_seconds,
        default=None,
        help="with --watch, stop after this many seconds (default: until Ctrl-C)",
    )
    inspect.add_argument("--plain", action="store_true", help="plain text, no live view")

    doctor = commands.add_parser(
        "doctor",
        help="check that a table is usable as a lock table, with a fix for each problem",
        description="Check a lock table: reachable with these credentials, partition key 'key' "
        "of type S, no sort key, TTL disabled, no global-table replicas. Prints each finding "
        "with its fix; exits 1 when there is a problem. Read-only.",
    )
    _connection_options(doctor)
    doctor.add_argument("--table", required=True, type=_table_name, help="lock table")

    # `invoke` parses its own arguments (see dynalease._invoke); this entry only
    # makes it appear in `dynalease --help`.
    commands.add_parser(
        "invoke",
        help="run a Lambda handler with a counting-down context (see `dynalease invoke --help`)",
        add_help=False,
    )
    return parser


def make_client(args: argparse.Namespace) -> DynamoDBClient:
    """A client from the connection options, failing fast on an unreachable endpoint."""
    from .client import DynamoDBClient

    try:
        return DynamoDBClient(
            region=args.region,
            endpoint_url=args.endpoint,
            profile=args.profile,
            connect_timeout=3.0,
            read_timeout=10.0,
            max_retries=1,
        )
    except ValueError as error:
        raise CommandError(str(error), EXIT_USAGE) from None


def _invoke(argv: list[str]) -> int:
    import importlib

    # Imported by name: the Lambda tooling is an optional part of an installation.
    try:
        module = importlib.import_module("dynalease._invoke")
    except ModuleNotFoundError as error:
        if error.name != "dynalease._invoke":
            raise
        print(
            "dynalease invoke: unavailable in this installation (dynalease._invoke is missing)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        status: int = module.main(argv)
    except SystemExit as exit_:  # its argparse exits on --help and usage errors
        return _exit_status(exit_)
    return status


def _exit_status(exit_: SystemExit) -> int:
    code = exit_.code
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return EXIT_FAILED


def _run(command: str, action: Callable[[], int]) -> int:
    """Run a subcommand, turning every expected failure into one line."""
    import botocore.exceptions

    from .exceptions import DynaleaseError

    try:
        return action()
    except CommandError as error:
        message, code = str(error), error.code
    except (DynaleaseError, botocore.exceptions.BotoCoreError) as error:
        message, code = _one_line(error), EXIT_FAILED
    except (ValueError, TypeError) as error:
        message, code = str(error), EXIT_USAGE
    except KeyboardInterrupt:
        message, code = "interrupted", 130
    print(f"dynalease {command}: error: {message}", file=sys.stderr)
    return code


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dynalease`` command; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["invoke"]:
        return _invoke(args_list[1:])
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exit_:
        return _exit_status(exit_)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "demo":
        from ._demo import run_demo

        return _run("demo", lambda: run_demo(args))
    if args.command == "inspect":
        from ._inspect import run_inspect

        return _run("inspect", lambda: run_inspect(args))
    from ._doctor import run_doctor

    return _run("doctor", lambda: run_doctor(args))


if __name__ == "__main__":
    sys.exit(main())
