"""``dynalease run -- CMD ARGS...``: run a command holding a lock (or one permit of a semaphore).

Acquire, start the command as a child in its own process group with the lock
held and renewed, and release only after the child has exited. The exit status
is the child's (a signal death is 128 + the signal's number, as shells report
it); ``run``'s own outcomes have statuses of their own (``EXIT_NOT_ACQUIRED``,
``EXIT_LEASE_LOST``). SIGINT, SIGTERM and SIGHUP sent to ``run`` are forwarded
to the child's group.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandError,
    connection_options,
    positive_seconds,
    run_command,
    table_name,
    whole_number,
)

__all__ = ["EXIT_LEASE_LOST", "EXIT_NOT_ACQUIRED", "main"]

EXIT_NOT_ACQUIRED = 75
"""Not acquired within ``--wait`` (EX_TEMPFAIL: try again later); the command did not run."""

EXIT_LEASE_LOST = 76
"""The lease was lost while the command ran: SIGTERM to it, SIGKILL after ``--kill-after``."""

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_POLL_S = 0.05

_EPILOG = """\
exit status: the command's own; 128+N when a signal N ended it; 75 when the lock was not
acquired within --wait (the command did not run); 76 when the lease was lost while it ran
(it was sent SIGTERM, then SIGKILL after --kill-after); 2 for bad input; 1 when DynamoDB
could not be used. The command sees DYNALEASE_TABLE, DYNALEASE_KEY and DYNALEASE_OWNER
(and DYNALEASE_PERMIT_KEY, the permit's row, with --permits; DYNALEASE_FENCING_TOKEN, the
lock's fencing token, with --fencing).

Every option also reads the environment: DYNALEASE_TABLE, DYNALEASE_KEY, DYNALEASE_LEASE,
DYNALEASE_WAIT, DYNALEASE_PERMITS, DYNALEASE_KILL_AFTER (an explicit flag wins).

examples:
  # crontab: the nightly report runs on one machine at a time; others give up at once
  0 2 * * *  dynalease run --table locks --key nightly-report --wait 0 -- /opt/report.sh

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
    parser.add_argument("--key", help="lock (or semaphore) key (DYNALEASE_KEY)")
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
        help="after a lost lease, SIGKILL the command S seconds after SIGTERM (default 10)",
    )
    parser.add_argument(
        "--fencing",
        action="store_true",
        help="take a fenced lock; the command gets its token as DYNALEASE_FENCING_TOKEN",
    )
    return parser


def _wait_seconds(value: str) -> float:
    if value.strip() in {"0", "0.0"}:
        return 0.0
    return positive_seconds(value)


_permits = whole_number(1, 100, unit="number of permits")

#: Each option's environment variable, how it is read, and its default.
_ENVIRONMENT: dict[str, tuple[str, Any, Any]] = {
    "table": ("DYNALEASE_TABLE", table_name, None),
    "key": ("DYNALEASE_KEY", str, None),
    "lease": ("DYNALEASE_LEASE", positive_seconds, 30.0),
    "wait": ("DYNALEASE_WAIT", _wait_seconds, 0.0),
    "permits": ("DYNALEASE_PERMITS", _permits, 1),
    "kill_after": ("DYNALEASE_KILL_AFTER", positive_seconds, 10.0),
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
    from .common import Parser, exit_status

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
    from ..exceptions import LockLost, LockNotAcquired, LockReleaseError, LockUnavailable
    from ..keys import permit_keys, validate_key
    from ..lock import SyncDistributedLock
    from ..semaphore import SyncDistributedSemaphore
    from .common import make_client

    _from_environment(args)
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
    try:
        validate_key(args.key, parameter="--key") if args.permits == 1 else permit_keys(
            args.key, args.permits
        )
    except (TypeError, ValueError) as error:
        raise CommandError(str(error), EXIT_USAGE) from None
    client = make_client(args)
    if not client.sync_table_exists(args.table):
        raise CommandError(
            f"table {args.table!r} does not exist in this account and Region; create it "
            "(a partition key named 'key' of type S) or check --table, --region and --endpoint",
            EXIT_USAGE,
        )
    options: dict[str, Any] = {
        "table": args.table,
        "key": args.key,
        "lease_duration": args.lease,
        "wait_timeout": args.wait,
    }
    guard: SyncDistributedLock = (
        SyncDistributedSemaphore(client, permits=args.permits, **options)
        if args.permits > 1
        else SyncDistributedLock(client, fencing=args.fencing, **options)
    )
    try:
        guard.__enter__()
    except LockUnavailable as error:  # an outage, not contention: exit 1, not 75
        raise CommandError(" ".join(str(error).split()), EXIT_FAILED) from None
    except LockNotAcquired as error:
        print(f"dynalease run: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_NOT_ACQUIRED
    status = EXIT_FAILED
    try:
        status = _supervise(guard, command, args.kill_after)
    finally:
        try:
            guard.__exit__(None, None, None)
        except LockLost:
            status = EXIT_LEASE_LOST
        except LockReleaseError as error:
            print(f"dynalease run: warning: {' '.join(str(error).split())}", file=sys.stderr)
    return status


def _supervise(guard: Any, command: list[str], kill_after: float) -> int:
    """Run ``command`` in its own process group while ``guard`` holds; its exit status."""
    env = dict(os.environ)
    env.update(DYNALEASE_TABLE=guard.table, DYNALEASE_KEY=guard.key, DYNALEASE_OWNER=guard.owner)
    permit = getattr(guard, "permit_key", None)
    if permit is not None:
        env["DYNALEASE_PERMIT_KEY"] = permit
    if getattr(guard, "fencing", False):
        env["DYNALEASE_FENCING_TOKEN"] = str(guard.fencing_token)
    try:
        child = subprocess.Popen(command, env=env, process_group=0, preexec_fn=_die_with_parent())
    except FileNotFoundError:
        print(f"dynalease run: {command[0]}: command not found", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"dynalease run: {command[0]}: permission denied", file=sys.stderr)
        return 126

    def forward(signum: int, frame: object) -> None:
        _signal_group(child.pid, signum)

    previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED}
    terminated_at: float | None = None
    try:
        while True:
            try:
                code = child.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if terminated_at is None and guard.lost:
                print(
                    f"dynalease run: the lease on {guard.key!r} was lost; sending SIGTERM to "
                    f"the command (SIGKILL in {kill_after:g} s)",
                    file=sys.stderr,
                )
                _signal_group(child.pid, signal.SIGTERM)
                terminated_at = time.monotonic()
            elif terminated_at is not None and time.monotonic() - terminated_at >= kill_after:
                _signal_group(child.pid, signal.SIGKILL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if terminated_at is not None or guard.lost:
        _signal_group(child.pid, signal.SIGKILL)  # what is left of its group
        return EXIT_LEASE_LOST
    return code if code >= 0 else 128 - code


def _die_with_parent() -> Any:
    """On Linux, a ``preexec_fn`` asking for SIGKILL when ``run`` dies (PR_SET_PDEATHSIG).

    A ``run`` killed with SIGKILL cannot release or stop its child; without this
    the command would go on unprotected once the lease is taken over.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def arm() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG

    return arm


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
