"""The lean request path: lock requests signed by us, sent over ``http.client``.

botocore spends most of a lock request's CPU on generic machinery (the request
pipeline, event hooks, model-driven serialising and parsing). Lock requests are
a handful of fixed JSON shapes, so this path encodes them, signs them
(:mod:`.sign`) and sends them over the standard library's keep-alive connections
(:mod:`.connections`): from a sync caller's own thread, or from the runtime's
bounded thread pool for async guards and renewals (never a thread per lease).

When every setting is in arguments and environment variables (static keys, a
Region, perhaps an endpoint URL or an account ID; see :mod:`.config`), the route
is read from them and no botocore client is built for lock requests. Otherwise
everything about *where* and *as whom* comes from the botocore lock client made
from the user's configuration, so both paths agree: the URL botocore's own
request would go to, its Region, its credentials object (the same chain, and
refreshed the same way), its CA bundle or ``verify`` setting, its proxies and
its timeouts (:mod:`.route`). Configurations this path does not implement
(client certificates, proxy TLS settings, unsigned or non-SigV4 clients,
endpoints with a path) are handed to botocore: the transport then sends
everything through :class:`BotoTransport`.

Answers are read by :mod:`.codec`; they and failures are mapped by
:mod:`.errors`, exactly as on the botocore path.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from botocore.client import BaseClient

from .. import _tracing
from .._engine.runtime import get_runtime
from .._engine.store import Transport, bounded
from ..constants import ENV_TRANSPORT
from ..exceptions import RequestFailedError
from .boto import BotoTransport
from .botocore_internals import BotocoreChanged
from .codec import ENCODER, read_answer
from .config import DirectConfig
from .connections import Answer, NotSent, Unanswered
from .errors import (
    REPLICATED_WRITE_CONFLICT,
    map_lean_failure,
    map_transport_error,
    transport_failures,
)
from .route import Route, Unsupported

__all__ = ["TRANSPORTS", "LeanTransport", "lock_transport", "transport_choice"]

log = logging.getLogger("dynalease")

TRANSPORTS = ("lean", "boto")
DEFAULT_TRANSPORT = "lean"
#: Operations that change nothing: safe to resend when a reused connection was dropped.
_READS = frozenset({"GetItem", "BatchGetItem", "DescribeTable"})
#: Writes sent from a caller's thread that leave a row behind if they land after their wait
#: (a create; a fenced create is an UpdateItem): their answers are kept (``send_blocking``).
_MAY_LEAVE_A_ROW = frozenset({"PutItem", "UpdateItem"})
#: Who reads the rest of an answer its caller stopped waiting for (see ``send_blocking``).
Late = Callable[[Callable[[], Answer]], object] | None
#: The first pause before resending a write that conflicted with another Region's.
CONFLICT_PAUSE_S = 0.02


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


def lock_transport(factory: Callable[[], BaseClient], choice: str) -> Transport:
    """The transport for lock requests over a botocore lock client made by ``factory``."""
    if choice == "boto":
        return BotoTransport(factory)
    return LeanTransport(factory)


class LeanTransport:
    """Lock requests signed by us over ``http.client``, from the caller's thread or the pool.

    ``call`` (the caller's own requests) and anything the lean path does not
    support go through the botocore client; lock requests use the lean path.
    The botocore client, when one is needed, is made on first use, off the loop.
    """

    def __init__(
        self, factory: Callable[[], BaseClient], direct: DirectConfig | None = None
    ) -> None:
        self.boto = BotoTransport(factory)
        self._direct = direct
        self._route: Route | None = None
        self._prepared = False
        self._making: asyncio.Future[Route | None] | None = None
        self._building = threading.Lock()
        self.fallback_reason: str | None = None

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request from this thread (through botocore)."""
        return self.boto.call(operation, params)

    @property
    def route(self) -> Route | None:
        """Where lean requests go, once the first request has chosen the lean path."""
        return self._route

    async def prepare(self) -> None:
        """Make the botocore client off the loop and choose the lean path or botocore."""
        if not self._prepared:
            try:
                await self._prepare()
            except Exception:  # the first request tries again and reports it
                return

    async def _prepare(self) -> None:
        # Making the client may resolve credentials (a metadata-service call), and
        # reading its route signs a request: off the loop, and once for all the
        # requests that arrive before it is made.
        import asyncio

        if self._prepared or self.direct_route() is not None:
            return  # chosen, or everything is known without botocore
        making = self._making
        if making is None or (making.done() and making.exception() is not None):
            loop = asyncio.get_running_loop()
            making = self._making = loop.run_in_executor(None, self._route_of_client)
        route = await asyncio.shield(making)
        if not self._prepared:
            self._route, self._prepared = route, True

    def _route_of_client(self) -> Route | None:
        """The botocore lock client's route, or None (and why) when botocore must send."""
        try:
            return Route.of_client(self.boto.client)
        except Unsupported as why:
            self.fallback_reason = str(why)
            log.debug("dynalease: lock requests go through botocore: %s", why)
        except BotocoreChanged as changed:  # loud: lock requests are slower than they should be
            self.fallback_reason = str(changed)
            log.warning("dynalease: lock requests go through botocore: %s", changed)
        except (AttributeError, TypeError) as error:  # a botocore we do not know
            self.fallback_reason = f"unrecognised botocore client ({error})"
            log.debug("dynalease: lock requests go through botocore: %s", error)
        return None

    def direct_route(self) -> Route | None:
        """The route read from the settings alone (built once, from any thread), else None.

        The caller's own requests (:mod:`.items`) share it, and so its connections.
        """
        if self._direct is None:
            return None
        with self._building:
            if self._route is None and self._direct is not None:
                try:
                    self._route = Route.direct(self._direct)
                except Unsupported as why:
                    self._direct = None
                    log.debug("dynalease: the environment's endpoint needs botocore: %s", why)
                    return None
                self._prepared = True
        return self._route

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

        The request runs on the runtime's bounded thread pool. One not answered
        in time (or whose wait was cancelled) is not abandoned: ``on_late`` gets
        an awaitable of its answer and :class:`TimedOut` (or the cancellation)
        is raised. Without a timeout, as :meth:`send`.
        """
        import asyncio

        if not self._prepared:
            try:
                await self._prepare()
            except transport_failures() as error:
                raise map_transport_error(error, operation) from error
        route = self._route
        if route is None:
            return await bounded(self.boto.send(operation, params), timeout, on_late)
        loop = asyncio.get_running_loop()
        read_timeout = route.connections.read_timeout
        send = _tracing.carried(_exchange)  # its span is a child of the acquisition's
        exchange = loop.run_in_executor(None, send, route, operation, params, read_timeout)
        return await bounded(exchange, timeout, on_late)

    def blocking_ready(self) -> bool:
        """True when :meth:`send_blocking` can send: the lean path was chosen, or the
        settings alone give its route (then the first request needs no event loop)."""
        if not self._prepared:
            self.direct_route()
        return self._prepared and self._route is not None

    def send_blocking(
        self,
        operation: str,
        params: dict[str, Any],
        timeout: float,
        on_late: Callable[[Any], object],
    ) -> dict[str, Any]:
        """Send one request from the calling thread, waiting at most ``timeout`` seconds.

        Only after :meth:`blocking_ready`. One not answered in time is raised as a
        failure that may have been applied. A request that could leave a row behind
        if it landed after its wait (a create) is not given up then: the rest of its
        answer is read on the runtime's thread pool and handed to ``on_late`` (a
        future of the answer), and the lease deletes the row if the answer says it
        landed. An interrupted wait (Ctrl-C) hands it over the same way.
        """
        route = self._route
        assert route is not None, "send_blocking before the lean path was chosen"
        if operation not in _MAY_LEAVE_A_ROW:
            return _exchange(route, operation, params, timeout)

        def read_late(rest: Callable[[], Answer]) -> None:
            pool = get_runtime().executor  # made now if this is its first use
            on_late(pool.submit(_late_answer, route, operation, rest))

        return _exchange(route, operation, params, timeout, read_late)

    def drop_connections(self) -> None:
        """Close the route's idle connections (the item helpers share them)."""
        if self._route is not None:
            self._route.connections.drop()

    async def finish_late(self, operation: str, late: Any) -> dict[str, Any]:
        """The answer to a request handed to ``on_late``: a future of the pool's, or
        the task :meth:`send_within` handed over (which ``wrap_future`` leaves as it is)."""
        import asyncio

        answer: dict[str, Any] = await asyncio.wrap_future(late)
        return answer


def _exchange(
    route: Route, operation: str, params: dict[str, Any], timeout: float, late: Late = None
) -> dict[str, Any]:
    """Encode, sign and send one request, and read its answer (in a blocking thread).

    A due refresh of the credentials runs here too, as botocore's would. When
    someone traces, the request is a CLIENT span (:mod:`dynalease._tracing`).
    ``late``: see :meth:`.Connections.post`.
    """
    span = _tracing.request_span(operation, params, route.region)
    if span is None:
        return _answer_of(route, operation, params, timeout, None, late)
    return _tracing.traced(span, _answer_of, route, operation, params, timeout, span, late)


def _answer_of(
    route: Route,
    operation: str,
    params: dict[str, Any],
    timeout: float,
    span: Any,
    late: Late,
) -> dict[str, Any]:
    """The answer, with a write that lost to another Region's retried within ``timeout``.

    On a multi-Region strongly consistent global table a write conflicting with a
    concurrent write from another Region fails with ``ReplicatedWriteConflictException``;
    it was not applied and is safe to resend: neither contention nor an outage.
    """
    end = time.monotonic() + timeout
    body = ENCODER.encode(params).encode()
    attempt = 1
    while True:
        frozen = _frozen_now(route.credentials, operation)
        try:
            answer = route.post(
                operation, body, frozen, timeout=timeout, retry_stale=operation in _READS, late=late
            )
        except (NotSent, Unanswered) as failure:
            raise map_lean_failure(failure, route.url, operation) from failure.cause
        if span is not None:
            _tracing.answered(span, answer.status, answer.request_id)
        try:
            return read_answer(operation, answer, route.url)
        except RequestFailedError as error:
            pause = random.uniform(0.5, 1.0) * CONFLICT_PAUSE_S * attempt
            left = end - time.monotonic()
            if error.code != REPLICATED_WRITE_CONFLICT or left <= pause + CONFLICT_PAUSE_S:
                raise
            log.debug("dynalease: %s conflicted with another Region's write; resent", operation)
        time.sleep(pause)
        timeout = end - time.monotonic()
        attempt += 1


def _late_answer(route: Route, operation: str, rest: Callable[[], Answer]) -> dict[str, Any]:
    """The answer that ``rest`` reads after its caller stopped waiting, decoded (on the pool)."""
    try:
        answer = rest()
    except Unanswered as failure:
        raise map_lean_failure(failure, route.url, operation) from failure.cause
    return read_answer(operation, answer, route.url)


def _frozen_now(credentials: Any, operation: str) -> Any:
    """The current key, secret and token, refreshed in this thread if due."""
    try:
        frozen = credentials.get_frozen_credentials()
        if frozen.access_key is None or frozen.secret_key is None:
            raise _no_credentials()
    except transport_failures() as error:
        raise map_transport_error(error, operation) from error
    return frozen


def _no_credentials() -> Exception:
    """botocore's error for credentials without a key (botocore made them, so it is loaded)."""
    from botocore.exceptions import NoCredentialsError

    return NoCredentialsError()
