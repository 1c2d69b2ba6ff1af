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
from .botocore_internals import (
    endpoint_verify,
    request_signer,
    ruleset_resolver,
    signing_credentials,
)
from .config import DirectConfig
from .connections import Answer, Connections, Dialing
from .sign import SigV4Signer, host_header

__all__ = ["Route", "Unsupported", "botocore_request"]

_TARGET = "DynamoDB_20120810."


class Unsupported(Exception):
    """A configuration the lean path leaves to botocore."""


class Route:
    def __init__(self, url: str, region: str, credentials: Any, dialing: Dialing) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unsupported(f"endpoint {shown_url(url)!r} is not an http(s) URL")
        if parts.path not in ("", "/") or parts.query or parts.username:
            raise Unsupported(f"endpoint {shown_url(url)!r} has a path, query or user info")
        self.url = url
        self.region = region
        self.credentials = credentials
        self.signer = SigV4Signer(host_header(parts.scheme, parts.hostname, parts.port), region)
        self.connections = Connections(url, dialing)
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
        # Loaded now, while preparing (off the loop, before a caller reads its budget),
        # not by the first request: a metadata service call can take much of a short one.
        credentials.get_frozen_credentials()
        verify = endpoint_verify(client)
        url, region = botocore_request(client)
        return cls(
            url,
            region,
            credentials,
            Dialing(
                connect_timeout=float(config.connect_timeout),
                read_timeout=float(config.read_timeout),
                max_connections=int(config.max_pool_connections or LOCK_POOL_CONNECTIONS),
                verify=verify,
                proxies=config.proxies,
            ),
        )

    @classmethod
    def direct(cls, config: DirectConfig) -> Route:
        return cls(
            config.endpoint_url,
            config.region,
            config.credentials,
            Dialing(
                connect_timeout=config.connect_timeout,
                read_timeout=LOCK_READ_TIMEOUT_S,
                max_connections=LOCK_POOL_CONNECTIONS,
                verify=config.ca_bundle,
            ),
        )


def botocore_request(client: Any) -> tuple[str, str]:
    """The URL and signing Region of a lock request ``client`` would send, sending nothing.

    botocore resolves the endpoint per request (account-ID, FIPS, dual-stack, overrides)
    from its endpoint ruleset; it is asked here for a ``GetItem`` as ``_make_api_call``
    asks it. No request is made, so the client's ``before-call``/``after-call`` hooks and
    the tracers that wrap ``_make_api_call`` (X-Ray, OpenTelemetry) see none; only
    botocore's ``before-endpoint-resolution`` handlers run, as for any request.
    """
    signer = request_signer(client)
    if signer.signature_version not in ("v4", "dynamodb"):
        raise Unsupported(f"botocore signs the client's requests with {signer.signature_version}")
    region = str(signer.region_name)
    resolver = ruleset_resolver(client)
    if resolver is None:  # a botocore without the service's ruleset: the client's URL
        return _without_slash(str(client.meta.endpoint_url)), region
    operation = client.meta.service_model.operation_model("GetItem")
    context = {
        "client_region": client.meta.region_name,
        "client_config": client.meta.config,
        "has_streaming_input": False,
        "auth_type": operation.resolved_auth_type,
    }
    endpoint = resolver.construct_endpoint(
        operation_model=operation,
        call_args={"TableName": "dynalease-route", "Key": {"key": {"S": "route"}}},
        request_context=context,
    )
    schemes = endpoint.properties.get("authSchemes")
    if schemes:
        auth_type, signing = resolver.auth_schemes_to_signing_ctx(schemes)
        if auth_type not in ("v4", None):
            raise Unsupported(f"the endpoint asks for {auth_type} signatures")
        region = str(signing.get("region") or region)
    return _without_slash(str(endpoint.url)), region


def _without_slash(url: str) -> str:
    return url.rstrip("/") if urlsplit(url).path in ("", "/") else url
