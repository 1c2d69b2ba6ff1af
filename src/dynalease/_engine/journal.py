"""The journal: the lock rows a process may hold, on local disk, for the recovery extension.

Each guard writes one JSON file named after its owner token *before* its first
acquisition request (so a create that committed just before the writer died is
covered) and removes it once its release or loss is confirmed. Nothing about
where requests go is written. The reader trusts no file and acts only on entries
whose writer is gone (docs/lambda.md, "Recovery after a timeout or a crash").
Whether a process keeps a journal, and where, is :mod:`.journal_switch`'s to say.
"""

import json
import logging
import os
import re
import stat
from collections.abc import Collection, Iterator
from typing import Any, NamedTuple, TypeGuard

from ..constants import ENV_RECOVERY_TABLES, ENV_TABLE
from . import journal_looks
from .journal_looks import identity

__all__ = [
    "MAX_ENTRY_BYTES",
    "MAX_KEYS",
    "TABLE_NAME",
    "Entry",
    "Journal",
    "Skipped",
    "entries",
    "pid_namespace",
    "start_time",
    "writer_alive",
]

log = logging.getLogger("dynalease")

_SUFFIX = ".json"
_FORMAT = 1
#: The most keys one entry names: a multi-key lock's rows (one transaction writes 100).
MAX_KEYS = 100
#: The largest entry file read: 101 keys (``key`` and ``keys``) of 2,048 UTF-8 bytes, each at
#: most six times longer as JSON (a control character is written ``\u00XX``).
MAX_ENTRY_BYTES = 2 * 1024 * 1024
#: Owner tokens are UUID4 text (``protocol.new_token``); a file is named after its owner.
_OWNER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
#: DynamoDB's table-name rule (the same as ``protocol.check_table_name``'s).
TABLE_NAME = re.compile(r"[A-Za-z0-9_.\-]{3,255}")
_MAX_KEY_BYTES = 2048
#: A process start time (``/proc/<pid>/stat`` field 22): clock ticks since boot.
_STARTED = re.compile(r"[0-9]{1,20}")
#: A PID namespace as ``/proc/<pid>/ns/pid`` names it: its inode on the kernel's nsfs.
_NAMESPACE = re.compile(r"pid:\[[0-9]{1,20}\]")
_MAX_PID = 2**31 - 1
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def start_time(pid: int) -> str | None:
    """The start time of process ``pid``, or None: with the pid it names one process."""
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else None


def pid_namespace() -> str | None:
    """This process's PID namespace (``pid:[4026531836]``), or None where /proc cannot say.

    A pid means a process only in its namespace: two processes compare theirs to know
    whether one may look the other's pid up.
    """
    try:
        name = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return name if _NAMESPACE.fullmatch(name) else None


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` from field 3 (the state) on; empty if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except OSError:
        return []
    # The command name (field 2) is in parentheses and may hold spaces.
    return text[text.rfind(")") + 2 :].split()


def writer_alive(pid: int, started: str | None) -> bool:
    """Whether the process that wrote an entry is still running; a zombie counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if _stat_fields(pid)[:1] in (["Z"], ["X"]):
        return False  # a zombie
    if started is None:
        return True
    now = start_time(pid)
    return now is None or now == started


class Entry(NamedTuple):
    """One journal file: a row its writer may hold."""

    path: str
    table: str
    key: str
    owner: str
    pid: int
    started: str | None
    #: A fenced (protocol-2) row: released by leaving it free, never by a delete.
    fencing: bool
    #: Every row the entry names: ``(key,)``, or a multi-key lock's keys (``key`` first).
    keys: tuple[str, ...]
    #: The writer's PID namespace (:func:`pid_namespace`), in which ``pid`` names it.
    namespace: str | None = None


#: What a reader of the journal remembers between looks (:class:`journal_looks.Skipped`).
Skipped = journal_looks.Skipped[Entry]


class Journal:
    """One process's entries in one directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.reidentify()
        self._usable: bool | None = None
        self._warned = False

    def reidentify(self) -> None:
        """Name this process afresh in later entries (after a SnapStart restore)."""
        self._pid = os.getpid()
        self._started = start_time(self._pid)
        self._namespace = pid_namespace()

    def _file(self, owner: str) -> str:
        return os.path.join(self.path, owner + _SUFFIX)

    def record(
        self,
        table: str,
        key: str,
        owner: str,
        *,
        fencing: bool = False,
        keys: tuple[str, ...] = (),
    ) -> None:
        """Write the entry for ``owner``'s rows, atomically; a failure is logged, never raised."""
        body = {
            "format": _FORMAT,
            "table": table,
            "key": key,
            "keys": list(keys or (key,)),
            "owner": owner,
            "pid": self._pid,
            "started": self._started,
            "pidns": self._namespace,
            "fencing": fencing,
        }
        final = self._file(owner)
        temporary = final + ".tmp"
        try:
            if self._usable is None:
                os.makedirs(self.path, mode=0o700, exist_ok=True)
                problem = _directory_problem(self.path)
                self._usable = problem is None
                if problem is not None:
                    self._warn(f"the journal directory {self.path!r} {problem}; nothing is written")
            if not self._usable:
                return
            # UTF-8 as it is: escaping each non-ASCII character to six bytes made entries
            # up to three times as long to write and to read.
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            # O_EXCL | O_NOFOLLOW: a file or symlink planted under this name is never
            # written through; the write fails (and is logged) instead.
            with open(os.open(temporary, _CREATE_FLAGS, 0o600), "wb") as file:
                file.write(data)
            os.replace(temporary, final)
        except (OSError, UnicodeEncodeError) as error:  # a lone surrogate cannot be UTF-8
            self._warn(f"could not write a journal entry in {self.path!r}: {error}")

    def forget(self, owner: str) -> None:
        """Remove ``owner``'s entry; a missing one is fine."""
        if not self._usable:
            return
        try:
            os.unlink(self._file(owner))
        except FileNotFoundError:
            pass
        except OSError as error:
            self._warn(f"could not remove a journal entry in {self.path!r}: {error}")

    def _warn(self, text: str) -> None:
        if not self._warned:  # once: a full disk must not flood the log
            self._warned = True
            log.warning("dynalease: %s; recovery after a crash will not cover this lock", text)


def _directory_problem(path: str) -> str | None:
    try:
        return _problem(os.lstat(path))
    except OSError as error:
        return f"cannot be checked ({error.strerror or error})"


def _problem(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link, not a directory"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"is owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return (
            f"is writable by other users (mode {stat.S_IMODE(info.st_mode):04o}); "
            "remove it, or make it 0700"
        )
    return None


def entries(
    path: str, skipped: Skipped | None = None, *, tables: Collection[str] | None = None
) -> Iterator[Entry]:
    """The valid entries in ``path``; any other file is skipped with a log line, once per
    ``skipped`` (a fresh one when None: once per call).

    With ``tables``, an entry naming any other table is skipped the same way: a file
    names a table, it does not choose one. The directory is opened once, never through
    a symlink, and its files relative to it.
    """
    skipped = Skipped() if skipped is None else skipped
    met: set[str] = set()  # the names of this look
    try:
        yield from _valid(path, skipped, met, tables)
    finally:
        skipped.keep(met)


def _valid(
    path: str, skipped: Skipped, met: set[str], tables: Collection[str] | None
) -> Iterator[Entry]:
    try:
        directory = os.open(path, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        return
    except OSError as error:  # ELOOP: a symlink; ENOTDIR: a file
        unusable = _directory_problem(path) or f"cannot be opened ({error.strerror or error})"
        _ignored(path, unusable, skipped, met)
        return
    try:
        problem = _problem(os.fstat(directory))
        if problem is not None:
            _ignored(path, problem, skipped, met)
            return
        for name in sorted(os.listdir(directory)):
            if not name.endswith(_SUFFIX):
                continue
            met.add(name)
            # Taken before the read: a file that changes during it is read again next look.
            file = identity(name, directory)
            entry = skipped.known(name, file)
            try:
                if entry is None:
                    entry = _entry(os.path.join(path, name), name, _read(directory, name))
                    skipped.remember(name, file, entry)
                if tables is not None and entry.table not in tables:
                    raise _Skip(
                        f"table {entry.table!r} is not one of this function's lock tables "
                        f"({ENV_TABLE}, {ENV_RECOVERY_TABLES}); if its locks are this "
                        f"function's, add it to {ENV_RECOVERY_TABLES}"
                    )
            except _Skip as reason:
                if skipped.first(name, str(reason), file):
                    log.warning("dynalease: skipping journal entry %r: %s", name, reason)
                continue
            yield entry
    finally:
        os.close(directory)


def _ignored(path: str, problem: str, skipped: Skipped, met: set[str]) -> None:
    met.add(path)
    if skipped.first(path, problem, identity(path)):
        log.warning(
            "dynalease: the journal directory %r %s; its entries are ignored", path, problem
        )


class _Skip(Exception):
    """Why one journal file is not acted on."""


def _read(directory: int, name: str) -> Any:
    try:
        descriptor = os.open(name, _READ_FLAGS, dir_fd=directory)
    except OSError as error:  # ELOOP: a symlink
        raise _Skip(f"cannot be opened as a plain file ({error.strerror or error})") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _Skip("not a regular file")
        if info.st_uid != os.geteuid():
            raise _Skip(f"owned by uid {info.st_uid}, not by this user")
        if info.st_size > MAX_ENTRY_BYTES:
            raise _Skip(f"{info.st_size} bytes, more than an entry's {MAX_ENTRY_BYTES}")
        data = os.read(descriptor, MAX_ENTRY_BYTES + 1)
    except OSError as error:
        raise _Skip(f"cannot be read ({error.strerror or error})") from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_ENTRY_BYTES:
        raise _Skip(f"more than an entry's {MAX_ENTRY_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _Skip("not JSON text") from None


def _entry(full: str, name: str, body: Any) -> Entry:
    if not isinstance(body, dict):
        raise _Skip("not a JSON object")
    if type(body.get("format")) is not int or body["format"] != _FORMAT:
        raise _Skip(f"format is not {_FORMAT}")
    owner = body.get("owner")
    if not isinstance(owner, str) or not _OWNER.fullmatch(owner):
        raise _Skip("owner is not an owner token")
    if name != owner + _SUFFIX:
        raise _Skip("the file name is not its owner's")
    table = body.get("table")
    if not isinstance(table, str) or not TABLE_NAME.fullmatch(table):
        raise _Skip("table is not a DynamoDB table name")
    key = body.get("key")
    if not _is_key(key):
        raise _Skip(f"key is not text of 1 to {_MAX_KEY_BYTES} UTF-8 bytes")
    keys = body.get("keys", [key])  # entries written before multi-key locks name one key
    if not (isinstance(keys, list) and 1 <= len(keys) <= MAX_KEYS and keys[0] == key):
        raise _Skip(f"keys is not a list of 1 to {MAX_KEYS} keys that starts with key")
    if not all(_is_key(each) for each in keys) or len(set(keys)) != len(keys):
        raise _Skip("keys holds a repeat or something other than a key")
    pid = body.get("pid")
    if type(pid) is not int or not 0 < pid <= _MAX_PID:
        raise _Skip("pid is not a process id")
    started = body.get("started")
    if started is not None and not (isinstance(started, str) and _STARTED.fullmatch(started)):
        raise _Skip("started is not a process start time")
    namespace = body.get("pidns")  # absent from entries written before it was recorded
    if namespace is not None and not (
        isinstance(namespace, str) and _NAMESPACE.fullmatch(namespace)
    ):
        raise _Skip("pidns is not a PID namespace")
    fencing = body.get("fencing", False)
    if type(fencing) is not bool:
        raise _Skip("fencing is not true or false")
    return Entry(full, table, key, owner, pid, started, fencing, tuple(keys), namespace)


def _is_key(value: Any) -> TypeGuard[str]:
    try:
        size = len(value.encode("utf-8")) if isinstance(value, str) else 0
    except UnicodeEncodeError:  # a lone surrogate
        size = 0
    return 1 <= size <= _MAX_KEY_BYTES
