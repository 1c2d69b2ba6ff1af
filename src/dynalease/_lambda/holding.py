"""The hold's part of the Lambda middleware: one :class:`Holding` per invocation or batch
record, and the module-level client. The middleware imports it with the first hold (at init
where init runs ahead of requests), so a decorated module loads without the client, the
lock and the engine (:mod:`.plan` is the decoration's part).
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from typing import Any, cast

from .. import _tracing
from ..client import DynamoDBClient
from ..exceptions import LockNotAcquired
from ..lock import SyncDistributedLock
from ..semaphore import SyncDistributedSemaphore
from .budget import NoTimeLeft, acquisition_wait, remaining_seconds, usable_time
from .invocation import lambda_context_of
from .plan import CURRENT_LOCK, LockPlan

__all__ = ["Holding", "shared_client"]

# The settings a client is built from: fixed in Lambda, but a local run that changes them
# gets a new client.
_CLIENT_ENV = (
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_PROFILE",
)
_shared_lock = threading.Lock()
_shared: tuple[tuple[Any, ...], DynamoDBClient] | None = None


def shared_client() -> DynamoDBClient:
    """The module-level client: warm invocations keep its observation cache, which lets their
    short waits recover a lock a timed-out invocation abandoned.
    """
    global _shared
    identity = (os.getpid(), *(os.environ.get(name) for name in _CLIENT_ENV))
    with _shared_lock:
        if _shared is None or _shared[0] != identity:
            _shared = (identity, DynamoDBClient())
        return _shared[1]


class Holding:
    """One acquisition: resolve the key, size the wait, acquire, report, release."""

    __slots__ = ("_context", "_data", "_guard", "_plan", "_start", "_table", "_token")

    def __init__(self, plan: LockPlan, data: Any, context: Any) -> None:
        self._plan = plan
        self._data = data
        self._context = lambda_context_of(context)
        self._guard: SyncDistributedLock | None = None
        self._token: contextvars.Token[SyncDistributedLock] | None = None
        self._start = 0.0
        self._table = ""

    def __enter__(self) -> SyncDistributedLock:
        plan = self._plan
        # Everything that can be wrong with the input fails here, before a request.
        keys = plan.event_key.resolve(self._data, self._context)
        key = keys[0]
        table = self._table = plan.table()
        self._wait(table, key)  # no time at all: not even the client is built
        client = plan._client if plan._client is not None else shared_client()
        # Built before the wait is measured: inside the first request, a cold client's build
        # would come out of a short budget and fail every cold start.
        client._prepare_locks()
        lease, wait, remaining = self._wait(table, key)  # measured after the build
        guard: SyncDistributedLock
        if plan._mode is not None:
            guard = _rw_guard(plan._mode, client, table, key, lease, wait)
        elif plan._permits == 1:
            guard = SyncDistributedLock(
                client,
                table=table,
                keys=keys,
                lease_duration=lease,
                wait_timeout=wait,
                fencing=plan._fencing,
            )
        else:
            guard = SyncDistributedSemaphore(
                client,
                table=table,
                key=key,
                permits=plan._permits,
                lease_duration=lease,
                wait_timeout=wait,
            )
        # One immediate attempt still has a network budget: keep it within the usable time.
        cap = None
        if wait == 0 and remaining is not None:
            cap = usable_time(remaining, reserve_s=plan._reserve_s, lease_s=lease)
        try:
            guard._enter(attempt_cap=cap)
        except LockNotAcquired as error:
            plan._reporter.not_acquired(table, key, guard.metrics, remaining, error)
            raise
        self._start = time.monotonic()
        held = getattr(guard, "_lease", None)  # a reader's or writer's guard has none
        plan._reporter.acquired(guard.metrics, took_over=held is not None and held.took_over)
        self._guard = guard
        self._token = CURRENT_LOCK.set(guard)
        return guard

    def _wait(self, table: str, key: str) -> tuple[float, float, float | None]:
        """The lease and the wait this acquisition can afford now, and the remaining time
        they came from."""
        plan = self._plan
        remaining = remaining_seconds(self._context)
        lease = plan.lease(remaining)
        try:
            wait = acquisition_wait(
                remaining,
                reserve_s=plan._reserve_s,
                lease_s=lease,
                wait_timeout=plan._wait_s,
            )
        except NoTimeLeft as no_time:
            plan._reporter.no_time(table, key, remaining)
            _tracing.no_time(table, key, remaining)
            raise no_time.to_lock_error(table, key) from None
        return lease, wait, remaining

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        guard = self._guard
        assert guard is not None and self._token is not None
        CURRENT_LOCK.reset(self._token)
        try:
            guard.__exit__(exc_type, exc, traceback)
        finally:
            held_ms = (time.monotonic() - self._start) * 1000
            self._plan._reporter.finished(self._table, guard.key, guard.metrics, held_ms)


def _rw_guard(
    mode: str, client: DynamoDBClient, table: str, key: str, lease: float, wait: float
) -> SyncDistributedLock:
    """A reader's or writer's guard (``lock_handler(mode=...)``), loaded for such a handler.

    Typed as the lock guard ``current_lock()`` returns: it has the parts the hold uses
    (``metrics``, ``key``, ``_enter``, the context manager); its own type
    is :class:`~dynalease.rwlock.SyncReadLock` or :class:`~dynalease.rwlock.SyncWriteLock`.
    """
    from ..rwlock import SyncReadLock, SyncWriteLock

    kind = SyncReadLock if mode == "read" else SyncWriteLock
    guard = kind(client, table=table, key=key, lease_duration=lease, wait_timeout=wait)
    return cast("SyncDistributedLock", guard)
