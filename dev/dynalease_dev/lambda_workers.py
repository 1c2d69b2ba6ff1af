"""The worker processes of a local Managed Instances runtime, found in ``/proc``.

awslambdaric's multi-concurrent mode forks one worker per concurrent request from
the runtime process; the control plane (:mod:`.lambda_plane`) watches them to
report an invocation whose worker died, and tests kill one to show the
environment stays up.
"""

from __future__ import annotations

import os

__all__ = ["child_pids"]


def child_pids(pid: int) -> list[int]:
    """The pids of ``pid``'s live child processes (zombies left out), from ``/proc``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read().decode("ascii", "replace")
        except OSError:
            continue
        # The command name (field 2) is in parentheses and may hold spaces.
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(pid) and fields[0] not in ("Z", "X"):
            found.append(int(name))
    return sorted(found)
