"""The Lambda layer's content: one deterministic builder for every caller.

``LockLayer`` (at synth time) and ``layer/build.py`` (for a zip on disk) both
call `build_layer`, so the asset CDK uploads and the zip a person
inspects are the same bytes. The builder never downloads anything and never
needs Docker: it copies the installed ``dynalease`` and the installed runtime
dependency closure into ``python/``, leaving out the packages every Lambda
Python runtime already ships (boto3 and its dependencies).

Only pure-Python distributions can go in: the layer is published for both
x86_64 and arm64 and built on whatever machine runs the synth, so a compiled
extension would be wrong for at least one of them.

A zip carries, beside every ``.py``, the bytecode an interpreter of each of its
Python versions compiles (unchecked-hash ``.pyc`` in ``__pycache__``, one file per
version side by side: ``x.cpython-312.pyc`` beside ``x.cpython-313.pyc``, see
`_bytecode`), because Lambda's ``/opt`` is read-only and a module without
bytecode is compiled from source on every cold start. A zip for several versions
may leave a version without bytecode when no interpreter of it is found
(``allow_source_only``): its runtime still imports the modules, from source.

Reproducible by construction: files in sorted order, one fixed timestamp,
fixed permissions, bytecode without timestamps, and a ``RECORD`` we write
ourselves. The finished zip is kept in a cache directory under the hash of its
content, and reused only after its members are checked to equal what this
build would write; anything else under that name is replaced, never shipped.

For example:

    from dynalease.cdk.build import build_layer

    build = build_layer(python="3.13")
    print(build.zip_path, build.zipped_bytes, build.sha256)

    every = build_layer(python=PYTHON_VERSIONS, allow_source_only=True)
    print(every.compiled_pythons, every.source_only_pythons)

This module must not import ``aws_cdk``: ``layer/build.py`` runs without it (and
``dynalease.cdk`` imports its constructs lazily, so importing this module does not
pull them in).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ._bytecode import compile_sources, find_interpreter, running_python
from ._closure import LAMBDA_RUNTIME_PACKAGES, LayerBuildError, check_pure, closure, dist_name
from ._zipcache import EXTENSION_ENTRY, cached_zip

__all__ = [
    "LAMBDA_RUNTIME_PACKAGES",
    "PYTHON_VERSIONS",
    "SIZE_BUDGET_BYTES",
    "LayerBuild",
    "LayerBuildError",
    "build_layer",
    "default_cache_dir",
    "running_python",
]

#: The Lambda Python runtimes' versions a layer can be built for.
PYTHON_VERSIONS: tuple[str, ...] = ("3.11", "3.12", "3.13", "3.14")

#: The zipped size ``layer/build.py`` refuses to exceed (3 MiB, with Powertools).
SIZE_BUDGET_BYTES = 3 * 1024 * 1024

#: Environment variable naming the cache directory for built layer zips.
CACHE_ENV_VAR = "DYNALEASE_LAYER_CACHE"

# Bump when the layout or zip format changes, so old cache entries are not reused.
_FORMAT = "dynalease-layer/2"
_ROOT = PurePosixPath("python")
# The recovery extension's launcher goes to ``extensions/`` (executable), not ``python/``.
_LAUNCHER = "dynalease/_extension/dynalease-recovery"
# Parts of dynalease that run on a developer's machine, never inside Lambda (the layer
# test checks the result against an allow-list of the runtime's modules).
_NOT_RUNTIME = (
    "dynalease/cdk/",
    "dynalease/cli/",
    "dynalease/_tooling/",
    "dynalease/testing/",
    _LAUNCHER,
)
_DROP_DIST_INFO = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
#: dynalease's entry points name ``dynalease.cli:main``, and the layer carries no ``cli/``.
_DROP_OWN_DIST_INFO = _DROP_DIST_INFO | {"entry_points.txt"}
_MIN_MINOR = 11


@dataclass(frozen=True)
class LayerBuild:
    """A built layer zip and what went into it."""

    zip_path: Path
    """The cached zip; copy it rather than writing to it."""
    sha256: str
    """Hex SHA-256 of the zip file's bytes."""
    zipped_bytes: int
    unzipped_bytes: int
    file_count: int
    distributions: tuple[tuple[str, str], ...]
    """``(name, version)`` of every distribution in the layer, sorted by name."""
    pythons: tuple[str, ...]
    """The Python versions (``('3.13',)``) of the runtimes the layer is for, oldest first."""
    compiled_pythons: tuple[str, ...]
    """Those of `pythons` whose bytecode it carries (all unless ``allow_source_only``)."""
    bytecode_files: int
    """How many ``.pyc`` files the zip holds (one per ``.py`` and compiled version)."""

    @property
    def source_only_pythons(self) -> tuple[str, ...]:
        """The versions without bytecode: their runtimes compile the modules at every cold start."""
        return tuple(version for version in self.pythons if version not in self.compiled_pythons)

    def describe(self) -> str:
        """One line naming the distributions, e.g. for a LayerVersion description."""
        return ", ".join(f"{name} {version}" for name, version in self.distributions)


def default_cache_dir() -> Path:
    """Where built zips are kept: ``$DYNALEASE_LAYER_CACHE``, else the user cache directory."""
    explicit = os.environ.get(CACHE_ENV_VAR)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dynalease" / "layers"


def build_layer(
    *,
    python: str | Sequence[str] | None = None,
    include_powertools: bool = True,
    include_recovery: bool = True,
    cache_dir: Path | None = None,
    interpreter: str | os.PathLike[str] | None = None,
    allow_source_only: bool = False,
) -> LayerBuild:
    """Build (or reuse from the cache) the layer zip for the installed dynalease.

    ``python`` is the Lambda runtime's version (``'3.13'``; default: the running
    interpreter's), or several (``('3.12', '3.13')``) for one zip that serves each
    of them: dependencies are chosen by their environment markers and each
    version's bytecode is compiled by an interpreter of that version
    (``interpreter``, for one version only, or one found as
    `dynalease.cdk._bytecode` says). Without one, `LayerBuildError`
    names the version and how to provide it, unless ``allow_source_only``: then
    that version gets no bytecode (`LayerBuild.source_only_pythons`).
    ``include_powertools`` adds the ``lambda`` extra (AWS Lambda Powertools) and
    its dependencies. ``include_recovery`` adds the recovery extension's launcher
    as ``extensions/dynalease-recovery``.
    """
    for name, flag in (
        ("include_powertools", include_powertools),
        ("include_recovery", include_recovery),
        ("allow_source_only", allow_source_only),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {flag!r}")
    versions = _check_versions(running_python() if python is None else python)
    if interpreter is not None and len(versions) > 1:
        raise ValueError(
            "interpreter names the interpreter of one version; build one version per call, "
            "or let the interpreters be found (DYNALEASE_PYTHON_3_N, PATH, pyenv)"
        )
    executables: dict[str, Path] = {}
    for version in versions:
        try:
            executables[version] = find_interpreter(version, interpreter)
        except LookupError as error:
            if not allow_source_only or interpreter is not None:
                raise LayerBuildError(str(error)) from None
    dists = closure(include_powertools, versions)
    entries: dict[str, bytes] = {}
    for dist in dists:
        _add_distribution(entries, dist)
    if include_recovery:
        entries[EXTENSION_ENTRY] = (Path(__file__).resolve().parents[2] / _LAUNCHER).read_bytes()
    names = tuple(sorted((dist_name(d), d.version) for d in dists))
    sources = {name: content for name, content in entries.items() if name.endswith(".py")}
    bytecode: dict[str, bytes] = {}
    for version, executable in executables.items():
        bytecode.update(_bytecode(executable, version, sources))
    entries.update(bytecode)

    directory = cache_dir if cache_dir is not None else default_cache_dir()
    label = "-".join(versions)
    zip_path = directory / f"dynalease-layer-{label}-{_digest(_FORMAT, entries)[:40]}.zip"
    data = cached_zip(zip_path, entries)
    return LayerBuild(
        zip_path=zip_path,
        sha256=hashlib.sha256(data).hexdigest(),
        zipped_bytes=len(data),
        unzipped_bytes=sum(len(content) for content in entries.values()),
        file_count=len(entries),
        distributions=names,
        pythons=versions,
        compiled_pythons=tuple(executables),
        bytecode_files=len(bytecode),
    )


# Repeated synths in one process compile once. Memory only: the cache directory is never
# trusted for bytecode.
_COMPILED: dict[str, dict[str, bytes]] = {}


def _bytecode(executable: Path, version: str, sources: dict[str, bytes]) -> dict[str, bytes]:
    key = _digest(f"{executable}\0{version}", sources)
    if key not in _COMPILED:
        try:
            _COMPILED[key] = compile_sources(executable, version, sources)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            raise LayerBuildError(str(error)) from None
    return _COMPILED[key]


def _digest(seed: str, files: dict[str, bytes]) -> str:
    """SHA-256 of ``seed`` and every file's name and content hash, in name order."""
    digest = hashlib.sha256(seed.encode())
    for name in sorted(files):
        digest.update(f"\0{name}\0{hashlib.sha256(files[name]).hexdigest()}".encode())
    return digest.hexdigest()


def _check_versions(python: str | Sequence[str]) -> tuple[str, ...]:
    """The versions, oldest first: ``'3.13'`` or a sequence of such, each 3.11 or newer."""
    given = [python] if isinstance(python, str) else python
    if not isinstance(given, Sequence) or not given:
        raise ValueError(
            f"python must be a version like '3.13' or a sequence of them, got {python!r}"
        )
    for version in given:
        if not isinstance(version, str) or not re.fullmatch(r"3\.\d+", version):
            raise ValueError(
                f"python must be a version like '3.13' or a sequence of them, got {version!r}"
            )
        if int(version.split(".")[1]) < _MIN_MINOR:
            raise ValueError(
                f"dynalease needs Python 3.11 or newer; the layer cannot be for {version}"
            )
    return tuple(sorted(set(given), key=lambda version: int(version.split(".")[1])))


def _wanted(relative: PurePosixPath) -> bool:
    # Hidden parts include "..": nothing outside the installation goes in.
    hidden = any(part.startswith(".") or part == "__pycache__" for part in relative.parts)
    unwanted = relative.name.endswith((".pyc", ".pyo", ".pth", "~"))
    return bool(relative.parts) and not hidden and not unwanted


def _add(entries: dict[str, bytes], relative: PurePosixPath, content: bytes) -> None:
    if relative.suffix in {".so", ".pyd", ".dylib"}:
        raise LayerBuildError(
            f"{relative} is a compiled extension; only pure-Python code can go in the layer"
        )
    entries[str(_ROOT / relative)] = content


def _add_distribution(entries: dict[str, bytes], dist: metadata.Distribution) -> None:
    check_pure(dist)
    files = dist.files
    if files is None:
        raise LayerBuildError(
            f"{dist_name(dist)} has no RECORD; reinstall it with pip so its files are known"
        )
    dist_info: PurePosixPath | None = None
    added: list[PurePosixPath] = []
    for record in files:
        relative = PurePosixPath(record.as_posix())
        if relative.parts and relative.parts[0].endswith(".dist-info"):
            dist_info = PurePosixPath(relative.parts[0])
            dropped = _DROP_OWN_DIST_INFO if dist_name(dist) == "dynalease" else _DROP_DIST_INFO
            if relative.name in dropped or not _wanted(relative):
                continue
        elif dist_name(dist) == "dynalease" or not _wanted(relative):
            # dynalease's own modules come from its package directory below, which
            # is the same for a wheel install and an editable checkout.
            continue
        _add(entries, relative, Path(str(dist.locate_file(record))).read_bytes())
        added.append(relative)
    if dist_name(dist) == "dynalease":
        added.extend(_add_dynalease_package(entries))
    if dist_info is None:
        raise LayerBuildError(f"{dist_name(dist)} has no .dist-info directory in its RECORD")
    if not any(not p.parts[0].endswith(".dist-info") for p in added):
        raise LayerBuildError(
            f"{dist_name(dist)} is installed in editable mode or has no files; install it "
            "normally (not with -e) before building the layer"
        )
    _add(entries, dist_info / "RECORD", _record(entries, added, dist_info))


def _add_dynalease_package(entries: dict[str, bytes]) -> list[PurePosixPath]:
    package = Path(__file__).resolve().parents[1]  # dynalease/, above cdk/
    added: list[PurePosixPath] = []
    for path in sorted(package.rglob("*")):
        if not path.is_file():
            continue
        relative = PurePosixPath("dynalease", *path.relative_to(package).parts)
        if not _wanted(relative) or str(relative).startswith(_NOT_RUNTIME):
            continue
        _add(entries, relative, path.read_bytes())
        added.append(relative)
    return added


def _record(
    entries: dict[str, bytes], added: list[PurePosixPath], dist_info: PurePosixPath
) -> bytes:
    lines = []
    for relative in sorted(set(added)):
        content = entries[str(_ROOT / relative)]
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        lines.append(f"{relative},sha256={digest},{len(content)}")
    lines.append(f"{dist_info / 'RECORD'},,")
    return ("\n".join(lines) + "\n").encode()
