"""Lambda Managed Instances: release the rows of a runtime worker that died, without any event.

On Managed Instances one execution environment runs many runtime worker processes at
once (Python: one per concurrent request) and is never frozen. A worker that crashes
leaves the environment running and sends no event: the only ``SHUTDOWN`` comes when
the whole environment retires. So, in that mode (``AWS_LAMBDA_INITIALIZATION_TYPE``
is ``lambda-managed-instances``), the recovery extension also watches the journal
directory, shared by every worker: each entry names its writer's pid and start
time, and an entry whose writer is gone (pid gone, a zombie, or reused by another
process) has its row released owner-conditionally, as at a shutdown
(:func:`.recovery.recover`). Entries of live workers are never touched.

The watch looks every :data:`INTERVAL_S`: a listing of one directory, no request
while no worker died. It never raises: on this mode a crashed extension takes
every invocation of the environment down with it, so every failure is logged and
the watch goes on.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from ..constants import ENV_INITIALIZATION_TYPE, MANAGED_INSTANCES

__all__ = ["RELEASE_BUDGET_S", "WorkerWatch", "managed_instances"]

log = logging.getLogger("dynalease.recovery")

#: How often the journal is looked at: a dead worker's rows go within about this
#: plus one request.
INTERVAL_S = 0.25
#: The time one round of releases may take (no shutdown deadline bounds it here).
RELEASE_BUDGET_S = 5.0


def managed_instances() -> bool:
    """True on Lambda Managed Instances (``AWS_LAMBDA_INITIALIZATION_TYPE``)."""
    return os.environ.get(ENV_INITIALIZATION_TYPE, "").strip().lower() == MANAGED_INSTANCES


class WorkerWatch:
    """A daemon thread that releases dead workers' journal entries every :data:`INTERVAL_S`.

    ``recover(directory, deadline)`` is :func:`.recovery.recover` (passed in, so
    this module imports nothing of the request path until a worker dies).
    """

    def __init__(
        self,
        directory: str,
        recover: Callable[[str, float], object],
        *,
        interval: float = INTERVAL_S,
    ) -> None:
        self.directory = directory
        self.interval = interval
        self.rounds = 0  # looks at the journal, for tests
        self._recover = recover
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dynalease-workers", daemon=True)

    def start(self) -> WorkerWatch:
        """Start watching; returns itself."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (at the next look) and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        pause = self.interval
        while not self._stop.wait(pause):
            # A row that could not be released (DynamoDB unreachable) is tried again,
            # but not four times a second.
            pause = self.interval if self.look() else RELEASE_BUDGET_S

    def look(self) -> bool:
        """One look: release the rows of every entry whose writer is gone. Never raises.

        False when a release failed (or the look itself did), True otherwise.
        """
        self.rounds += 1
        try:
            if not _has_entries(self.directory):
                return True  # the common case: a listing, nothing else
            outcome = self._recover(self.directory, time.time() + RELEASE_BUDGET_S)
        except Exception:
            log.exception("dynalease-recovery: the worker watch failed this round; it goes on")
            return False
        return not getattr(outcome, "failed", None)


def _has_entries(directory: str) -> bool:
    try:
        with os.scandir(directory) as found:
            return any(entry.name.endswith(".json") for entry in found)
    except OSError:
        return False  # no journal yet: no worker has locked anything
