"""Whether this process keeps a journal for the recovery extension, and where.

Only a Lambda sandbox with the extension installed keeps one. Anywhere else, a function
without the extension included, a client never loads the journal's module (:mod:`.journal`:
the writer, and the reader the extension checks entries with).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..constants import ENV_EXTENSIONS_DIR, ENV_JOURNAL_DIR, ENV_RUNTIME_API, RECOVERY_EXTENSION

if TYPE_CHECKING:
    from .journal import Journal

__all__ = ["DEFAULT_DIRECTORY", "directory", "enabled", "process_journal"]

DEFAULT_DIRECTORY = "/tmp/dynalease-journal"
DEFAULT_EXTENSIONS = "/opt/extensions"

#: (pid, answer) of the last :func:`enabled` check: one check per process.
_checked: tuple[int, bool] | None = None


def directory() -> str:
    """Where entries are written: ``DYNALEASE_JOURNAL_DIR``, else ``/tmp/dynalease-journal``."""
    return os.environ.get(ENV_JOURNAL_DIR) or DEFAULT_DIRECTORY


def enabled() -> bool:
    """True when the sandbox's Runtime API is set and the recovery extension is installed.

    Read once per process (a forked child reads again).
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


def process_journal() -> Journal | None:
    """A client's journal when :func:`enabled`, else None (and nothing is ever written)."""
    if not enabled():
        return None
    from .journal import Journal

    return Journal(directory())
