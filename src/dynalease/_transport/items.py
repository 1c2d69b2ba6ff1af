"""The caller's own requests (item and table helpers, transactions) on the lean path.

When a client's lock requests need no botocore (every setting in arguments and
the environment, :mod:`.config`), its item helpers need none either: a script's
``sync_table_exists`` or ``sync_get_item`` would otherwise import botocore and
build a client (a few hundred milliseconds) for one small request. They are sent
from the calling thread over the lock route's keep-alive connections, signed the
same way, with botocore's standard retry rule (3 attempts unless
``max_retries`` says otherwise; throttling, 5xx and connection failures,
backing off ``random() * 2 ** (attempt - 1)`` seconds up to 20). A failure
that may have been applied is retried only for requests that are safe to send
twice, as botocore's idempotency tokens make them: a transaction without a
``ClientRequestToken`` gets one.

Operations outside :data:`LEAN_OPERATIONS` (a ``Scan``, whose items this path
would not decode), and any client whose settings botocore must read, go through
botocore as before.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from .._engine.store import LoopTransport
from ..exceptions import RequestFailedError, ThrottledError
from .boto import BotoTransport
from .codec import ENCODER, read_answer
from .connections import NotSent, Unanswered
from .errors import map_lean_failure
from .lean import LeanTransport

__all__ = ["LEAN_OPERATIONS", "ItemTransport", "backoff_s", "lean_items_allowed"]

#: Operations whose answers :func:`.codec.read_answer` reads exactly as botocore would.
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
#: Safe to send twice: reads and tokened transactions (and unconditional puts and deletes).
_RESENDABLE = frozenset({"DescribeTable", "DescribeTimeToLive", "GetItem", "TransactWriteItems"})
_RESENDABLE_UNCONDITIONAL = frozenset({"PutItem", "DeleteItem"})
#: botocore's standard retry mode: 3 attempts, full-jitter backoff capped at 20 s.
DEFAULT_ATTEMPTS = 3
MAX_BACKOFF_S = 20.0
#: botocore's default timeouts for the caller's requests.
DEFAULT_TIMEOUT_S = 60.0
#: Retry settings only botocore reads; with one of them set, botocore sends.
_RETRY_SETTINGS = ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE")


def lean_items_allowed() -> bool:
    """False when the environment sets a retry rule this path does not model."""
    return not any(os.environ.get(name) for name in _RETRY_SETTINGS)


class ItemTransport(LoopTransport):
    """The caller's requests: lean from the calling thread when the route is known, else boto."""

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
        # One bound for the whole exchange: connecting (the shared pool caps that at
        # the lock client's connect timeout) and reading the answer.
        self._timeout = (connect_timeout or DEFAULT_TIMEOUT_S) + (read_timeout or DEFAULT_TIMEOUT_S)

    @property
    def client(self) -> Any:
        """The botocore client for what this path leaves to botocore, made on first use."""
        return self.boto.client

    async def prepare(self) -> None:
        """Nothing to build for the lean path; botocore's client is made on first use."""

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send from the runtime loop (on its blocking pool)."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.call, operation, params)

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request from this thread, retrying as botocore's standard mode does."""
        route = self._locks.direct_route() if operation in LEAN_OPERATIONS else None
        if route is None:
            return self.boto.call(operation, params)
        if operation == "TransactWriteItems" and "ClientRequestToken" not in params:
            import uuid  # here: with the platform module it imports, 3 ms of a script's start

            params = {**params, "ClientRequestToken": str(uuid.uuid4())}
        body = ENCODER.encode(params).encode()
        resendable = operation in _RESENDABLE or (
            operation in _RESENDABLE_UNCONDITIONAL and "ConditionExpression" not in params
        )
        attempt = 1
        while True:
            try:
                try:
                    answer = route.post(
                        operation,
                        body,
                        route.credentials.get_frozen_credentials(),
                        timeout=self._timeout,
                        retry_stale=resendable,
                    )
                except (NotSent, Unanswered) as failure:
                    raise map_lean_failure(failure, route.url, operation) from failure.cause
                return read_answer(operation, answer, route.url)
            except (ThrottledError, RequestFailedError) as error:
                if attempt >= self._attempts or not _retryable(error, resendable):
                    raise
            time.sleep(backoff_s(attempt))
            attempt += 1


def backoff_s(attempt: int) -> float:
    """The pause after failed attempt ``attempt`` (1-based): botocore's standard full jitter."""
    return min(random.random() * 2.0 ** (attempt - 1), MAX_BACKOFF_S)


def _retryable(error: Exception, resendable: bool) -> bool:
    """Throttled or never sent: always; an outcome unknown: only when safe to resend."""
    if isinstance(error, ThrottledError):
        return True
    assert isinstance(error, RequestFailedError)
    return not error.may_have_committed or resendable
