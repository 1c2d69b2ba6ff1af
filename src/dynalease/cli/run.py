"""``dynalease run -- CMD ARGS...``: run a command holding a lock (or one permit of a semaphore).

Acquire, start the command as a child in its own process group with the lock held and
renewed, and release only after the child has exited. The exit status is the child's (a
signal death is 128 + the signal's number, as shells report it); ``run``'s own outcomes
have statuses of their own (``EXIT_NOT_ACQUIRED``, ``EXIT_LEASE_LOST``). SIGINT, SIGTERM
and SIGHUP sent to ``run`` are forwarded to the child's group.

The command's whole process group ends with ``run`` (:mod:`.command_group`), and
before the lease can pass to another owner: once renewals have failed long enough
that the validity left is ``--kill-after``, the group gets SIGTERM, and SIGKILL
before validity ends (:mod:`.supervise`; ``--kill-after`` is refused unless it fits in
a third of the lease). This module reads and checks the options and holds the guard.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._engine.holder import set_command
from .._redact import logged_key
from ..exceptions import LockLost, LockNotAcquired, LockReleaseError, LockUnavailable
from ..keys import permit_keys, validate_key
from ..lock import SyncDistributedLock
from ..semaphore import SyncDistributedSemaphore
from . import run_elect
from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandError,
    Parser,
    connection_options,
    exit_status,
    make_client,
    one_line,
    positive_seconds,
    run_command,
    table_name,
    whole_number,
)
from .supervise import EXIT_LEASE_LOST, supervise

__all__ = ["EXIT_LEASE_LOST", "EXIT_NOT_ACQUIRED", "main"]

EXIT_NOT_ACQUIRED = 75
"""Not acquired within ``--wait`` (EX_TEMPFAIL: try again later); the command did not run."""

#: The longest --kill-after as a fraction of the lease: SIGTERM goes out once the validity
#: left falls to --kill-after, which a lease renewed on time never does (it keeps at least
#: 0.9 - 1/3 of the lease, less a renewal's round trip).
_KILL_AFTER_FRACTION = 1 / 3
_DEFAULT_KILL_AFTER_S = 10.0

_EPILOG = """\
exit status: the command's own; 128+N when a signal N ended it; 75 when the lock was not
acquired within --wait (the command did not run); 76 when the lease was failing while it
ran (it was sent SIGTERM, then SIGKILL, and was dead before the lease could pass to
another owner); 2 for bad input; 1 when DynamoDB could not be used. The command sees
DYNALEASE_TABLE, DYNALEASE_KEY (the first --key), DYNALEASE_KEYS (every key, one a
line, so a key with a line break is refused) and DYNALEASE_OWNER (and DYNALEASE_PERMIT_KEY,
the permit's row, with --permits; DYNALEASE_FENCING_TOKEN, the lock's fencing token, with
--fencing; never stale ones from run's own environment). Its whole process group ends
with run, even when run is SIGKILLed.

Every option also reads the environment: DYNALEASE_TABLE, DYNALEASE_KEY, DYNALEASE_LEASE,
DYNALEASE_WAIT, DYNALEASE_PERMITS, DYNALEASE_KILL_AFTER (an explicit flag wins).

examples:
  # crontab: the nightly report runs on one machine at a time; others give up at once
  0 2 * * *  dynalease run --table locks --key nightly-report --wait 0 -- /opt/report.sh

  # a transfer between two accounts: both keys held at once, or neither
  dynalease run --table locks --key account:A --key account:B --wait 30 -- ./transfer.sh

  # an ECS scheduled task (container command), at most 3 re-index jobs at once
  ["dynalease", "run", "--table", "locks", "--key", "reindex", "--permits", "3",
   "--wait", "600", "--", "python", "-m", "jobs.reindex"]
"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``dynalease run`` (its arguments are parsed by :func:`main`)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "run",
        help="run a command holding a lock (cron jobs, shell scripts, ECS tasks)",
        description="Acquire a lock (or one of --permits permits), run CMD with it held and "
        "renewed, release when CMD exits.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="dynalease run --table T --key K [options] -- CMD [ARGS...]",
    )
    connection_options(parser)
    parser.add_argument("--table", type=table_name, help="lock table (DYNALEASE_TABLE)")
    parser.add_argument(
        "--key",
        action="append",
        help="lock (or semaphore) key (DYNALEASE_KEY); repeat it to hold several keys at "
        "once, all or nothing",
    )
    parser.add_argument(
        "--lease",
        type=positive_seconds,
        metavar="S",
        help="lease duration in seconds, renewed every S/3 (default 30)",
    )
    parser.add_argument(
        "--wait",
        type=_wait_seconds,
        metavar="S",
        help="seconds to wait for the lock; 0 makes one attempt (default 0)",
    )
    parser.add_argument(
        "--permits",
        type=_permits,
        metavar="N",
        help="hold one of N permits: at most N commands run at once (default 1, a lock)",
    )
    parser.add_argument(
        "--kill-after",
        type=positive_seconds,
        metavar="S",
        help="when renewals fail, SIGTERM the command S seconds before the lease's validity "
        "ends and SIGKILL it by then; at most a third of --lease (default 10, or a third "
        "of --lease when shorter)",
    )
    parser.add_argument(
        "--fencing",
        action="store_true",
        help="take a fenced lock; the command gets its token as DYNALEASE_FENCING_TOKEN",
    )
    run_elect.add_option(parser)
    return parser


def _wait_seconds(value: str) -> float:
    """An argparse type: seconds in [0, 86400]; 0 (however written: 0.00, 0e0) is one attempt."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not 0 <= seconds <= 86_400:
        raise argparse.ArgumentTypeError(
            f"expected seconds from 0 (one attempt) to 86400, got {value!r}"
        )
    return seconds + 0.0  # -0.0 is 0


_permits = whole_number(1, 100, unit="number of permits")

#: Each option's environment variable, how it is read, and its default.
_ENVIRONMENT: dict[str, tuple[str, Any, Any]] = {
    "table": ("DYNALEASE_TABLE", table_name, None),
    "key": ("DYNALEASE_KEY", lambda text: [text], None),
    "lease": ("DYNALEASE_LEASE", positive_seconds, 30.0),
    "wait": ("DYNALEASE_WAIT", _wait_seconds, 0.0),
    "permits": ("DYNALEASE_PERMITS", _permits, 1),
    "kill_after": ("DYNALEASE_KILL_AFTER", positive_seconds, None),
}


def _from_environment(args: argparse.Namespace) -> None:
    """Fill each option not given as a flag from its environment variable, or its default."""
    for option, (name, parse, default) in _ENVIRONMENT.items():
        if getattr(args, option) is not None:
            continue
        text = os.environ.get(name, "").strip()
        if not text:
            setattr(args, option, default)
            continue
        try:
            setattr(args, option, parse(text))
        except argparse.ArgumentTypeError as error:
            raise CommandError(f"{name}={text!r}: {error}", EXIT_USAGE) from None


def main(argv: Sequence[str]) -> int:
    """Run ``dynalease run ARGV``; returns the exit status."""
    argv = list(argv)
    if "--" not in argv:
        if any(flag in argv for flag in ("-h", "--help")):
            return _parse(argv)[1]
        print(
            "dynalease run: error: missing `--` before the command; write "
            "`dynalease run --table T --key K -- CMD ARGS...`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    args, status = _parse(options)
    if args is None:
        return status
    if not command:
        print("dynalease run: error: no command after `--`", file=sys.stderr)
        return EXIT_USAGE
    return run_command("run", lambda: _run(args, command))


def _parse(options: list[str]) -> tuple[argparse.Namespace | None, int]:
    parser = Parser(prog="dynalease")
    add_parser(parser.add_subparsers(dest="command"))
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parser.parse_args(["run", *options]), 0
    except SystemExit as exit_:
        # argparse prints its usage line first: keep only the one-line error.
        lines = errors.getvalue().strip().splitlines()
        if lines:
            print(lines[-1], file=sys.stderr)
        return None, exit_status(exit_)


def _run(args: argparse.Namespace, command: list[str]) -> int:
    kill_after_source = "--kill-after" if args.kill_after is not None else "DYNALEASE_KILL_AFTER"
    elect_bounded = run_elect.wait_given(args)
    _from_environment(args)
    args.kill_after = _kill_after(args.kill_after, args.lease, kill_after_source)
    if args.fencing and args.permits > 1:
        raise CommandError(
            "--fencing is for locks: a semaphore's permits carry no fencing token; "
            "drop --fencing or --permits",
            EXIT_USAGE,
        )
    if args.table is None:
        raise CommandError("--table is required (or set DYNALEASE_TABLE)", EXIT_USAGE)
    if args.key is None:
        raise CommandError("--key is required (or set DYNALEASE_KEY)", EXIT_USAGE)
    keys: list[str] = args.key
    for key in keys:  # a bad key raises ValueError or TypeError: run_command exits 2
        if args.permits == 1:
            validate_key(key, parameter="--key")
        else:
            permit_keys(key, args.permits)
        if key.splitlines() != [key]:
            # DYNALEASE_KEYS gives the command one key a line: 'a\nb' would read as two.
            raise CommandError(
                f"--key {key!r} holds a line break; the command reads DYNALEASE_KEYS one key "
                "a line, so a key for run cannot hold one: choose a key without line breaks",
                EXIT_USAGE,
            )
    _check_keys(keys, args)
    run_elect.check(args, keys)
    set_command(os.path.basename(command[0]))  # the name only: arguments may hold secrets
    client = make_client(args)
    if not client.sync_table_exists(args.table):
        raise CommandError(
            f"table {args.table!r} does not exist in this account and Region; create it "
            "(a partition key named 'key' of type S) or check --table, --region and --endpoint",
            EXIT_USAGE,
        )
    options: dict[str, Any] = {
        "table": args.table,
        **({"key": keys[0]} if len(keys) == 1 else {"keys": keys}),
        "lease_duration": args.lease,
        "wait_timeout": args.wait,
    }
    guard: SyncDistributedLock = (
        SyncDistributedSemaphore(client, permits=args.permits, **options)
        if args.permits > 1
        else SyncDistributedLock(client, fencing=args.fencing, **options)
    )
    try:
        guard = run_elect.enter(guard, args, elect_bounded)
    except LockUnavailable as error:  # an outage, not contention: exit 1, not 75
        raise CommandError(_run_words(error), EXIT_FAILED) from None
    except LockNotAcquired as error:
        print(f"dynalease run: {_run_words(error)}", file=sys.stderr)
        return EXIT_NOT_ACQUIRED
    status = EXIT_FAILED
    try:
        status = supervise(guard, command, args.kill_after)
    finally:
        try:
            guard.__exit__(None, None, None)
        except LockLost:
            status = EXIT_LEASE_LOST
        except LockReleaseError as error:
            print(f"dynalease run: warning: {_run_words(error)}", file=sys.stderr)
    return status


def _run_words(error: Any) -> str:
    """A lock error in ``run``'s words: the key as typed, and ``--wait`` for ``wait_timeout``.

    The library names a key by its hash (keys may carry personal data, and messages end
    up in logs); here the user has just typed it.
    """
    message = one_line(error)
    if error.key is not None:
        message = message.replace(logged_key(error.key), repr(error.key))
    message = message.replace("wait_timeout=0 allows one attempt", "--wait 0 makes one attempt")
    return message.replace("wait_timeout", "--wait")


def _kill_after(kill_after: float | None, lease: float, source: str) -> float:
    """``--kill-after``, or its default, checked to fit in the lease."""
    longest = lease * _KILL_AFTER_FRACTION
    if kill_after is None:
        return min(_DEFAULT_KILL_AFTER_S, longest)
    if kill_after > longest:
        given = f"{source}{'=' if source.startswith('DYNALEASE') else ' '}{kill_after:g}"
        raise CommandError(
            f"{given} does not fit in a {lease:g} s lease: after a lost lease "
            "the command must be dead before another owner can take the lock, so it gets at "
            f"most a third of the lease between SIGTERM and SIGKILL; use {source} "
            f"{longest:.3g} or less, or --lease {kill_after * 3:g} or more",
            EXIT_USAGE,
        )
    return kill_after


def _check_keys(keys: list[str], args: argparse.Namespace) -> None:
    """Several --key flags: one lock on all of them (at most 100, each once)."""
    if len(keys) == 1:
        return
    if args.permits > 1 or args.fencing:
        flag = "--permits" if args.permits > 1 else "--fencing"
        raise CommandError(
            f"several --key flags take one lock on all the keys; {flag} takes one key",
            EXIT_USAGE,
        )
    if len(keys) > 100:
        raise CommandError(
            f"--key is given {len(keys)} times, over the limit of 100 keys (one DynamoDB "
            "transaction writes them all)",
            EXIT_USAGE,
        )
    repeated = next((key for index, key in enumerate(keys) if key in keys[:index]), None)
    if repeated is not None:
        raise CommandError(f"--key {repeated!r} is given twice; give each key once", EXIT_USAGE)
