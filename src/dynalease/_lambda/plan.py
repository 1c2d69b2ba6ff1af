"""One lock per invocation or batch record: a :class:`LockPlan` built (and so checked) when
``lock_handler`` or ``lock_record`` decorates, a :class:`Holding` per invocation or record.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from .. import _tracing
from .._compute_modes import init_runs_ahead
from .._engine.protocol import check_durations
from .._keyset import KeysTemplate
from ..client import DynamoDBClient, check_table_name, load_request_path
from ..constants import ENV_TABLE
from ..exceptions import LockNotAcquired
from ..keys import KeyTemplate, permit_keys
from ..lock import SyncDistributedLock
from .budget import (
    NoTimeLeft,
    acquisition_wait,
    invocation_lease,
    remaining_seconds,
    usable_time,
)
from .fields import EventKeys
from .invocation import lambda_context_of
from .report import Reporter

__all__ = ["CURRENT_LOCK", "Holding", "LockPlan", "import_ahead", "shared_client"]

CURRENT_LOCK: contextvars.ContextVar[SyncDistributedLock] = contextvars.ContextVar(
    "dynalease_current_lock"
)

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


def import_ahead() -> None:
    """Import the lock request path during init where init runs ahead of requests.

    Only imports: nothing made here can be copied into a SnapStart snapshot.
    """
    if init_runs_ahead():
        load_request_path()


def _check_reserve(reserve_time: object) -> float:
    if isinstance(reserve_time, bool) or not isinstance(reserve_time, int | float):
        raise TypeError(
            f"reserve_time must be a number of seconds, got {type(reserve_time).__name__}"
        )
    if not 0 <= reserve_time < float("inf"):
        raise ValueError(
            f"reserve_time must be 0 or more finite seconds (the time the work needs after "
            f"acquiring), got {reserve_time!r}"
        )
    return float(reserve_time)


class LockPlan:
    """Validated options of one decorated handler; builds a :class:`Holding` per call."""

    __slots__ = (
        "_client",
        "_fencing",
        "_lease_s",
        "_permits",
        "_reporter",
        "_reserve_s",
        "_table",
        "_wait_s",
        "event_key",
    )

    def __init__(
        self,
        what: str,
        client: DynamoDBClient | None,
        /,
        *,
        table: str | None,
        key: str | None,
        keys: Sequence[str] | None,
        fields: Mapping[str, str] | None,
        lease_duration: float | None,
        wait_timeout: float | None,
        reserve_time: float,
        logger: Any,
        metrics: Any,
        log_key: str | None,
        permits: int,
        fencing: bool,
    ) -> None:
        """Check every option of ``lock_handler`` (``what="event"``) or ``lock_record``
        (``"record"``), whose signatures hold the defaults."""
        if key is None and keys is None:
            # Python's own words, as for any missing keyword (keys=[...] is the other way).
            function = "lock_handler" if what == "event" else "lock_record"
            raise TypeError(f"{function}() missing required keyword argument: 'key'")
        if client is not None and not isinstance(client, DynamoDBClient):
            raise TypeError(
                f"client must be a dynalease.DynamoDBClient or None (one shared client "
                f"created on first use), got {type(client).__name__}"
            )
        if table is not None:
            check_table_name(table)
        lease_s, wait_s = check_durations(
            invocation_lease(None) if lease_duration is None else lease_duration,
            0.0 if wait_timeout is None else wait_timeout,
        )
        if not isinstance(fencing, bool):
            raise TypeError(f"fencing must be True or False, got {type(fencing).__name__}")
        self._fencing = fencing
        templates = _templates(key, keys, permits, fencing)
        permit_keys("k", permits)  # the count's checks; each resolved key at call time
        self._permits = permits
        if fencing and permits != 1:
            raise ValueError(
                "fencing=True is for locks: a semaphore's permits carry no fencing token; "
                "pass permits=1 with fencing=True, or leave fencing off"
            )
        self._client: DynamoDBClient | None = client
        self._table = table
        self._lease_s: float | None = None if lease_duration is None else lease_s
        self._wait_s: float | None = None if wait_timeout is None else wait_s
        self._reserve_s = _check_reserve(reserve_time)
        self.event_key = EventKeys(templates, fields, what=what)
        self._reporter = Reporter(
            template=" + ".join(each.template for each in templates),
            logger=logger,
            metrics=metrics,
            log_key=log_key,
        )

    def table(self) -> str:
        """The explicit table, else ``DYNALEASE_TABLE``, read per call (tests set it late)."""
        if self._table is not None:
            return self._table
        name = os.environ.get(ENV_TABLE)
        if not name:
            raise ValueError(
                f"no lock table: pass table=... to the decorator or set the {ENV_TABLE} "
                "environment variable (the dynalease LockTable CDK construct sets it)"
            )
        return check_table_name(name, parameter=ENV_TABLE)

    def client(self) -> DynamoDBClient:
        return self._client if self._client is not None else shared_client()

    def lease(self, remaining_s: float | None) -> float:
        """``lease_duration``, else sized from the invocation's remaining time."""
        return invocation_lease(remaining_s) if self._lease_s is None else self._lease_s

    def hold(self, data: Any, context: Any) -> Holding:
        """A context manager holding the lock for ``data``'s key within ``context``'s time."""
        return Holding(self, data, context)


def _templates(
    key: str | None, keys: Sequence[str] | None, permits: int, fencing: bool
) -> tuple[KeyTemplate, ...]:
    """The decorator's key template, or its ``keys`` templates (a multi-key lock)."""
    if keys is None:
        return (
            KeyTemplate(cast(str, key)),
        )  # not None: checked first; KeyTemplate checks the type
    if permits != 1 or fencing:
        raise ValueError(
            "keys=[...] takes a multi-key lock: it cannot be a semaphore (permits) or fenced "
            "(fencing=True); pass key=... for those"
        )
    return KeysTemplate(keys, key).templates


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
        client = plan.client()
        # Built before the wait is measured: inside the first request, a cold client's build
        # would come out of a short budget and fail every cold start.
        client._prepare_locks()
        lease, wait, remaining = self._wait(table, key)  # measured after the build
        guard: SyncDistributedLock
        if plan._permits == 1:
            guard = SyncDistributedLock(
                client,
                table=table,
                keys=keys,
                lease_duration=lease,
                wait_timeout=wait,
                fencing=plan._fencing,
            )
        else:
            from ..semaphore import SyncDistributedSemaphore  # loaded for a handler with permits

            guard = SyncDistributedSemaphore(
                client,
                table=table,
                key=key,
                permits=plan._permits,
                lease_duration=lease,
                wait_timeout=wait,
            )
        if wait == 0 and remaining is not None:
            # One immediate attempt still has a network budget: keep it within the usable time.
            guard._limit_single_attempt(
                usable_time(remaining, reserve_s=plan._reserve_s, lease_s=lease)
            )
        try:
            guard.__enter__()
        except LockNotAcquired as error:
            plan._reporter.not_acquired(table, key, guard.metrics, remaining, error)
            raise
        self._start = time.monotonic()
        plan._reporter.acquired(guard.metrics)
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
