"""The lean request path: lock requests encoded, signed (:mod:`.sign`) and sent over
``http.client`` (:mod:`.connections`), from a sync caller's thread or the runtime's bounded
pool, never a thread per lease.

The route is read from the settings when they suffice (:mod:`.config`), else from the
botocore lock client (:mod:`.route`), so both paths agree on where and as whom. What this
path does not implement goes through :class:`BotoTransport`.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from botocore.client import BaseClient

from .. import _tracing
from .._engine.runtime import get_runtime
from .._engine.store import Request, Transport, bounded
from ..constants import ENV_TRANSPORT
from ..exceptions import RequestFailedError
from .boto import BotoTransport
from .botocore_internals import BotocoreChanged
from .codec import ENCODER, read_answer
from .config import DirectConfig
from .connections import Answer, NoAnswer
from .errors import (
    REPLICATED_WRITE_CONFLICT,
    map_no_answer,
    map_transport_error,
    no_credentials,
    transport_failures,
)
from .resend import resend
from .route import Route, Unsupported

__all__ = ["TRANSPORTS", "LeanTransport", "conflict_pause", "lock_transport", "transport_choice"]

log = logging.getLogger("dynalease")

TRANSPORTS = ("lean", "boto")
DEFAULT_TRANSPORT = "lean"
#: Safe to resend when a reused connection was dropped.
_READS = frozenset({"GetItem", "BatchGetItem", "DescribeTable"})
#: Writes that leave a row behind if they land after their wait (a create; a fenced create
#: is an UpdateItem): their answers are kept (``handle``).
_MAY_LEAVE_A_ROW = frozenset({"PutItem", "UpdateItem"})
Late = Callable[[Callable[[], Answer]], object] | None
CONFLICT_PAUSE_S = 0.02


def transport_choice(explicit: str | None) -> str:
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
    if choice == "boto":
        return BotoTransport(factory)
    return LeanTransport(factory)


class LeanTransport:
    """Lock requests on the lean path; ``call`` and what it does not support go to botocore.

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

    @property
    def route(self) -> Route | None:
        return self._route

    async def prepare(self) -> None:
        if not self._prepared:
            try:
                await self._prepare()
            except Exception:  # the first request tries again and reports it
                return

    async def _prepare(self) -> None:
        # Making the client may call the metadata service and reading its route signs a
        # request: off the loop, once for all the requests that arrive before it is made.
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
        """None (with ``fallback_reason``) when botocore must send."""
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
        """The route read from the settings alone, built once; :mod:`.items` shares it."""
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

    async def handle_async(self, request: Request) -> dict[str, Any]:
        """On the runtime's pool; one not answered in time goes to ``on_late``, then raises."""
        import asyncio

        operation, params, timeout, on_late = request
        if not self._prepared:
            try:
                await self._prepare()
            except transport_failures() as error:
                raise map_transport_error(error, operation) from error
        route = self._route
        if route is None:
            return await self.boto.handle_async(request)
        loop = asyncio.get_running_loop()
        read_timeout = route.connections.read_timeout
        send = _tracing.carried(_exchange)  # its span is a child of the acquisition's
        lane = get_runtime().lane(route.url)
        exchange = loop.run_in_executor(lane, send, route, operation, params, read_timeout)
        return await bounded(exchange, timeout, on_late)

    @property
    def blocking(self) -> bool:
        """The lean path was chosen, or the settings alone give its route (no loop needed)."""
        if not self._prepared:
            self.direct_route()
        return self._prepared and self._route is not None

    def handle(self, request: Request) -> dict[str, Any]:
        """From the calling thread: bounded by the request's ``timeout`` only once
        :attr:`blocking` is True; without a timeout, through botocore.

        A create not answered in time (or whose wait was interrupted) is not given up: the
        rest of its answer is read on the pool and handed to ``on_late`` (a
        ``concurrent.futures.Future``), so the lease can delete the row if it landed.
        """
        operation, params, timeout, on_late = request
        if timeout is None:
            return self.boto.handle(request)
        route = self._route
        assert route is not None, "a bounded handle() before the lean path was chosen"
        if on_late is None or operation not in _MAY_LEAVE_A_ROW:
            return _exchange(route, operation, params, timeout)

        def read_late(rest: Callable[[], Answer]) -> None:
            lane = get_runtime().lane(route.url)  # made now if this is its first use
            on_late(lane.submit(_late_answer, route, operation, rest))

        return _exchange(route, operation, params, timeout, read_late)

    def close(self) -> None:
        if self._route is not None:
            self._route.connections.drop()


def _exchange(
    route: Route, operation: str, params: dict[str, Any], timeout: float, late: Late = None
) -> dict[str, Any]:
    """In a blocking thread: a due credential refresh runs here too, as botocore's would."""
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
    body = ENCODER.encode(params).encode()

    def attempt(left: float) -> dict[str, Any]:
        frozen = _frozen_now(route.credentials, operation)
        try:
            answer = route.post(
                operation, body, frozen, timeout=left, retry_stale=operation in _READS, late=late
            )
        except NoAnswer as failure:
            raise map_no_answer(failure, route.url, operation) from failure.cause
        if span is not None:
            _tracing.answered(span, answer.status, answer.request_id)
        try:
            return read_answer(operation, answer, route.url)
        except Exception as error:
            # Its traceback keeps this frame and read_answer's, so the answer (up to MAX_BODY)
            # would live as long as the error: the engine keeps errors, one per request.
            del answer
            error.with_traceback(None)
            raise

    return resend(attempt, conflict_pause, timeout)


def conflict_pause(failure: Exception, attempt: int, left: float) -> float | None:
    """The rule of a lock request's resends: a ``ReplicatedWriteConflictException``
    (multi-Region strong consistency) is resent while time is left, after a growing jittered
    pause: the write was not applied, and it is neither contention nor an outage."""
    if not isinstance(failure, RequestFailedError) or failure.code != REPLICATED_WRITE_CONFLICT:
        return None
    pause = random.uniform(0.5, 1.0) * CONFLICT_PAUSE_S * attempt
    if left <= pause + CONFLICT_PAUSE_S:
        return None
    log.debug("dynalease: %s conflicted with another Region's write; resent", failure.operation)
    return pause


def _late_answer(route: Route, operation: str, rest: Callable[[], Answer]) -> dict[str, Any]:
    try:
        answer = rest()
    except NoAnswer as failure:
        raise map_no_answer(failure, route.url, operation) from failure.cause
    try:
        return read_answer(operation, answer, route.url)
    except Exception as error:
        del answer  # as in _answer_of: the error must not keep the answer alive
        error.with_traceback(None)
        raise


def _frozen_now(credentials: Any, operation: str) -> Any:
    try:
        frozen = credentials.get_frozen_credentials()
    except transport_failures() as error:
        raise map_transport_error(error, operation) from error
    if frozen.access_key is None or frozen.secret_key is None:
        raise no_credentials(operation, "Unable to locate credentials")  # botocore's words
    return frozen
