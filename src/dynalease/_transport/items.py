"""The caller's own requests (item and table helpers, transactions) on the lean path, when the
lock route needs no botocore (:mod:`.config`): from the calling thread over the lock route's
connections, with botocore's standard retry rule. A request that may have been applied is
resent only when that is safe; a transaction without a ``ClientRequestToken`` gets one.
Other operations (a ``Scan``) go through botocore.
"""

from __future__ import annotations

import math
import os
import random
from typing import Any

from .. import _tracing
from .._engine.protocol import new_token
from .._engine.store import LoopTransport, Request
from ..exceptions import RequestFailedError, ThrottledError
from .boto import BotoTransport
from .codec import ENCODER, read_answer
from .connections import NoAnswer
from .errors import map_no_answer
from .lean import LeanTransport
from .resend import resend
from .route import Route

__all__ = ["LEAN_OPERATIONS", "ItemTransport", "backoff_s", "lean_items_allowed"]

#: Those whose answers :func:`.codec.read_answer` reads exactly as botocore would.
LEAN_OPERATIONS = frozenset(
    {
        "DescribeTable",
        "CreateTable",
        "DescribeTimeToLive",
        "GetItem",
        "PutItem",
        "DeleteItem",
        "UpdateItem",
        "TransactWriteItems",
    }
)
#: Safe to send twice (transactions carry a token).
_RESENDABLE = frozenset({"DescribeTable", "DescribeTimeToLive", "GetItem", "TransactWriteItems"})
_RESENDABLE_UNCONDITIONAL = frozenset({"PutItem", "DeleteItem"})
#: botocore's standard retry mode and default timeouts.
DEFAULT_ATTEMPTS = 3
MAX_BACKOFF_S = 20.0
DEFAULT_TIMEOUT_S = 60.0
#: Retry settings only botocore reads.
_RETRY_SETTINGS = ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE")


def lean_items_allowed() -> bool:
    return not any(os.environ.get(name) for name in _RETRY_SETTINGS)


class ItemTransport(LoopTransport):
    """Lean from the calling thread when the route is known, else botocore."""

    def __init__(
        self,
        boto: BotoTransport,
        locks: LeanTransport,
        *,
        max_retries: int | None,
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> None:
        self.boto = boto
        self._locks = locks
        self._attempts = DEFAULT_ATTEMPTS if max_retries is None else max_retries + 1
        # One bound for the whole exchange; the shared pool caps connecting at the lock's.
        self._timeout = (connect_timeout or DEFAULT_TIMEOUT_S) + (read_timeout or DEFAULT_TIMEOUT_S)

    @property
    def client(self) -> Any:
        return self.boto.client

    def handle(self, request: Request) -> dict[str, Any]:
        operation, params = request.operation, request.params
        route = self._locks.direct_route() if operation in LEAN_OPERATIONS else None
        if route is None:
            return self.boto.handle(request)
        if operation == "TransactWriteItems" and "ClientRequestToken" not in params:
            params = {**params, "ClientRequestToken": new_token()}
        span = _tracing.request_span(operation, params, route.region)
        if span is None:
            return self._call_lean(route, operation, params)
        return _tracing.traced(span, self._call_lean, route, operation, params)

    def _call_lean(self, route: Route, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        body = ENCODER.encode(params).encode()
        resendable = operation in _RESENDABLE or (
            operation in _RESENDABLE_UNCONDITIONAL and "ConditionExpression" not in params
        )

        def attempt(_: float) -> dict[str, Any]:
            try:
                answer = route.post(
                    operation,
                    body,
                    route.credentials.get_frozen_credentials(),
                    timeout=self._timeout,
                    retry_stale=resendable,
                )
            except NoAnswer as failure:
                raise map_no_answer(failure, route.url, operation) from failure.cause
            return read_answer(operation, answer, route.url)

        def retry_pause(failure: Exception, attempt: int, _: float) -> float | None:
            if attempt >= self._attempts or not _retryable(failure, resendable):
                return None
            return backoff_s(attempt)

        return resend(attempt, retry_pause, math.inf)


def backoff_s(attempt: int) -> float:
    """After failed attempt ``attempt`` (1-based): botocore's standard full jitter."""
    return min(random.random() * 2.0 ** (attempt - 1), MAX_BACKOFF_S)


def _retryable(error: Exception, resendable: bool) -> bool:
    """Throttled or never sent: always; an outcome unknown: only when safe to resend."""
    if isinstance(error, ThrottledError):
        return True
    if not isinstance(error, RequestFailedError):
        return False
    return not error.may_have_committed or resendable
