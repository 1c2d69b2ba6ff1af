"""The layer's zip file: written reproducibly, kept in a cache directory, checked before reuse.

Every member of a cached zip is compared with the build's entries, so a zip planted or
damaged under the expected name is rewritten, never shipped.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from pathlib import Path

__all__ = ["EXTENSION_ENTRY", "cached_zip", "holds_exactly", "prune", "write_zip"]

#: Where the recovery extension's launcher goes in the zip (executable).
EXTENSION_ENTRY = "extensions/dynalease-recovery"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_FILE_MODE = 0o100644
_EXEC_MODE = 0o100755
# Every source edit makes a new cache entry; keep only the most recent few.
_CACHE_ENTRIES = 8


def _mode(arcname: str) -> int:
    return _EXEC_MODE if arcname == EXTENSION_ENTRY else _FILE_MODE


def cached_zip(zip_path: Path, entries: dict[str, bytes]) -> bytes:
    """The bytes of ``zip_path`` once they hold exactly ``entries``: reused, or written afresh.

    Checked on the bytes returned, so the digest the caller takes is of a checked zip.
    """
    try:
        data = zip_path.read_bytes()
    except OSError:
        data = b""
    if data and holds_exactly(data, entries):
        return data
    data = write_zip(entries, zip_path)
    prune(zip_path.parent, keep=zip_path)
    return data


def holds_exactly(data: bytes, entries: dict[str, bytes]) -> bool:
    """``data`` is a zip of exactly ``entries``, with our modes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if sorted(member.filename for member in members) != sorted(entries):
                return False  # also catches a name given twice
            return all(
                member.external_attr >> 16 == _mode(member.filename)
                and archive.read(member) == entries[member.filename]
                for member in members
            )
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError):
        return False


def write_zip(entries: dict[str, bytes], zip_path: Path) -> bytes:
    """Write ``entries`` to ``zip_path`` atomically and reproducibly; the bytes written."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for arcname in sorted(entries):
            info = zipfile.ZipInfo(arcname, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = _mode(arcname) << 16
            archive.writestr(info, entries[arcname], compresslevel=9)
    data = buffer.getvalue()
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=zip_path.parent, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)
        # Atomic, so a concurrent synth never sees a half-written zip.
        os.replace(temporary, zip_path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return data


def prune(directory: Path, *, keep: Path) -> None:
    """Delete all but the most recent cached zips in ``directory``, never ``keep``."""
    entries = sorted(
        (path for path in directory.glob("dynalease-layer-*.zip") if path != keep),
        key=lambda path: path.stat().st_mtime,
        reverse=True,
    )
    for stale in entries[_CACHE_ENTRIES - 1 :]:
        # Another synth may be pruning or reading the same directory at the same time.
        stale.unlink(missing_ok=True)
