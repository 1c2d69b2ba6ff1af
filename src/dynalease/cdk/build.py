"""The Lambda layer's content: one deterministic builder for every caller.

``LockLayer`` (at synth time) and ``layer/build.py`` (for a zip on disk) both
call :func:`build_layer`, so the asset CDK uploads and the zip a person
inspects are the same bytes. The builder never downloads anything and never
needs Docker: it copies the installed ``dynalease`` and the installed runtime
dependency closure into ``python/``, leaving out the packages every Lambda
Python runtime already ships (boto3 and its dependencies).

Only pure-Python distributions can go in: the layer is published for both
x86_64 and arm64 and built on whatever machine runs the synth, so a compiled
extension would be wrong for at least one of them.

Reproducible by construction: files in sorted order, one fixed timestamp,
fixed permissions, no ``__pycache__`` or ``.pyc``, and a ``RECORD`` we write
ourselves. The finished zip is cached under a hash of its inputs, so repeated
synths reuse it.

Example::

    from dynalease.cdk.build import build_layer

    build = build_layer()
    print(build.zip_path, build.zipped_bytes, build.sha256)

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
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.markers import Marker
from packaging.requirements import Requirement

__all__ = [
    "DEFAULT_PYTHON_VERSIONS",
    "LAMBDA_RUNTIME_PACKAGES",
    "SIZE_BUDGET_BYTES",
    "LayerBuild",
    "LayerBuildError",
    "build_layer",
    "default_cache_dir",
]

#: Distributions the AWS Lambda Python runtimes ship; never copied into the layer.
LAMBDA_RUNTIME_PACKAGES: frozenset[str] = frozenset(
    {"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six"}
)

#: Python versions whose environment markers decide the dependency closure.
DEFAULT_PYTHON_VERSIONS: tuple[str, ...] = ("3.11", "3.12", "3.13", "3.14")

#: The zipped size ``layer/build.py`` refuses to exceed (3 MiB, with Powertools).
SIZE_BUDGET_BYTES = 3 * 1024 * 1024

#: Environment variable naming the cache directory for built layer zips.
CACHE_ENV_VAR = "DYNALEASE_LAYER_CACHE"

# Bump when the layout or zip format changes, so old cache entries are not reused.
_FORMAT = "dynalease-layer/1"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_FILE_MODE = 0o100644
_ROOT = PurePosixPath("python")
_LAYER_EXTRA = "lambda"
# The recovery extension's launcher goes to ``extensions/`` (executable), not ``python/``.
_LAUNCHER = "dynalease/_extension/dynalease-recovery"
_EXTENSION_ENTRY = "extensions/dynalease-recovery"
_EXEC_MODE = 0o100755
# The layer holds the runtime library only. These parts of dynalease run on a
# developer's machine (the command, the demo and its local server, test doubles,
# the CDK constructs and this builder), never inside Lambda.
_NOT_RUNTIME = (
    "dynalease/cdk/",
    "dynalease/cli/",
    "dynalease/demo/",
    "dynalease/_tooling/",
    "dynalease/testing/",
    "dynalease/testing.py",
    _LAUNCHER,
)
_DROP_DIST_INFO = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
_MACHINES = ("x86_64", "aarch64")
# Every source edit makes a new cache entry; keep only the most recent few.
_CACHE_ENTRIES = 8


class LayerBuildError(RuntimeError):
    """The layer cannot be built from this environment; the message says what to install."""


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
    include_powertools: bool = True,
    include_recovery: bool = True,
    python_versions: Sequence[str] = DEFAULT_PYTHON_VERSIONS,
    cache_dir: Path | None = None,
) -> LayerBuild:
    """Build (or reuse from the cache) the layer zip for the installed dynalease.

    ``include_powertools`` adds the ``lambda`` extra (AWS Lambda Powertools) and
    its dependencies. ``python_versions`` are the Lambda runtimes the layer
    targets; a dependency needed by any of them goes in. ``include_recovery`` adds
    the recovery extension's launcher as ``extensions/dynalease-recovery``.
    """
    for name, flag in (
        ("include_powertools", include_powertools),
        ("include_recovery", include_recovery),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {flag!r}")
    versions = _check_versions(python_versions)
    dists = _closure(include_powertools, versions)
    entries: dict[str, bytes] = {}
    for dist in dists:
        _add_distribution(entries, dist)
    if include_recovery:
        entries[_EXTENSION_ENTRY] = (Path(__file__).resolve().parents[2] / _LAUNCHER).read_bytes()
    names = tuple(sorted((_dist_name(d), d.version) for d in dists))

    digest = hashlib.sha256(_FORMAT.encode())
    for arcname in sorted(entries):
        digest.update(f"\0{arcname}\0{hashlib.sha256(entries[arcname]).hexdigest()}".encode())
    directory = cache_dir if cache_dir is not None else default_cache_dir()
    zip_path = directory / f"dynalease-layer-{digest.hexdigest()[:32]}.zip"
    if not zip_path.is_file():
        _write_zip(entries, zip_path)
        _prune(directory, keep=zip_path)
    data = zip_path.read_bytes()
    return LayerBuild(
        zip_path=zip_path,
        sha256=hashlib.sha256(data).hexdigest(),
        zipped_bytes=len(data),
        unzipped_bytes=sum(len(content) for content in entries.values()),
        file_count=len(entries),
        distributions=names,
    )


def _check_versions(python_versions: Sequence[str]) -> tuple[str, ...]:
    if isinstance(python_versions, str) or not python_versions:
        raise ValueError(
            f"python_versions must be a non-empty sequence like ('3.12',), got {python_versions!r}"
        )
    for version in python_versions:
        if not isinstance(version, str) or not re.fullmatch(r"3\.\d+", version):
            raise ValueError(f"python version {version!r} is not of the form '3.N'")
    return tuple(sorted(set(python_versions), key=lambda v: int(v.split(".")[1])))


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_name(dist: metadata.Distribution) -> str:
    return _normalise(dist.metadata["Name"])


def _environments(python_versions: Iterable[str]) -> list[dict[str, str]]:
    # Marker environments of the Lambda runtimes, not of the machine building the layer.
    return [
        {
            "python_version": version,
            "python_full_version": f"{version}.0",
            "implementation_version": f"{version}.0",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "sys_platform": "linux",
            "platform_system": "Linux",
            "os_name": "posix",
            "platform_machine": machine,
            "platform_release": "",
            "platform_version": "",
        }
        for version in python_versions
        for machine in _MACHINES
    ]


def _applies(marker: Marker | None, extras: set[str], envs: list[dict[str, str]]) -> bool:
    if marker is None:
        return True
    return any(
        marker.evaluate({**env, "extra": extra}) for env in envs for extra in ({""} | extras)
    )


def _closure(
    include_powertools: bool, python_versions: Sequence[str]
) -> list[metadata.Distribution]:
    envs = _environments(python_versions)
    try:
        root = metadata.distribution("dynalease")
    except metadata.PackageNotFoundError:
        raise LayerBuildError(
            "dynalease is not installed in this environment; install it (pip install -e . or "
            "pip install dynalease) before building the layer"
        ) from None
    found: dict[str, metadata.Distribution] = {"dynalease": root}
    pending: list[tuple[metadata.Distribution, set[str]]] = [
        (root, {_LAYER_EXTRA} if include_powertools else set())
    ]
    while pending:
        parent, extras = pending.pop()
        for text in parent.requires or []:
            requirement = Requirement(text)
            if not _applies(requirement.marker, extras, envs):
                continue
            name = _normalise(requirement.name)
            if name in LAMBDA_RUNTIME_PACKAGES:
                continue
            if name in found:
                # Extras of an already-found distribution would widen the closure;
                # we only follow extras requested from dynalease itself.
                continue
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                hint = (
                    " (pip install 'dynalease[lambda]', or pass include_powertools=False)"
                    if parent is root and include_powertools
                    else ""
                )
                raise LayerBuildError(
                    f"{requirement} is needed by {_dist_name(parent)} for the layer but is not "
                    f"installed{hint}"
                ) from None
            if not requirement.specifier.contains(dist.version, prereleases=True):
                raise LayerBuildError(
                    f"{_dist_name(parent)} needs {requirement} but {name} {dist.version} is "
                    "installed; install a matching version before building the layer"
                )
            found[name] = dist
            pending.append((dist, set(requirement.extras)))
    return [found[name] for name in sorted(found)]


def _check_pure(dist: metadata.Distribution) -> None:
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    impure = [tag for tag in tags if not tag.endswith("-none-any")]
    if impure or "Root-Is-Purelib: false" in wheel:
        raise LayerBuildError(
            f"{_dist_name(dist)} {dist.version} is platform-specific "
            f"({', '.join(impure) or 'not purelib'}); "
            "the layer targets x86_64 and arm64 and is built without Docker, so only "
            "pure-Python dependencies can go in"
        )


def _wanted(relative: PurePosixPath) -> bool:
    parts = relative.parts
    if not parts or parts[0] == ".." or "__pycache__" in parts:
        return False
    if any(part.startswith(".") for part in parts):
        return False
    name = parts[-1]
    return not (name.endswith((".pyc", ".pyo", ".pth", "~")))


def _add(entries: dict[str, bytes], relative: PurePosixPath, content: bytes) -> None:
    if relative.suffix in {".so", ".pyd", ".dylib"}:
        raise LayerBuildError(
            f"{relative} is a compiled extension; only pure-Python code can go in the layer"
        )
    entries[str(_ROOT / relative)] = content


def _add_distribution(entries: dict[str, bytes], dist: metadata.Distribution) -> None:
    _check_pure(dist)
    files = dist.files
    if files is None:
        raise LayerBuildError(
            f"{_dist_name(dist)} has no RECORD; reinstall it with pip so its files are known"
        )
    dist_info: PurePosixPath | None = None
    added: list[PurePosixPath] = []
    for record in files:
        relative = PurePosixPath(record.as_posix())
        if relative.parts and relative.parts[0].endswith(".dist-info"):
            dist_info = PurePosixPath(relative.parts[0])
            if relative.name in _DROP_DIST_INFO or not _wanted(relative):
                continue
        elif _dist_name(dist) == "dynalease" or not _wanted(relative):
            # dynalease's own modules come from its package directory below, which
            # is the same for a wheel install and an editable checkout.
            continue
        _add(entries, relative, Path(str(dist.locate_file(record))).read_bytes())
        added.append(relative)
    if _dist_name(dist) == "dynalease":
        added.extend(_add_dynalease_package(entries))
    if dist_info is None:
        raise LayerBuildError(f"{_dist_name(dist)} has no .dist-info directory in its RECORD")
    if not any(not p.parts[0].endswith(".dist-info") for p in added):
        raise LayerBuildError(
            f"{_dist_name(dist)} is installed in editable mode or has no files; install it "
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


def _write_zip(entries: dict[str, bytes], zip_path: Path) -> None:
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=zip_path.parent, suffix=".partial")
    os.close(handle)
    try:
        with zipfile.ZipFile(temporary, "w") as archive:
            for arcname in sorted(entries):
                info = zipfile.ZipInfo(arcname, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3
                mode = _EXEC_MODE if arcname == _EXTENSION_ENTRY else _FILE_MODE
                info.external_attr = mode << 16
                archive.writestr(info, entries[arcname], compresslevel=9)
        os.chmod(temporary, 0o644)
        # Atomic, so a concurrent synth never sees a half-written zip.
        os.replace(temporary, zip_path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _prune(directory: Path, *, keep: Path) -> None:
    entries = sorted(
        (path for path in directory.glob("dynalease-layer-*.zip") if path != keep),
        key=lambda path: path.stat().st_mtime,
        reverse=True,
    )
    for stale in entries[_CACHE_ENTRIES - 1 :]:
        # Another synth may be pruning or reading the same directory at the same time.
        stale.unlink(missing_ok=True)
