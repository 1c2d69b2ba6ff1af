"""The lean request path: lock requests over keep-alive HTTP on the runtime's loop.

botocore spends most of a lock request's CPU on generic machinery (the
request pipeline, event hooks, model-driven serialising and parsing, urllib3)
and needs a thread per in-flight request. Lock requests are a handful of fixed
JSON shapes, so this path sends them itself: JSON bodies, SigV4 signatures
(:mod:`.sign`) and HTTP/1.1 keep-alive connections (:mod:`.http`)
on the runtime's event loop.

When every setting is in arguments and environment variables (static keys, a
Region, perhaps an endpoint URL; see :mod:`.config`), the route is read
from them and no botocore client is built for lock requests. Otherwise
everything about *where* and *as whom* comes from the botocore lock client made
from the user's configuration, so both paths agree: the endpoint botocore
resolved (explicit ``endpoint_url``, ``AWS_ENDPOINT_URL_DYNAMODB``, config files,
the regional endpoint), its Region, its credentials object (the same chain, and
refreshed the same way), its CA bundle or ``verify`` setting and its timeouts.
Configurations this path does not implement (proxies, client certificates,
unsigned or non-SigV4 clients, endpoints with a path) are handed to botocore:
the transport then sends everything through :class:`BotoTransport`.

Answers and failures are mapped by :func:`._aws.map_error_code` and
:func:`._aws.map_transport_error`, exactly as on the botocore path.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import botocore.exceptions

if TYPE_CHECKING:
    from botocore.client import BaseClient

from .._engine.store import TimedOut, Transport
from ..constants import ENV_TRANSPORT
from .boto import (
    LOCK_POOL_CONNECTIONS,
    LOCK_READ_TIMEOUT_S,
    BotoTransport,
    map_error_code,
    map_transport_error,
)
from .config import DirectConfig
from .http import BlockingPool, ConnectionPool, Cut, Late, NotSent, Unanswered
from .sign import SigV4Signer, amz_date, host_header

__all__ = ["TRANSPORTS", "LeanTransport", "lock_transport", "transport_choice"]

log = logging.getLogger("dynalease")

TRANSPORTS = ("lean", "boto")
DEFAULT_TRANSPORT = "lean"
_TARGET = "DynamoDB_20120810."
_USER_AGENT = "dynalease-lean/1"
#: Operations that change nothing: safe to resend when a reused connection was dropped.
_READS = frozenset({"GetItem", "DescribeTable"})


def transport_choice(explicit: str | None) -> str:
    """The lock request path: the explicit choice, else ``DYNALEASE_TRANSPORT``, else lean."""
    if explicit is not None:
        if explicit not in TRANSPORTS:
            raise ValueError(f"transport must be 'lean' or 'boto', got {explicit!r}")
        return explicit
    value = os.environ.get(ENV_TRANSPORT, "").strip().lower()
    if not value:
        return DEFAULT_TRANSPORT
    if value not in TRANSPORTS:
        raise ValueError(
            f"{ENV_TRANSPORT}={value!r} is not a lock request path: set it to 'lean' or "
            "'boto', or unset it"
        )
    return value


def lock_transport(
    factory: Callable[[], BaseClient], choice: str, direct: DirectConfig | None = None
) -> Transport:
    """The transport for lock requests over a botocore lock client made by ``factory``.

    With ``direct`` (settings read without botocore), the lean path needs no
    botocore client for the requests it sends on the runtime loop.
    """
    if choice == "boto":
        return BotoTransport(factory)
    return LeanTransport(factory, direct)


class _Route:
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
            raise _Unsupported(f"endpoint {url!r} is not an http(s) URL")
        if parts.path not in ("", "/") or parts.query or parts.username:
            raise _Unsupported(f"endpoint {url!r} has a path, query or user info")
        host = parts.hostname
        self.url = url
        self.credentials = credentials
        self.signer = SigV4Signer(host_header(parts.scheme, host, parts.port), region)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        ssl_context = _ssl_context(verify) if parts.scheme == "https" else None
        self.pool = ConnectionPool(
            host,
            port,
            ssl_context=ssl_context,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_connections=max_connections,
        )
        #: For sync locks' own requests, sent from the calling thread.
        self.blocking = BlockingPool(
            host,
            port,
            ssl_context=ssl_context,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_idle=max_connections,
        )

    def request_bytes(self, operation: str, body: bytes, frozen: Any) -> bytes:
        """The signed request head for ``body``."""
        headers = self.signer.sign(
            _TARGET + operation,
            body,
            frozen.access_key,
            frozen.secret_key,
            frozen.token,
            amz_date(),
        )
        head = "".join(f"{name}: {value}\r\n" for name, value in headers)
        return (
            f"POST / HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n"
            f"User-Agent: {_USER_AGENT}\r\nAccept-Encoding: identity\r\n\r\n"
        ).encode("latin-1")

    @classmethod
    def of_client(cls, client: Any) -> _Route:
        """The route of a botocore client: its endpoint, Region, credentials and settings."""
        url = client.meta.endpoint_url
        config = client.meta.config
        if (config.signature_version or "v4") not in ("v4", "dynamodb"):
            raise _Unsupported(f"signature version {config.signature_version!r}")
        signer = client._request_signer
        credentials = signer._credentials
        if credentials is None:
            raise _Unsupported("the client signs no requests (no credentials object)")
        session = client._endpoint.http_session
        if session._proxy_config.proxy_url_for(url):
            raise _Unsupported("a proxy is configured for the endpoint")
        if getattr(session, "_cert_file", None):
            raise _Unsupported("a client certificate is configured")
        return cls(
            url,
            signer._region_name or client.meta.region_name,
            credentials,
            verify=session._verify,
            connect_timeout=float(config.connect_timeout),
            read_timeout=float(config.read_timeout),
            max_connections=int(config.max_pool_connections or LOCK_POOL_CONNECTIONS),
        )

    @classmethod
    def direct(cls, config: DirectConfig) -> _Route:
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


class _Unsupported(Exception):
    """A configuration the lean path leaves to botocore."""


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


class LeanTransport:
    """Lock requests over asyncio keep-alive HTTP, signed with the botocore client's credentials.

    ``call`` (blocking, from user threads) and anything the lean path does not
    support go through the botocore client; ``send`` on the runtime loop uses
    the lean path. The botocore client is made on first use, off the loop.
    """

    def __init__(
        self, factory: Callable[[], BaseClient], direct: DirectConfig | None = None
    ) -> None:
        self.boto = BotoTransport(factory)
        self._direct = direct
        self._route: _Route | None = None
        self._prepared = False
        self._making: asyncio.Future[BaseClient] | None = None
        self.fallback_reason: str | None = None

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request from this thread (through botocore)."""
        return self.boto.call(operation, params)

    @property
    def pool(self) -> ConnectionPool | None:
        """The connection pool, once the first request has chosen the lean path."""
        return None if self._route is None else self._route.pool

    async def prepare(self) -> None:
        """Make the botocore client off the loop and choose the lean path or botocore."""
        if not self._prepared:
            try:
                await self._prepare()
            except Exception:  # the first request tries again and reports it
                return

    async def _prepare(self) -> None:
        # Making the client may resolve credentials (a metadata-service call): off the
        # loop, and once for all the requests that arrive before it is made.
        if self._prepared:
            return
        if self._direct is not None:
            # Everything is known without botocore: no client to build.
            try:
                self._route = _Route.direct(self._direct)
            except _Unsupported as why:
                self._direct = None
                log.debug("dynalease: the environment's endpoint needs botocore: %s", why)
            else:
                self._prepared = True
                return
        making = self._making
        if making is None or (making.done() and making.exception() is not None):
            making = self._making = asyncio.get_running_loop().run_in_executor(
                None, lambda: self.boto.client
            )
        client = await asyncio.shield(making)
        if self._prepared:
            return
        try:
            self._route = _Route.of_client(client)
        except _Unsupported as why:
            self.fallback_reason = str(why)
            log.debug("dynalease: lock requests go through botocore: %s", why)
        except (AttributeError, TypeError) as error:  # a botocore we do not know
            self.fallback_reason = f"unrecognised botocore client ({error})"
            log.debug("dynalease: lock requests go through botocore: %s", error)
        self._prepared = True

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request from the runtime loop."""
        return await self.send_within(operation, params, None, None)

    async def send_within(
        self,
        operation: str,
        params: dict[str, Any],
        timeout: float | None,
        on_late: Callable[[Awaitable[dict[str, Any]]], object] | None,
    ) -> dict[str, Any]:
        """Send from the runtime loop, waiting at most ``timeout`` seconds.

        A request that went out but was not answered in time (or whose wait was
        cancelled) is not abandoned: ``on_late`` gets an awaitable of its answer
        and :class:`TimedOut` (or the cancellation) is raised. Without a
        timeout, as :meth:`send`.
        """
        if not self._prepared:
            try:
                await self._prepare()
            except (botocore.exceptions.BotoCoreError, OSError) as error:
                raise map_transport_error(error, operation) from error
        route = self._route
        if route is None:
            return await _bounded(self.boto.send(operation, params), timeout, on_late)
        body = _ENCODER.encode(params).encode()
        frozen = await _frozen(route.credentials, operation)
        request = route.request_bytes(operation, body, frozen)

        def late_answer(rest: Awaitable[tuple[int, bytes, int | None]]) -> None:
            assert on_late is not None
            on_late(_late_answer(rest, route.url, operation))

        try:
            status, payload, crc = await route.pool.request(
                request,
                body,
                retry_stale=operation in _READS,
                timeout=timeout,
                on_late=None if on_late is None else late_answer,
            )
        except Cut:
            raise TimedOut from None
        except (NotSent, Unanswered) as failure:
            raise _transport_failure(failure, route.url, operation) from failure.cause
        return _answer(operation, status, payload, crc, route.url)

    def blocking_ready(self) -> bool:
        """True when :meth:`send_blocking` can send (the lean path was chosen)."""
        return self._prepared and self._route is not None

    def send_blocking(
        self,
        operation: str,
        params: dict[str, Any],
        timeout: float,
        on_late: Callable[[Late], object],
    ) -> dict[str, Any]:
        """Send one request from the calling thread, waiting at most ``timeout`` seconds.

        Only after :meth:`blocking_ready`. A request that was sent but not
        answered in time goes to ``on_late`` (see :meth:`finish_late`) and is
        raised as a failure that may have been applied.
        """
        route = self._route
        assert route is not None, "send_blocking before the lean path was chosen"
        body = _ENCODER.encode(params).encode()
        try:
            # A due refresh runs here, in the caller's thread, as botocore's would.
            frozen = route.credentials.get_frozen_credentials()
            if frozen.access_key is None or frozen.secret_key is None:
                raise botocore.exceptions.NoCredentialsError()
        except (botocore.exceptions.BotoCoreError, OSError) as error:
            raise map_transport_error(error, operation) from error
        request = route.request_bytes(operation, body, frozen)
        try:
            status, payload, crc = route.blocking.request(
                request + body,
                timeout=timeout,
                retry_stale=operation in _READS,
                on_late=on_late,
            )
        except (NotSent, Unanswered) as failure:
            raise _transport_failure(failure, route.url, operation) from failure.cause
        return _answer(operation, status, payload, crc, route.url)

    async def finish_late(self, operation: str, late: Late) -> dict[str, Any]:
        """The answer to a late blocking request, read on the runtime's thread pool."""
        route = self._route
        assert route is not None
        try:
            status, payload, crc = await asyncio.get_running_loop().run_in_executor(
                None, late.finish
            )
        except (NotSent, Unanswered) as failure:
            raise _transport_failure(failure, route.url, operation) from failure.cause
        return _answer(operation, status, payload, crc, route.url)


async def _late_answer(
    rest: Awaitable[tuple[int, bytes, int | None]], url: str, operation: str
) -> dict[str, Any]:
    """The parsed answer to a request whose caller stopped waiting."""
    try:
        status, payload, crc = await rest
    except (NotSent, Unanswered) as failure:
        raise _transport_failure(failure, url, operation) from failure.cause
    return _answer(operation, status, payload, crc, url)


async def _bounded(
    operation: Awaitable[dict[str, Any]],
    timeout: float | None,
    on_late: Callable[[Awaitable[dict[str, Any]]], object] | None,
) -> dict[str, Any]:
    """``send_within`` for a transport that cannot bound a request itself."""
    if timeout is None or on_late is None:
        return await operation
    task = asyncio.ensure_future(operation)
    try:
        done, _ = await asyncio.wait((task,), timeout=max(0.0, timeout))
    except asyncio.CancelledError:
        on_late(task)
        raise
    if not done:
        on_late(task)
        raise TimedOut
    return task.result()


async def _frozen(credentials: Any, operation: str) -> Any:
    """The current key, secret and token; a due refresh runs off the loop."""
    try:
        if getattr(credentials, "refresh_needed", None) is not None and (
            credentials.refresh_needed()
        ):
            # A refresh may call STS or a metadata service: never on the loop.
            frozen = await asyncio.get_running_loop().run_in_executor(
                None, credentials.get_frozen_credentials
            )
        else:
            frozen = credentials.get_frozen_credentials()
        if frozen.access_key is None or frozen.secret_key is None:
            raise botocore.exceptions.NoCredentialsError()
    except (botocore.exceptions.BotoCoreError, OSError) as error:
        raise map_transport_error(error, operation) from error
    return frozen


def _transport_failure(failure: NotSent | Unanswered, url: str, operation: str) -> Exception:
    """The botocore error botocore would have raised, mapped the same way."""
    error: Exception
    if isinstance(failure, NotSent):
        error = (
            botocore.exceptions.ConnectTimeoutError(endpoint_url=url)
            if failure.timeout
            else botocore.exceptions.EndpointConnectionError(endpoint_url=url)
        )
    else:
        error = (
            botocore.exceptions.ReadTimeoutError(endpoint_url=url)
            if failure.timeout
            else botocore.exceptions.ConnectionClosedError(endpoint_url=url)
        )
    return map_transport_error(error, operation)


def _answer(
    operation: str, status: int, payload: bytes, crc: int | None, url: str
) -> dict[str, Any]:
    """The parsed answer, or the mapped error; as botocore would parse it."""
    garbled = crc is not None and zlib.crc32(payload) != crc
    response: dict[str, Any] = {}
    if payload and not garbled:
        try:
            parsed = json.loads(payload)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            response = parsed
        else:
            # A success must be a JSON object; an error page (a proxy's HTML) may not be.
            garbled = status == 200
    if garbled:
        # A damaged answer tells nothing about whether the request was applied.
        error = botocore.exceptions.ConnectionClosedError(endpoint_url=url)
        raise map_transport_error(error, operation)
    _decode_blobs(response)
    if status == 200:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
        return response
    kind = str(response.pop("__type", "") or "")
    code = kind.rsplit("#", 1)[-1] or str(status)
    message = str(response.pop("message", "") or response.pop("Message", "") or "")
    response["Error"] = {"Code": code, "Message": message}
    response["ResponseMetadata"] = {"HTTPStatusCode": status}
    raise map_error_code(code, message, operation, status, response)


def _encode_blob(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a value of type {type(value).__name__} cannot be sent to DynamoDB")


#: Made once: ``json.dumps`` with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_encode_blob)


def _decode_blobs(response: dict[str, Any]) -> None:
    """Binary attributes arrive base64-encoded; botocore hands them over as bytes."""
    for name in ("Item", "Attributes"):
        item = response.get(name)
        if isinstance(item, dict):
            _decode_item(item)
    for reason in response.get("CancellationReasons") or ():
        if isinstance(reason, dict) and isinstance(reason.get("Item"), dict):
            _decode_item(reason["Item"])


def _decode_item(item: dict[str, Any]) -> None:
    for value in item.values():
        _decode_value(value)


def _decode_value(value: Any) -> None:
    if not isinstance(value, dict):
        return
    try:
        if "B" in value:
            value["B"] = base64.b64decode(value["B"])
        elif "BS" in value:
            value["BS"] = [base64.b64decode(member) for member in value["BS"]]
        elif "M" in value:
            _decode_item(value["M"])
        elif "L" in value:
            for member in value["L"]:
                _decode_value(member)
    except (binascii.Error, TypeError, AttributeError):
        pass  # leave what cannot be decoded as it came
