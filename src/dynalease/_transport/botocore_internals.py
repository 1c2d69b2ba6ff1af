"""Every private botocore attribute dynalease reads or writes, in one place.

The lean path takes its route from a botocore client so both paths agree, and
some of what it needs is only on private attributes: the request signer's
credentials object and Region, and the HTTP session's proxies, client
certificate and ``verify`` setting. The lock client made for ``from_client``
shares the caller's credentials object and copies its ``verify``. A botocore
release that renames one must not silently change what is sent (a missing
``_cert_file`` read as "no client certificate"): every read here raises
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
    """What a botocore client's private attributes say about where and how it sends."""

    #: ``client._request_signer._credentials``: None when the client signs nothing.
    credentials: Any
    #: ``client._request_signer._region_name``.
    signing_region: str | None
    #: ``client._endpoint.http_session._proxy_config.proxy_url_for(endpoint)``.
    proxy_url: str | None
    #: ``client._endpoint.http_session._cert_file``: the client certificate, or None.
    cert_file: str | None
    #: ``client._endpoint.http_session._verify``: False, a CA file or directory, or True.
    verify: bool | str

    def __repr__(self) -> str:  # the credentials object's own repr is botocore's
        return (
            f"ClientInternals(signing_region={self.signing_region!r}, "
            f"proxy={'set' if self.proxy_url else None}, cert_file={self.cert_file!r}, "
            f"verify={self.verify!r})"
        )


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


def read_client(client: Any, endpoint_url: str) -> ClientInternals:
    """The private settings of ``client`` the lean path needs (raises BotocoreChanged)."""
    signer = _attr(client, "_request_signer")
    session = _http_session(client)
    proxy_url_for = _attr(_attr(session, "_proxy_config"), "proxy_url_for")
    if not callable(proxy_url_for):
        raise BotocoreChanged(f"botocore {_version()}: proxy_url_for is not callable")
    proxy = proxy_url_for(endpoint_url)
    if proxy is not None and not isinstance(proxy, str):
        raise BotocoreChanged(f"botocore {_version()}: proxy_url_for gave a {type(proxy)}")
    return ClientInternals(
        credentials=_attr(signer, "_credentials"),
        signing_region=_attr(signer, "_region_name", (str, type(None))),
        proxy_url=proxy or None,
        cert_file=_attr(session, "_cert_file", (str, type(None))),
        verify=_verify(session),
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
