"""``dynalease run``'s command while its guard holds.

The command runs in its own process group (:mod:`.command_group`) with the lock's
variables in its environment; SIGINT, SIGTERM and SIGHUP sent to ``run`` are forwarded to
the group. Once the validity left falls to ``--kill-after`` (renewals failing, or the lease
lost), or the command is stopped, or it exits leaving members behind, the group gets
SIGTERM, and SIGKILL after ``--kill-after`` or as validity is about to end: dead before
another owner can take the lock.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from .command_group import CommandGroup

__all__ = ["EXIT_LEASE_LOST", "supervise"]

EXIT_LEASE_LOST = 76
"""The lease was failing or lost while the command ran: it was ended (SIGTERM, then SIGKILL)."""

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_POLL_S = 0.05
#: SIGKILL goes out once the validity left is this short (two polls: before it ends).
_KILL_MARGIN_S = 2 * _POLL_S


def supervise(guard: Any, command: list[str], kill_after: float) -> int:
    """Run ``command`` in its own process group while ``guard`` holds; its exit status.

    SIGKILL follows SIGTERM after ``kill_after``, or as validity is about to end.
    """
    group = CommandGroup(command, _command_environment(guard))

    def forward(signum: int, frame: object) -> None:
        group.signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED}
    ending_since: float | None = None
    lease_lost = False
    try:
        while True:
            group.poll()
            if group.gone:
                break
            left = 0.0 if guard.lost else guard.time_left
            if ending_since is None:
                reason = _why_end(group, guard, left, kill_after)
                if reason is not None:
                    lease_lost = left <= kill_after
                    print(f"dynalease run: {reason}", file=sys.stderr)
                    group.signal(signal.SIGTERM)
                    group.signal(signal.SIGCONT)  # a stopped process must see it
                    ending_since = time.monotonic()
            elif left <= _KILL_MARGIN_S or time.monotonic() - ending_since >= kill_after:
                group.signal(signal.SIGKILL)
            time.sleep(_POLL_S)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        group.close()  # whatever is left is SIGKILLed and reaped
    if lease_lost or guard.lost:
        return EXIT_LEASE_LOST
    assert group.status is not None
    return group.status


def _why_end(group: Any, guard: Any, left: float, kill_after: float) -> str | None:
    """Why the command's group must be ended now (SIGTERM), or None while it may run."""
    then = f"SIGTERM to the command, SIGKILL in {kill_after:g} s"
    if left <= kill_after:
        state = "was lost" if guard.lost else f"ends in {left:.1f} s (renewals are failing)"
        return f"the lease on {guard.key!r} {state}; {then}, before another owner can take it"
    if group.stopped_by is not None:
        name = signal.Signals(group.stopped_by).name if group.stopped_by else "a stop signal"
        return (
            f"the command was stopped by {name}, and a stopped command would hold the lock "
            f"indefinitely (a command that reads the terminal must run in the foreground); {then}"
        )
    if group.status is not None:
        return f"the command exited; ending what it left running in its process group ({then})"
    return None


def _command_environment(guard: Any) -> dict[str, str]:
    """``run``'s environment with this lock's variables (and no stale ones of another)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DYNALEASE_PERMIT_KEY", "DYNALEASE_FENCING_TOKEN", "DYNALEASE_KEYS")
    }
    env.update(DYNALEASE_TABLE=guard.table, DYNALEASE_KEY=guard.key, DYNALEASE_OWNER=guard.owner)
    permit = getattr(guard, "permit_key", None)
    env["DYNALEASE_KEYS"] = "\n".join(guard.keys) if permit is None else guard.key
    if permit is not None:
        env["DYNALEASE_PERMIT_KEY"] = permit
    if getattr(guard, "fencing", False):
        env["DYNALEASE_FENCING_TOKEN"] = str(guard.fencing_token)
    return env
