"""Where lean lock requests go and how they are signed and framed.

A :class:`Route` is read either from a botocore client (its endpoint, Region,
credentials object, CA bundle and timeouts, so both paths agree) or from the
settings :mod:`.config` read without botocore. Configurations the lean path
does not implement raise :class:`Unsupported`, and the transport hands them to
botocore.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from .boto import LOCK_POOL_CONNECTIONS, LOCK_READ_TIMEOUT_S
from .botocore_internals import read_client
from .config import DirectConfig
from .http.aio import ConnectionPool
from .http.blocking import BlockingPool
from .http.wire import frame_request, header_line
from .sign import SigV4Signer, host_header

__all__ = ["Route", "Unsupported"]

_TARGET = "DynamoDB_20120810."
#: Sent after the signed headers, unsigned.
_TRAILING = header_line("User-Agent", "dynalease-lean/1") + header_line(
    "Accept-Encoding", "identity"
)


class Unsupported(Exception):
    """A configuration the lean path leaves to botocore."""


class Route:
    """Where lean requests go and how they are signed."""

    def __init__(
        self,
        url: str,
        region: str,
        credentials: Any,
        *,
        verify: Any = None,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unsupported(f"endpoint {_shown(url)} is not an http(s) URL")
        if parts.path not in ("", "/") or parts.query or parts.username:
            raise Unsupported(f"endpoint {_shown(url)} has a path, query or user info")
        host = parts.hostname
        self.url = url
        self.credentials = credentials
        self.signer = SigV4Signer(host_header(parts.scheme, host, parts.port), region)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        limits: dict[str, Any] = {
            "ssl_context": _ssl_context(verify) if parts.scheme == "https" else None,
            "connect_timeout": connect_timeout,
            "read_timeout": read_timeout,
            "max_connections": max_connections,
        }
        self.pool = ConnectionPool(host, port, **limits)
        #: For sync locks' own requests, sent from the calling thread.
        self.blocking = BlockingPool(host, port, **limits)

    def request_bytes(self, operation: str, body: bytes, frozen: Any) -> bytes:
        """The whole signed request carrying ``body``."""
        fields = self.signer.fields(
            _TARGET + operation, body, frozen.access_key, frozen.secret_key, frozen.token
        )
        return frame_request(fields + _TRAILING, body)

    @classmethod
    def of_client(cls, client: Any) -> Route:
        """The route of a botocore client: its endpoint, Region, credentials and settings."""
        url = client.meta.endpoint_url
        config = client.meta.config
        if (config.signature_version or "v4") not in ("v4", "dynamodb"):
            raise Unsupported(f"signature version {config.signature_version!r}")
        inside = read_client(client, url)  # raises BotocoreChanged if botocore moved them
        if inside.credentials is None:
            raise Unsupported("the client signs no requests (no credentials object)")
        if inside.proxy_url:
            raise Unsupported("a proxy is configured for the endpoint")
        if inside.cert_file:
            raise Unsupported("a client certificate is configured")
        return cls(
            url,
            inside.signing_region or client.meta.region_name,
            inside.credentials,
            verify=inside.verify,
            connect_timeout=float(config.connect_timeout),
            read_timeout=float(config.read_timeout),
            max_connections=int(config.max_pool_connections or LOCK_POOL_CONNECTIONS),
        )

    @classmethod
    def direct(cls, config: DirectConfig) -> Route:
        """The route read from the environment, with the lock client's bounds."""
        return cls(
            config.endpoint_url,
            config.region,
            config.credentials,
            verify=config.ca_bundle,
            connect_timeout=config.connect_timeout,
            read_timeout=LOCK_READ_TIMEOUT_S,
            max_connections=LOCK_POOL_CONNECTIONS,
        )


def _shown(url: str) -> str:
    """``url`` for a message: its scheme, host and port (user info or a query may be secret)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
        where = f"{parts.scheme}://{parts.hostname or ''}{port}"
    except ValueError:
        return "(an unparsable URL)"
    hidden = parts.username or parts.password or parts.query or parts.path not in ("", "/")
    return f"{where!r}" + (" (its path, query or user info not shown)" if hidden else "")


def _ssl_context(verify: Any) -> Any:
    """The TLS context botocore's ``verify`` setting means (False, a CA path, or default)."""
    import ssl

    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    # botocore: True (or unset) means its default bundle; a string is a CA file or directory.
    path = verify if isinstance(verify, str) else _default_ca_bundle()
    if os.path.isdir(path):
        return ssl.create_default_context(capath=path)
    return ssl.create_default_context(cafile=path)


def _default_ca_bundle() -> str:
    # As botocore.httpsession.get_cert_path(True), without importing it (slow).
    try:
        import certifi

        return str(certifi.where())
    except ImportError:
        import importlib.util

        spec = importlib.util.find_spec("botocore")
        assert spec is not None and spec.origin is not None
        return os.path.join(os.path.dirname(spec.origin), "cacert.pem")
