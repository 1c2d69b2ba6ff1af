"""Every private botocore attribute dynalease reads or writes, in one place.

The lean path takes its route from a botocore client so both paths agree, and
some of what it needs is only on private attributes: the request signer's
credentials object and the HTTP session's ``verify`` setting (where requests go
is read from a request botocore prepares: :func:`.route.botocore_request`). The
lock client made for ``from_client`` shares the caller's credentials object and
copies its ``verify``. A botocore release that renames one must not silently
change what is sent (a missing ``_verify`` read as "the default bundle"): every
read here raises :class:`BotocoreChanged` instead, and the lean path then leaves lock requests to
botocore (logged as a warning). ``tests/unit/transport/test_lean_settings.py``
builds real clients and fails when any of these is gone or changes type.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["BotocoreChanged", "endpoint_verify", "share_credentials", "signing_credentials"]

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


def signing_credentials(client: Any) -> Any:
    """``client``'s credentials object (``_request_signer._credentials``); None if it signs none."""
    return _attr(_attr(client, "_request_signer"), "_credentials")


def endpoint_verify(client: Any) -> bool | str:
    """The ``verify`` a botocore client was made with (False, a CA path, or True)."""
    return _verify(_attr(_attr(client, "_endpoint"), "http_session"))


def _verify(session: Any) -> bool | str:
    value = _attr(session, "_verify")
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, (bool, str)):
        raise BotocoreChanged(
            f"botocore {_version()}: the HTTP session's _verify is a {type(value).__name__}"
        )
    return value


def share_credentials(source: Any, target: Any) -> None:
    """Make ``target`` sign with ``source``'s credentials object (refreshes apply to both)."""
    credentials = signing_credentials(source)
    signer = _attr(target, "_request_signer")
    _attr(signer, "_credentials")  # it must exist: setting a new name would change nothing
    signer._credentials = credentials
