"""The layer's zip file: written reproducibly, kept in a cache directory, checked before reuse.

A cached zip is reused only when its bytes are exactly those the build writes, so a zip
planted or damaged under the expected name (another member, bytes prepended or appended,
a comment) is rewritten, never shipped.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from pathlib import Path

__all__ = ["EXTENSION_ENTRY", "cached_zip", "prune", "write_zip", "zip_bytes"]

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
    """The bytes of the zip of ``entries``, at ``zip_path``: kept when the file there holds
    exactly these bytes, written afresh otherwise.

    The zip is made in memory every time (about 1 s of CPU for the 5 MiB default layer):
    checking members alone let bytes outside them through (finding I11 of the review).
    """
    data = zip_bytes(entries)
    try:
        if zip_path.read_bytes() == data:
            return data
    except OSError:
        pass
    write_zip(data, zip_path)
    prune(zip_path.parent, keep=zip_path)
    return data


def zip_bytes(entries: dict[str, bytes]) -> bytes:
    """The zip of ``entries``, reproducibly: the same entries give the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for arcname in sorted(entries):
            info = zipfile.ZipInfo(arcname, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = _mode(arcname) << 16
            archive.writestr(info, entries[arcname], compresslevel=9)
    return buffer.getvalue()


def write_zip(data: bytes, zip_path: Path) -> None:
    """Write ``data`` to ``zip_path`` atomically."""
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
