"""Every private botocore attribute dynalease reads or writes, in one place.

The lean path takes its route from a botocore client so both paths agree, and
some of what it needs is only on private attributes: the request signer's
credentials object and the HTTP session's ``verify`` setting (where requests go
is read from a request botocore prepares: :func:`.route.botocore_request`). The
lock client made for ``from_client`` shares the caller's credentials object and
copies its ``verify``. A botocore release that renames one must not silently
change what is sent (a missing ``_verify`` read as "the default bundle"): every read here raises
:class:`BotocoreChanged` instead, and the lean path then leaves lock requests to
botocore (logged as a warning). ``tests/unit/transport/test_lean_settings.py``
builds real clients and fails when any of these is gone or changes type.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "BotocoreChanged",
    "ClientInternals",
    "api_call",
    "endpoint_verify",
    "read_client",
    "share_credentials",
]

_MISSING = object()


class BotocoreChanged(RuntimeError):
    """A private botocore attribute dynalease relies on is missing or has another type."""


class ClientInternals(NamedTuple):
    """What a botocore client's private attributes say about how it signs and trusts."""

    #: ``client._request_signer._credentials``: None when the client signs nothing.
    credentials: Any
    #: ``client._endpoint.http_session._verify``: False, a CA file or directory, or True.
    verify: bool | str

    def __repr__(self) -> str:  # the credentials object's own repr is botocore's
        return f"ClientInternals(verify={self.verify!r})"


def _version() -> str:
    return str(getattr(sys.modules.get("botocore"), "__version__", "unknown"))


def _attr(owner: Any, name: str, kinds: tuple[type, ...] | None = None) -> Any:
    value = getattr(owner, name, _MISSING)
    if value is _MISSING:
        raise BotocoreChanged(
            f"botocore {_version()}: {type(owner).__name__} has no attribute {name!r}, "
            "which dynalease reads; lock requests go through botocore"
        )
    if kinds is not None and not isinstance(value, kinds):
        raise BotocoreChanged(
            f"botocore {_version()}: {type(owner).__name__}.{name} is a "
            f"{type(value).__name__}, not {' or '.join(kind.__name__ for kind in kinds)}"
        )
    return value


def _http_session(client: Any) -> Any:
    return _attr(_attr(client, "_endpoint"), "http_session")


def read_client(client: Any) -> ClientInternals:
    """The private settings of ``client`` the lean path needs (raises BotocoreChanged)."""
    return ClientInternals(
        credentials=_attr(_attr(client, "_request_signer"), "_credentials"),
        verify=_verify(_http_session(client)),
    )


def endpoint_verify(client: Any) -> bool | str:
    """The ``verify`` a botocore client was made with (False, a CA path, or True)."""
    return _verify(_http_session(client))


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
    credentials = _attr(_attr(source, "_request_signer"), "_credentials")
    signer = _attr(target, "_request_signer")
    _attr(signer, "_credentials")  # it must exist: setting a new name would change nothing
    signer._credentials = credentials


def api_call(client: Any) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The client's one-request entry point (``_make_api_call``), for low-level requests."""
    call = _attr(client, "_make_api_call")
    if not callable(call):
        raise BotocoreChanged(f"botocore {_version()}: _make_api_call is not callable")
    made: Callable[[str, dict[str, Any]], dict[str, Any]] = call
    return made
