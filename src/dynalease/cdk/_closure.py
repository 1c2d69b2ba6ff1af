"""Which installed distributions the layer carries: dynalease's runtime dependency closure
for the layer's Lambda runtimes, without what every Lambda Python runtime ships, and only
pure-Python wheels (the layer serves x86_64 and arm64 alike)."""

from __future__ import annotations

import email
import importlib.metadata as metadata

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = ["LAMBDA_RUNTIME_PACKAGES", "LayerBuildError", "check_pure", "closure", "dist_name"]

#: Distributions the AWS Lambda Python runtimes ship; never copied into the layer.
LAMBDA_RUNTIME_PACKAGES: frozenset[str] = frozenset(
    {"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six"}
)


_LAYER_EXTRA = "lambda"
_MACHINES = ("x86_64", "aarch64")


class LayerBuildError(RuntimeError):
    """The layer cannot be built from this environment; the message says what to install."""


def dist_name(dist: metadata.Distribution) -> str:
    return canonicalize_name(dist.metadata["Name"])


def _environments(versions: tuple[str, ...]) -> list[dict[str, str]]:
    # Marker environments of the Lambda runtimes, not of the machine building the layer: a
    # dependency goes in when any of the layer's runtimes needs it.
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
        for version in versions
        for machine in _MACHINES
    ]


def _applies(marker: Marker | None, extras: set[str], envs: list[dict[str, str]]) -> bool:
    if marker is None:
        return True
    return any(
        marker.evaluate({**env, "extra": extra}) for env in envs for extra in ({""} | extras)
    )


def closure(include_powertools: bool, versions: tuple[str, ...]) -> list[metadata.Distribution]:
    envs = _environments(versions)
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
            name = canonicalize_name(requirement.name)
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
                    f"{requirement} is needed by {dist_name(parent)} for the layer but is not "
                    f"installed{hint}"
                ) from None
            if not requirement.specifier.contains(dist.version, prereleases=True):
                raise LayerBuildError(
                    f"{dist_name(parent)} needs {requirement} but {name} {dist.version} is "
                    "installed; install a matching version before building the layer"
                )
            found[name] = dist
            pending.append((dist, set(requirement.extras)))
    return [found[name] for name in sorted(found)]


def check_pure(dist: metadata.Distribution) -> None:
    wheel = email.message_from_string(dist.read_text("WHEEL") or "")  # headers, as METADATA
    impure = [tag for tag in wheel.get_all("Tag", []) if not tag.endswith("-none-any")]
    if impure or wheel["Root-Is-Purelib"] == "false":
        raise LayerBuildError(
            f"{dist_name(dist)} {dist.version} is platform-specific "
            f"({', '.join(impure) or 'not purelib'}); "
            "the layer targets x86_64 and arm64 and is built without Docker, so only "
            "pure-Python dependencies can go in"
        )
