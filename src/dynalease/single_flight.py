"""Single flight: concurrent calls for a key run the function once and share its result.

The first caller for a key runs the function under the key's lock and stores what it
returned (or raised) in an item of its own beside the lock row
(``dynalease-result:<key>``, with a DynamoDB TTL attribute; `_results`), then
releases. Callers that arrive meanwhile wait for the lock as any waiter does (the
engine's wake in this process, its polls across processes; in Lambda a wait sized from
the invocation's remaining time), read the item once they hold the lock, and return
the same result without running the function. Callers that come later get the stored
result while it is fresh (``result_ttl``), with one read and no lock; after that, the
next caller runs the function again.

A result stored after a caller began is the one it waited for: that caller shares it
even with ``result_ttl=0``. A holder that raised leaves its error's type and message,
and its waiters raise `SharedCallFailed` (or, with
``on_failure="run"``, each runs the function in turn). A holder lost without storing
anything (a timeout, a crash) leaves nothing: the waiter that takes its lock over runs
the function.

For example:

    from dynalease.single_flight import SingleFlight, single_flight

    flight = SingleFlight(result_ttl=300)

    @single_flight(client, table="locks", key="token:{tenant}", flight=flight)
    def refresh_token(tenant: str) -> dict:
        return call_the_identity_provider(tenant)
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from ._calls import check_options
from ._lambda.holding import shared_client
from ._lambda.invocation import lambda_context_of
from ._redact import logged_key
from ._results import ITEM_LIMIT, JSONSerializer, Outcome, Serializer, item_size, result_key
from .exceptions import SharedCallFailed, SharedResultTooLarge
from .keys import KeyTemplate
from .lock import DistributedLock, SyncDistributedLock

if TYPE_CHECKING:
    from ._lambda.plan import LockPlan
    from .client import DynamoDBClient

__all__ = [
    "JSONSerializer",
    "Serializer",
    "SingleFlight",
    "SingleFlightMetrics",
    "single_flight",
]

P = ParamSpec("P")
R = TypeVar("R")

#: What waiters do when the holder raised: raise its error (``SharedCallFailed``), or run.
ON_FAILURE = ("raise", "run")

#: Wall-clock skew allowed between the holder that stored and a caller that waited for it:
#: a result stored up to this long before such a caller began still counts as the one it
#: waited for (a caller that found the lock free allows none).
CLOCK_SLACK_S = 0.1


@dataclass(frozen=True, slots=True)
class SingleFlightMetrics:
    """What a `SingleFlight`'s calls did in this process, so far.

    ``calls`` counts every call; ``runs`` the calls that ran the function;
    ``shared`` those that returned another call's stored result (fresh, or the one
    they waited for); ``waits`` those whose lock was held by another caller when
    they tried it; ``failures_shared`` those that raised a holder's error as
    `SharedCallFailed`.
    """

    calls: int = 0
    runs: int = 0
    shared: int = 0
    waits: int = 0
    failures_shared: int = 0


class SingleFlight:
    """How single-flight calls share results, and what they did (`metrics`).

    - ``result_ttl``: seconds a stored result is returned to callers that come after
      it was stored (``0``: only to the callers that were waiting for it).
    - ``serializer``: an object with ``dumps(value) -> str | bytes`` and
      ``loads(data)``; JSON by default. Items are limited to 400 KB.
    - ``on_failure``: ``"raise"`` (waiters raise ``SharedCallFailed`` with the holder's
      exception type and message) or ``"run"`` (the next waiter runs the function).
    - ``metrics``: a Powertools ``Metrics``; each count is also added to it as a Count
      metric (``SingleFlightCalls``, ``SingleFlightRuns``, ``SingleFlightShared``,
      ``SingleFlightWaits``, ``SingleFlightFailuresShared``).

    Pass one to `single_flight` or to ``lock_handler(single_flight=...)``;
    one instance may serve several functions, its metrics then summing theirs.
    """

    def __init__(
        self,
        *,
        result_ttl: float = 0.0,
        serializer: Serializer | None = None,
        on_failure: str = "raise",
        metrics: Any = None,
    ) -> None:
        if isinstance(result_ttl, bool) or not isinstance(result_ttl, int | float):
            raise TypeError(f"result_ttl must be seconds (a number), got {result_ttl!r}")
        if not 0 <= result_ttl < float("inf"):
            raise ValueError(f"result_ttl must be 0 or more finite seconds, got {result_ttl!r}")
        if serializer is not None and not isinstance(serializer, Serializer):
            raise TypeError(
                "serializer must have dumps(value) -> str | bytes and loads(data) methods "
                f"(as json and pickle have), got {type(serializer).__name__}"
            )
        if on_failure not in ON_FAILURE:
            raise ValueError(
                f"on_failure must be 'raise' (waiters get SharedCallFailed) or 'run' (the "
                f"next waiter runs the function), got {on_failure!r}"
            )
        if metrics is not None and not callable(getattr(metrics, "add_metric", None)):
            raise TypeError(f"metrics must be a Powertools Metrics, got {type(metrics).__name__}")
        self.result_ttl = float(result_ttl)
        self._metrics = metrics
        self.serializer: Serializer = serializer if serializer is not None else JSONSerializer()
        self.on_failure = on_failure
        self._counts_lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(SingleFlightMetrics.__slots__, 0)

    @property
    def metrics(self) -> SingleFlightMetrics:
        """A snapshot of the counts of this instance's calls."""
        with self._counts_lock:
            return SingleFlightMetrics(**self._counts)

    def _count(self, name: str) -> None:
        with self._counts_lock:
            self._counts[name] += 1
        if self._metrics is not None:
            metric = "SingleFlight" + name.title().replace("_", "")
            self._metrics.add_metric(name=metric, unit="Count", value=1)

    def _check_handler(self, *, permits: int, keys: object, mode: object = None) -> None:
        """For ``lock_handler``: single flight shares the result of one lock's key."""
        if permits != 1 or keys is not None:
            raise ValueError(
                "single_flight works with one key: remove permits= and keys= from "
                "lock_handler, or share results of one key per handler"
            )
        if mode is not None:
            raise ValueError(
                "single_flight runs the handler under the key's exclusive lock: remove "
                "mode= from lock_handler (a read/write lock's readers would all run it)"
            )

    def _begin(self, plan: LockPlan, event: Any, context: Any) -> _Call:
        """The middleware's call for an invocation, made before its lock.

        The key is resolved as its hold resolves it; the client is built now only to read
        a fresh result.
        """
        key = plan.event_key.resolve(event, lambda_context_of(context))[0]
        client = plan._client
        if client is None and self.result_ttl > 0:
            client = shared_client()
        return _Call(self, client, plan.table(), key)

    def __repr__(self) -> str:
        return f"SingleFlight(result_ttl={self.result_ttl}, on_failure={self.on_failure!r})"


class _Call:
    """One call's reads and writes of the result item, and what they mean for it."""

    __slots__ = ("_client", "flight", "key", "started", "table")

    def __init__(
        self, flight: SingleFlight, client: DynamoDBClient | None, table: str, key: str
    ) -> None:
        self.flight = flight
        self._client = client  # None until the lock's guard brings it (the middleware's)
        self.table = table
        self.key = key
        self.started = time.time()
        flight._count("calls")

    @property
    def client(self) -> DynamoDBClient:
        if self._client is None:
            raise RuntimeError("single flight: no client before the lock is held")
        return self._client

    def _read(self) -> Outcome | None:
        item = self.client.sync_get_item(
            self.table, {"key": result_key(self.key)}, consistent_read=True
        )
        return None if item is None else Outcome.of_item(item)

    def _met(self, outcome: Outcome, waited: bool) -> bool:
        """Stored after this call began: the flight it waited for.

        Another host's clock may be a little behind ours, so a caller that waited allows
        it ``CLOCK_SLACK_S``.
        """
        return outcome.stored_at >= self.started - (CLOCK_SLACK_S if waited else 0.0)

    def _shared(self, outcome: Outcome) -> tuple[Any]:
        self.flight._count("shared")
        return (self.flight.serializer.loads(outcome.data),)

    def peek(self) -> tuple[Any] | None:
        """Before the lock: a fresh result, in a 1-tuple (no read unless ``result_ttl``)."""
        if self.flight.result_ttl <= 0:
            return None
        outcome = self._read()
        if outcome is None or outcome.failed:
            return None
        if time.time() - outcome.stored_at < self.flight.result_ttl:
            return self._shared(outcome)
        return None

    def settle(self, guard: SyncDistributedLock | DistributedLock) -> tuple[Any] | None:
        """With the lock held: the result to share (a 1-tuple), None to run, or raise."""
        metrics = guard.metrics
        waited = bool(metrics.conditional_failures or metrics.read_requests)
        if waited:
            self.flight._count("waits")
        outcome = self._read()
        if outcome is None:
            return None
        if outcome.failed:
            if self._met(outcome, waited) and self.flight.on_failure == "raise":
                self.flight._count("failures_shared")
                raise SharedCallFailed(
                    f"single-flight call for {logged_key(self.key)} in table {self.table!r} "
                    f"failed in the caller that ran it: {outcome.error_type}: "
                    f"{outcome.error_message}; retry, or use on_failure='run' to run it here",
                    error_type=outcome.error_type or "",
                    error_message=outcome.error_message or "",
                    table=self.table,
                    key=self.key,
                )
            return None
        if self._met(outcome, waited) or time.time() - outcome.stored_at < self.flight.result_ttl:
            return self._shared(outcome)
        return None

    def settle_or_run(self, guard: SyncDistributedLock, function: Callable[[], R]) -> R:
        """With the lock held: the result to share, or the function's, stored."""
        self._client = guard._client
        shared = self.settle(guard)
        if shared is not None:
            return cast(R, shared[0])
        return self.run(function)

    def run(self, function: Callable[[], R]) -> R:
        """Run the function with the lock held and store what it returned or raised."""
        self.flight._count("runs")
        try:
            value = function()
        except Exception as error:
            self.leave_failure(error)
            raise
        self.store(value)
        return value

    def store(self, value: object) -> None:
        """Store a returned value; ``SharedResultTooLarge`` (keeping it) over the item limit."""
        try:
            data = self.flight.serializer.dumps(value)
            if not isinstance(data, str | bytes):
                raise TypeError(f"the serializer's dumps() returned {type(data).__name__}")
        except Exception as error:
            self.leave_failure(error)
            error.add_note(
                "dynalease: single_flight could not serialize the result to share it; return "
                "JSON-friendly values or pass serializer= (docs/single-flight.md)"
            )
            raise
        item = Outcome(time.time(), data=data).item(self.key, self.flight.result_ttl)
        size = item_size(item)
        if size > ITEM_LIMIT:
            message = (
                f"the result of the single-flight call for {logged_key(self.key)} is {size} "
                f"bytes stored, over DynamoDB's {ITEM_LIMIT}-byte item limit; store large "
                "results elsewhere (S3) and return their location, or pass a compressing "
                "serializer; the value is on this error's .result"
            )
            self._store_error("SharedResultTooLarge", message)
            raise SharedResultTooLarge(
                message, result=value, size=size, table=self.table, key=self.key
            )
        self.client.sync_put_item(self.table, item)

    def leave_failure(self, error: Exception) -> None:
        """Store the holder's error (type and message) for the callers waiting.

        A failure to store it is noted on ``error``, which the caller raises either way.
        """
        try:
            self._store_error(type(error).__name__, str(error))
        except Exception as store_error:
            error.add_note(
                f"dynalease: single_flight could not store this error for the callers "
                f"waiting ({store_error}); the next of them runs the function"
            )

    def _store_error(self, error_type: str, message: str) -> None:
        outcome = Outcome(time.time(), error_type=error_type, error_message=message)
        self.client.sync_put_item(self.table, outcome.item(self.key, self.flight.result_ttl))


def single_flight(
    client: DynamoDBClient,
    *,
    table: str,
    key: str,
    lease_duration: float = 30.0,
    wait_timeout: float = 35.0,
    flight: SingleFlight | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Collapse concurrent calls of a ``def`` or ``async def`` function for a key into one run.

    ``key`` is a template over the function's arguments, as in ``distributed_lock``.
    The first caller runs the function under the key's lock; callers arriving meanwhile
    wait (at most ``wait_timeout``, and never past a Lambda invocation's deadline under
    ``bound_locks`` or ``lock_handler``) and return the same result; a waiter that runs
    out of time raises `LockNotAcquired`, as any lock waiter.
    ``flight`` sets the sharing (``result_ttl``, ``serializer``, ``on_failure``) and
    counts the calls; by default results go only to the callers that waited.

    For example:

        @single_flight(client, table="locks", key="report:{day}",
                       flight=SingleFlight(result_ttl=60))
        def build_report(day: str) -> dict:
            ...
    """
    options = check_options(client, table, lease_duration, wait_timeout, None)._asdict()
    policy = flight if flight is not None else SingleFlight()
    if not isinstance(policy, SingleFlight):
        raise TypeError(f"flight must be a SingleFlight, got {type(policy).__name__}")
    template = KeyTemplate(key)

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError(f"single_flight cannot share the steps of generator {function!r}")
        bound = template.bind(function)

        if inspect.iscoroutinefunction(function):
            coroutine_function = cast(Callable[P, Awaitable[Any]], function)

            @functools.wraps(function)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                import asyncio

                resolved = bound.resolve(args, kwargs)
                call = _Call(policy, client, table, resolved)
                shared = await asyncio.to_thread(call.peek)
                if shared is not None:
                    return shared[0]
                guard = DistributedLock(client, key=resolved, **options)
                async with guard:
                    shared = await asyncio.to_thread(call.settle, guard)
                    if shared is not None:
                        return shared[0]
                    policy._count("runs")
                    try:
                        value = await coroutine_function(*args, **kwargs)
                    except Exception as error:
                        await asyncio.to_thread(call.leave_failure, error)
                        raise
                    await asyncio.to_thread(call.store, value)
                    return value

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(function)
        def sync_wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            resolved = bound.resolve(args, kwargs)
            call = _Call(policy, client, table, resolved)
            shared = call.peek()
            if shared is not None:
                return cast(R, shared[0])
            with SyncDistributedLock(client, key=resolved, **options) as guard:
                return call.settle_or_run(guard, lambda: function(*args, **kwargs))

        return sync_wrapper

    return decorate
