"""What every ``dynalease`` command shares: exit codes, one-line errors, options, the client.

Every command but ``--help`` builds a client or runs the development tools, which
need the library anyway, so the library's faces are imported here at the top (no
AWS SDK, no event loop: ``import dynalease.client`` loads neither); botocore is
imported only when a command runs, so ``dynalease --help`` loads no boto3 or botocore.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .._engine.protocol import check_table_name
from ..client import DynamoDBClient
from ..exceptions import DynaleaseError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: What ``dynalease local`` and ``dynalease-dev demo`` say when moto's server is not installed.
NEEDS_MOTO = (
    "needs moto's server: pip install '.[local]' in a clone of the repository, or "
    "pip install 'moto[server]==5.2.5' where dynalease was installed from a wheel"
)


class CommandError(Exception):
    """A failure to report as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors name the closest flag or subcommand.

    Every ``dynalease`` parser is one (``add_subparsers`` makes its subcommands'
    parsers of the same class), so every mistake reads the same: the usage of the
    command it was made in, then ``dynalease CMD: error: ...; did you mean X?``.
    """

    #: The arguments being parsed, so that an error can find a misspelling among them.
    _argv: list[str] = []  # noqa: RUF012  (one command line per process)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse as argparse does; an unknown argument is reported by its subcommand's parser."""
        Parser._argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._used_parser(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _used_parser(self, parsed: argparse.Namespace) -> Parser:
        """The parser of the subcommand ``parsed`` went through (else this one)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest or "", None) or "")
                if isinstance(chosen, Parser):
                    return chosen._used_parser(parsed)
        return self

    def error(self, message: str) -> NoReturn:
        """Print this command's usage and the error with its closest match, and exit 2."""
        unknown = [
            flag
            for flag in (word.split("=", 1)[0] for word in Parser._argv)
            if flag.startswith("--")
            and not any(o.startswith(flag) for o in self._option_string_actions)
        ]
        if unknown and message.startswith("the following arguments are required"):
            # A misspelled required flag: the misspelling is the mistake to report.
            message = f"unrecognized arguments: {' '.join(unknown)}"
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}{self._suggestion(message)}\n")

    def _suggestion(self, message: str) -> str:
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if unknown:
            word = unknown.group(1).split("=", 1)[0]
            known = [o for o in self._option_string_actions if o.startswith("--")]
        elif choice:
            word = choice.group(1)
            known = [str(c) for a in self._actions if a.choices is not None for c in a.choices]
        else:
            return ""
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""


def connection_options(parser: argparse.ArgumentParser, endpoint_default: str = "") -> None:
    """``--endpoint``, ``--region`` and ``--profile``, as every command takes them."""
    group = parser.add_argument_group("AWS connection")
    group.add_argument(
        "--endpoint",
        metavar="URL",
        type=endpoint_url,
        help="DynamoDB endpoint URL (e.g. http://127.0.0.1:8000); default: "
        + (
            endpoint_default
            or "the AWS configuration chain (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, "
            "or AWS itself)"
        ),
    )
    group.add_argument(
        "--region",
        metavar="REGION",
        type=region_name,
        help="AWS Region; default: AWS_REGION or the profile's",
    )
    group.add_argument(
        "--profile", metavar="NAME", help="named profile from the shared AWS config files"
    )


def endpoint_url(value: str) -> str:
    """An argparse type: an endpoint URL with its scheme (``127.0.0.1:8000`` gets the fix)."""
    if "://" not in value:
        raise argparse.ArgumentTypeError(
            f"{value!r} has no scheme: write http://{value} (or https://{value})"
        )
    return value


#: How every AWS Region is spelled (us-east-1, ap-southeast-2, us-gov-west-1, eusc-de-east-1).
_REGION = re.compile(r"[a-z]{2,4}(-[a-z]+)+-[0-9]+")


def region_name(value: str) -> str:
    """An argparse type: a Region name as AWS spells them, checked before any request."""
    if not _REGION.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an AWS Region name; write one such as us-east-1 or eu-west-1"
        )
    return value


def table_command(commands: Any, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """Register a command on one lock table: the connection options and a required ``--table``."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, description=description)
    connection_options(parser)
    parser.add_argument("--table", required=True, type=table_name, help="lock table")
    return parser


def table_name(value: str) -> str:
    """An argparse type: a valid DynamoDB table name."""
    try:
        return check_table_name(value)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_seconds(value: str) -> float:
    """An argparse type: seconds in (0, 86400]."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not 0 < seconds <= 86_400:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 86400], got {value!r}")
    return seconds


def whole_number(
    low: int, high: int | None = None, *, kind: str = "whole number", unit: str = "number"
) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high`` (no upper end if ``None``)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind}, got {value!r}") from None
        if number < low or (high is not None and number > high):
            span = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"expected a {unit} {span}, got {value!r}")
        return number

    return parse


count = whole_number(1, 64)
"""An argparse type: a whole number from 1 to 64."""


def make_client(args: argparse.Namespace) -> DynamoDBClient:
    """A client from the connection options, failing fast on an unreachable endpoint."""
    # A ValueError (a bad option value) is reported by run_command: exit 2.
    return DynamoDBClient(
        region=args.region,
        endpoint_url=args.endpoint,
        profile=args.profile,
        connect_timeout=3.0,
        read_timeout=10.0,
        max_retries=1,
    )


def moto_missing() -> bool:
    """Whether moto is missing from this installation (checked without importing it)."""
    try:
        return importlib.util.find_spec("moto") is None
    except ImportError:
        return True


def exit_status(exit_: SystemExit) -> int:
    """The status an argparse exit stands for; a message in it goes to stderr."""
    code = exit_.code
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return EXIT_FAILED


def parsed_command(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace | int:
    """``args`` parsed into a command and its options, or the exit status to return: an
    argparse exit's (usage errors, ``--help``), or a usage error after the help when no
    command was named."""
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exit_:
        return exit_status(exit_)
    if parsed.command is None:
        parser.print_help()
        return EXIT_USAGE
    return parsed


def run_command(command: str, action: Callable[[], int], *, prog: str = "dynalease") -> int:
    """Run ``prog``'s subcommand, turning every expected failure into one line."""
    import botocore.exceptions  # when a command runs: `--help` loads no botocore

    try:
        return action()
    except CommandError as error:
        message, code = str(error), error.code
    except (DynaleaseError, botocore.exceptions.BotoCoreError) as error:
        message, code = one_line(error), EXIT_FAILED
    except (ValueError, TypeError) as error:
        message, code = str(error), EXIT_USAGE
    except KeyboardInterrupt:
        message, code = "interrupted", EXIT_INTERRUPTED
    print(f"{prog} {command}: error: {cli_words(message)}", file=sys.stderr)
    return code


#: Advice the library gives Python callers, and what a CLI user does instead.
_CLI_ADVICE = (
    (
        "pass region=..., or set AWS_REGION / AWS_DEFAULT_REGION",
        "pass --region REGION, or set AWS_REGION / AWS_DEFAULT_REGION",
    ),
    (
        "(environment, profile or role) or pass access_key/secret_key",
        "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, --profile NAME or a role); "
        "for `dynalease local` use the credentials it prints",
    ),
    (
        "lock the semaphore's own key with DistributedSemaphore",
        "take a permit of the semaphore's own key with --key KEY --permits N",
    ),
)


def cli_words(message: str) -> str:
    """``message`` with the library's Python-API advice put as CLI flags and variables."""
    for python, cli in _CLI_ADVICE:
        message = message.replace(python, cli)
    return message


def one_line(error: BaseException) -> str:
    """``error``'s message on one line (a multi-line message has its lines joined)."""
    return " ".join(str(error).split())
