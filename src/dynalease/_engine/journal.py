"""The journal: the lock rows a process may hold, on local disk, for a recovery helper.

A process that dies without releasing (killed at a deadline, crashed) leaves
its rows for a whole lease. A helper process beside it (the recovery extension)
can delete them at once if it knows which: the journal tells it. Each guard
writes one small JSON file (table, key, owner, the writer's pid and start time,
where its requests went) *before* its first acquisition request is sent, so an
acquisition that committed just before the writer died is covered, and removes
it once its release, or a loss, is confirmed. Files are written atomically (a
temporary name, then a rename), so a reader never sees half an entry.

The helper acts only on entries whose writer is gone (:func:`writer_alive`,
checked against the process table, never assumed) and deletes only with the
protocol's release condition (the owner equals the entry's), so a stale entry
can never remove a row someone else holds.

The journal is off unless the process runs in a sandbox where the helper is
installed (:func:`enabled`, read once per process); a guard then pays one
attribute test. The environment names it reads are in ``constants``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from typing import NamedTuple

from ..constants import ENV_EXTENSIONS_DIR, ENV_JOURNAL_DIR, ENV_RUNTIME_API, RECOVERY_EXTENSION

__all__ = [
    "DEFAULT_DIRECTORY",
    "DEFAULT_EXTENSIONS",
    "Entry",
    "Journal",
    "directory",
    "enabled",
    "entries",
    "process_journal",
    "start_time",
    "writer_alive",
]

log = logging.getLogger("dynalease")

DEFAULT_DIRECTORY = "/tmp/dynalease-journal"
DEFAULT_EXTENSIONS = "/opt/extensions"
_SUFFIX = ".json"
_FORMAT = 1

#: (pid, answer) of the last :func:`enabled` check: one check per process.
_checked: tuple[int, bool] | None = None


def directory() -> str:
    """Where entries are written: ``DYNALEASE_JOURNAL_DIR``, else ``/tmp/dynalease-journal``."""
    return os.environ.get(ENV_JOURNAL_DIR) or DEFAULT_DIRECTORY


def enabled() -> bool:
    """True when this process runs in a sandbox whose recovery helper is installed.

    Both must hold: the sandbox's control-plane address is set, and the helper's
    executable exists in the extensions directory (``DYNALEASE_EXTENSIONS_DIR``,
    else ``/opt/extensions``). Read once per process (a forked child reads again).
    """
    global _checked
    pid = os.getpid()
    if _checked is None or _checked[0] != pid:
        extensions = os.environ.get(ENV_EXTENSIONS_DIR) or DEFAULT_EXTENSIONS
        on = bool(os.environ.get(ENV_RUNTIME_API)) and os.path.isfile(
            os.path.join(extensions, RECOVERY_EXTENSION)
        )
        _checked = (pid, on)
    return _checked[1]


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (``/proc/<pid>/stat`` field 22), or None.

    With the pid it names one process: a pid reused by a later process has a
    different start time.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = text[text.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def writer_alive(pid: int, started: str | None) -> bool:
    """Whether the process that wrote an entry is still running (checked, not assumed).

    ``os.kill(pid, 0)`` says whether any process has the pid; the start time says
    whether it is still the writer. A zombie (exited, not yet reaped) counts as gone.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if _is_zombie(pid):
        return False
    if started is None:
        return True
    now = start_time(pid)
    return now is None or now == started


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except OSError:
        return False
    return text[text.rfind(")") + 2 :][:1] in ("Z", "X")


class Entry(NamedTuple):
    """One journal file: a row its writer may hold."""

    path: str
    table: str
    key: str
    owner: str
    pid: int
    started: str | None
    region: str | None
    endpoint_url: str | None
    #: A fenced (protocol-2) row: released by leaving it free, never by a delete.
    fencing: bool = False


class Journal:
    """One process's entries in one directory; where its client's requests go."""

    def __init__(
        self, path: str, *, region: str | None = None, endpoint_url: str | None = None
    ) -> None:
        self.path = path
        self.region = region
        self.endpoint_url = endpoint_url
        self._pid = os.getpid()
        self._started = start_time(self._pid)
        self._ready = False
        self._warned = False

    def reidentify(self) -> None:
        """Name this process afresh in later entries (after a SnapStart restore)."""
        self._pid = os.getpid()
        self._started = start_time(self._pid)

    def _file(self, owner: str) -> str:
        return os.path.join(self.path, owner + _SUFFIX)

    def record(self, table: str, key: str, owner: str, *, fencing: bool = False) -> None:
        """Write the entry for ``owner``'s row, atomically; a failure is logged, never raised."""
        body = {
            "format": _FORMAT,
            "table": table,
            "key": key,
            "owner": owner,
            "pid": self._pid,
            "started": self._started,
            "region": self.region,
            "endpoint_url": self.endpoint_url,
            "fencing": fencing,
        }
        final = self._file(owner)
        temporary = final + ".tmp"
        try:
            if not self._ready:
                os.makedirs(self.path, mode=0o700, exist_ok=True)
                self._ready = True
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(descriptor, json.dumps(body, separators=(",", ":")).encode("utf-8"))
            finally:
                os.close(descriptor)
            os.replace(temporary, final)
        except OSError as error:
            self._warn(f"could not write a journal entry in {self.path}: {error}")

    def forget(self, owner: str) -> None:
        """Remove ``owner``'s entry (its release or loss is confirmed); a missing one is fine."""
        try:
            os.unlink(self._file(owner))
        except FileNotFoundError:
            pass
        except OSError as error:
            self._warn(f"could not remove a journal entry in {self.path}: {error}")

    def _warn(self, text: str) -> None:
        if not self._warned:  # once: a full disk must not flood the log
            self._warned = True
            log.warning("dynalease: %s; recovery after a crash will not cover this lock", text)


def process_journal(*, region: str | None, endpoint_url: str | None) -> Journal | None:
    """A client's journal when :func:`enabled`, else None (and nothing is ever written)."""
    if not enabled():
        return None
    return Journal(directory(), region=region, endpoint_url=endpoint_url)


def entries(path: str) -> Iterator[Entry]:
    """The complete entries in ``path`` (temporary and unreadable files are skipped)."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return
    for name in names:
        if not name.endswith(_SUFFIX):
            continue
        full = os.path.join(path, name)
        try:
            with open(full, encoding="utf-8") as handle:
                body = json.load(handle)
            entry = Entry(
                path=full,
                table=str(body["table"]),
                key=str(body["key"]),
                owner=str(body["owner"]),
                pid=int(body["pid"]),
                started=None if body.get("started") is None else str(body["started"]),
                region=body.get("region"),
                endpoint_url=body.get("endpoint_url"),
                fencing=body.get("fencing") is True,
            )
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("dynalease: skipping unreadable journal entry %s", full)
            continue
        if body.get("format") == _FORMAT and entry.owner and entry.table and entry.key:
            yield entry
