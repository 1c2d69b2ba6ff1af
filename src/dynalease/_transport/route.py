"""Where lean lock requests go and how they are signed: read from a botocore client (so both
paths agree) or from :mod:`.config`'s settings. What the lean path does not implement
raises :class:`Unsupported`, and the transport hands it to botocore.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .._redact import shown_url
from .boto import LOCK_POOL_CONNECTIONS, LOCK_READ_TIMEOUT_S
from .botocore_internals import endpoint_verify, signing_credentials
from .config import DirectConfig
from .connections import Answer, Connections
from .sign import SigV4Signer, host_header

__all__ = ["Route", "Unsupported", "botocore_request"]

_TARGET = "DynamoDB_20120810."


class Unsupported(Exception):
    """A configuration the lean path leaves to botocore."""


class Route:
    def __init__(
        self,
        url: str,
        region: str,
        credentials: Any,
        *,
        verify: bool | str | None = None,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
        proxies: dict[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unsupported(f"endpoint {shown_url(url)!r} is not an http(s) URL")
        if parts.path not in ("", "/") or parts.query or parts.username:
            raise Unsupported(f"endpoint {shown_url(url)!r} has a path, query or user info")
        self.url = url
        self.region = region
        self.credentials = credentials
        self.signer = SigV4Signer(host_header(parts.scheme, parts.hostname, parts.port), region)
        self.connections = Connections(
            url,
            verify=verify,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_connections=max_connections,
            proxies=proxies,
        )
        if (self.connections.proxy or "").startswith("https:"):
            # TLS to the proxy itself, then TLS through it: http.client has no such tunnel.
            raise Unsupported("the proxy is an https:// URL")

    def post(
        self,
        operation: str,
        body: bytes,
        frozen: Any,
        *,
        timeout: float,
        retry_stale: bool,
        late: Callable[[Callable[[], Answer]], object] | None = None,
    ) -> Answer:
        headers = self.signer.headers(
            _TARGET + operation, body, frozen.access_key, frozen.secret_key, frozen.token
        )
        return self.connections.post(
            headers, body, timeout=timeout, retry_stale=retry_stale, late=late
        )

    @classmethod
    def of_client(cls, client: Any) -> Route:
        config = client.meta.config
        if (config.signature_version or "v4") not in ("v4", "dynamodb"):
            raise Unsupported(f"signature version {config.signature_version!r}")
        if config.client_cert:
            raise Unsupported("a client certificate is configured")
        if config.proxies_config:
            raise Unsupported("proxy TLS settings are configured")
        credentials = signing_credentials(client)  # BotocoreChanged if botocore moved it
        if credentials is None:
            raise Unsupported("the client signs no requests (no credentials object)")
        verify = endpoint_verify(client)
        url, region = botocore_request(client)
        return cls(
            url,
            region,
            credentials,
            verify=verify,
            connect_timeout=float(config.connect_timeout),
            read_timeout=float(config.read_timeout),
            max_connections=int(config.max_pool_connections or LOCK_POOL_CONNECTIONS),
            proxies=config.proxies,
        )

    @classmethod
    def direct(cls, config: DirectConfig) -> Route:
        return cls(
            config.endpoint_url,
            config.region,
            config.credentials,
            verify=config.ca_bundle,
            connect_timeout=config.connect_timeout,
            read_timeout=LOCK_READ_TIMEOUT_S,
            max_connections=LOCK_POOL_CONNECTIONS,
        )


def botocore_request(client: Any) -> tuple[str, str]:
    """The URL and signing Region of a request ``client`` would send.

    botocore resolves the endpoint per request (account-ID, FIPS, dual-stack, overrides):
    one ``GetItem`` is prepared and signed, and stopped at its ``before-send`` event.
    """
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    seen: list[Any] = []

    def stop(request: Any, **_: Any) -> Any:
        seen.append(request)
        return AWSResponse(request.url, 200, HTTPHeaders(), _Empty())

    event = "before-send.dynamodb.GetItem"
    client.meta.events.register_first(event, stop, unique_id="dynalease-route")
    try:
        client.get_item(TableName="dynalease-route", Key={"key": {"S": "route"}})
    finally:
        client.meta.events.unregister(event, unique_id="dynalease-route")
    if not seen:
        raise Unsupported("botocore sent no request to look at")
    request = seen[0]
    authorization = request.headers.get("Authorization", b"")
    text = authorization.decode() if isinstance(authorization, bytes) else str(authorization)
    if not text.startswith("AWS4-HMAC-SHA256 Credential="):
        raise Unsupported("botocore does not sign the client's requests with SigV4")
    scope = text.split("Credential=", 1)[1].split(",", 1)[0].split("/")
    url = request.url.rstrip("/") if urlsplit(request.url).path in ("", "/") else request.url
    return url, scope[2]


class _Empty:
    def stream(self, **_: Any) -> Any:
        yield b"{}"
