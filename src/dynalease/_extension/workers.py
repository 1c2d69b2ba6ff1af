"""Lambda Managed Instances: release the rows of a runtime worker that died, without any event.

A crashed worker sends no event, so the extension watches the shared journal. The watch
never raises: on this mode a crashed extension takes the whole environment down with it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from .._engine import journal

__all__ = ["RELEASE_BUDGET_S", "PidView", "WorkerWatch"]

log = logging.getLogger("dynalease.recovery")

#: How often the journal is looked at: a dead worker's rows go within about this
#: plus one request.
INTERVAL_S = 0.25
#: The time one round of releases may take (no shutdown deadline bounds it here).
RELEASE_BUDGET_S = 5.0


class PidView:
    """Whether this process can tell from an entry's pid that its writer is gone.

    The watch releases a row because its writer's pid is gone, four times a second. A pid
    names a process only in its writer's PID namespace: seen from another one, every
    live worker's pid would look gone (or name some other process), and every live
    worker's rows would be released at the next look. So an entry written in another
    namespace than ``here`` (this process's, read once as the watch starts) is left to
    its lease, and that is logged once. An entry that names no namespace (written before
    it was recorded, or where /proc could not say) is judged by its pid, as before.
    """

    def __init__(self, here: str | None) -> None:
        self.here = here
        self._told = False

    def judges(self, entry: journal.Entry) -> bool:
        if entry.namespace is None or self.here is None or entry.namespace == self.here:
            return True
        if not self._told:
            self._told = True
            log.warning(
                "dynalease-recovery: runtime workers write the journal from PID namespace "
                "%s and this extension runs in %s, so their pids cannot be checked from "
                "here; the worker watch releases none of their rows, and a crashed "
                "worker's lock is free once its lease expires. Run the extension in the "
                "workers' PID namespace for releases at once",
                entry.namespace,
                self.here,
            )
        return False


class WorkerWatch:
    """A daemon thread releasing dead workers' entries with :func:`.recovery.recover`, passed in
    so nothing of the request path is imported until a worker dies. A bad journal file is
    logged once, not at every look, until it changes or goes away.
    """

    def __init__(
        self,
        directory: str,
        recover: Callable[[str, float, journal.Skipped], object],
        *,
        interval: float = INTERVAL_S,
    ) -> None:
        self.directory = directory
        self.interval = interval
        self.rounds = 0  # looks at the journal, for tests
        self._recover = recover
        self._skipped = journal.Skipped()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dynalease-workers", daemon=True)

    def start(self) -> WorkerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        pause = self.interval
        while not self._stop.wait(pause):
            # A failed release is retried, but not four times a second.
            pause = self.interval if self.look() else RELEASE_BUDGET_S

    def look(self) -> bool:
        """Release the rows of every entry whose writer is gone; False when that failed."""
        self.rounds += 1
        try:
            if not _has_entries(self.directory):
                return True  # the common case: a listing, nothing else
            outcome = self._recover(self.directory, time.time() + RELEASE_BUDGET_S, self._skipped)
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
