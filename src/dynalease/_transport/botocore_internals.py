"""Every private botocore attribute dynalease reads or writes, in one place.

A botocore release that renames one must not silently change what is sent (a missing
``_verify`` read as "the default bundle"): every read raises :class:`BotocoreChanged`
instead, and lock requests go through botocore (logged as a warning).
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = [
    "BotocoreChanged",
    "endpoint_verify",
    "request_signer",
    "ruleset_resolver",
    "share_credentials",
    "signing_credentials",
]

_MISSING = object()


class BotocoreChanged(RuntimeError):
    """A private botocore attribute dynalease relies on is missing or has another type."""


def _version() -> str:
    return str(getattr(sys.modules.get("botocore"), "__version__", "unknown"))


def _attr(owner: Any, name: str) -> Any:
    value = getattr(owner, name, _MISSING)
    if value is _MISSING:
        raise BotocoreChanged(
            f"botocore {_version()}: {type(owner).__name__} has no attribute {name!r}, "
            "which dynalease reads; lock requests go through botocore"
        )
    return value


def request_signer(client: Any) -> Any:
    """The client's ``RequestSigner`` (its public ``region_name`` and ``signature_version``)."""
    return _attr(client, "_request_signer")


def signing_credentials(client: Any) -> Any:
    """None if ``client`` signs no requests."""
    return _attr(request_signer(client), "_credentials")


def ruleset_resolver(client: Any) -> Any:
    """The client's ``EndpointRulesetResolver`` (None: the service has no ruleset)."""
    return _attr(client, "_ruleset_resolver")


def endpoint_verify(client: Any) -> bool | str:
    """False, a CA path, or True."""
    session = _attr(_attr(client, "_endpoint"), "http_session")
    value = _attr(session, "_verify")
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, (bool, str)):
        raise BotocoreChanged(
            f"botocore {_version()}: the HTTP session's _verify is a {type(value).__name__}"
        )
    return value


def share_credentials(source: Any, target: Any) -> None:
    """Refreshes of ``source``'s credentials then apply to both."""
    credentials = signing_credentials(source)
    signer = _attr(target, "_request_signer")
    _attr(signer, "_credentials")  # it must exist: setting a new name would change nothing
    signer._credentials = credentials
