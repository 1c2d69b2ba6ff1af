"""What a reader of the journal remembers between looks (:class:`Skipped`), and a file's
identity, by which it knows a file it met before."""

from __future__ import annotations

import os
from typing import Generic, TypeVar

__all__ = ["Skipped", "identity"]


#: What a look reads from a file (the journal's ``Entry``).
Entry = TypeVar("Entry")


class Skipped(Generic[Entry]):
    """What a reader of the journal remembers between looks: each bad file (and a bad
    directory) logged once, until it changes or goes away, and each valid entry by its
    file's identity. A reader that looks four times a second (the Managed Instances worker
    watch) logs a bad file once and reads and parses a good one once, not at every look.
    """

    def __init__(self) -> None:
        self._told: dict[str, tuple[str, tuple[int, ...] | None]] = {}
        self._read: dict[str, tuple[tuple[int, ...], Entry]] = {}

    def first(self, name: str, problem: str, identity: tuple[int, ...] | None) -> bool:
        """True (and remembered) unless ``name`` was logged with this problem and identity."""
        seen = (problem, identity)
        if self._told.get(name) == seen:
            return False
        self._told[name] = seen
        return True

    def known(self, name: str, identity: tuple[int, ...] | None) -> Entry | None:
        """The entry read from ``name`` when the file still has this identity, else None."""
        read = self._read.get(name)
        return (
            read[1] if read is not None and identity is not None and read[0] == identity else None
        )

    def remember(self, name: str, identity: tuple[int, ...] | None, entry: Entry) -> None:
        """Keep ``entry`` as read from ``name`` with ``identity`` (None: gone, not kept)."""
        if identity is not None:
            self._read[name] = (identity, entry)

    def keep(self, names: set[str]) -> None:
        """Forget what one look did not meet again: a file that comes back is read and
        logged anew."""
        self._told = {name: seen for name, seen in self._told.items() if name in names}
        self._read = {name: read for name, read in self._read.items() if name in names}


def identity(name: str, directory: int | None = None) -> tuple[int, ...] | None:
    """Inode, size and change times of ``name`` (not followed); None when it is gone."""
    try:
        info = os.lstat(name, dir_fd=directory)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
