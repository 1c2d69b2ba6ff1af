"""Lambda middleware: hold a lock for each invocation, or for each batch record.

``lock_handler`` wraps a Lambda handler; ``lock_record`` wraps a Powertools
batch record handler. Both take the same key templates as ``distributed_lock``,
read the placeholders from the event (``fields`` maps them to JMESPath
expressions with Powertools' functions), and size the wait from the
invocation's remaining time:

    lease  = lease_duration, else min(remaining time, 30 s)
    usable = remaining time - reserve_time - cleanup budget of the lease
    wait   = min(wait_timeout, usable)         # usable alone without wait_timeout

When ``usable`` is 0 or less the lock is not tried at all: ``LockNotAcquired``
is raised at once, without a request, so an invocation never starts an
acquisition it cannot finish and release before its timeout. No lock outlives
its invocation: every guard opened while a wrapped handler runs (the
middleware's and any deeper in the code; ``bound_locks`` bounds them without
locking) stops renewing at the deadline, is marked lost and has its row deleted,
even where nothing stops the handler (Lambda Managed Instances).

For example:

    from aws_lambda_powertools import Logger
    from dynalease.middleware import lock_handler

    logger = Logger()

    @logger.inject_lambda_context
    @lock_handler(key="customer:{customer_id}", fields={"customer_id": "detail.customer_id"},
                  reserve_time=5, logger=logger)
    def handler(event, context):
        ...

Needs the ``lambda`` extra: ``pip install 'dynalease[lambda]'``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

try:
    from aws_lambda_powertools.middleware_factory import lambda_handler_decorator
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "dynalease.middleware needs aws-lambda-powertools; install it with "
        "pip install 'dynalease[lambda]' (or add Powertools' layer to the function)"
    ) from error

from ._compute_modes import init_runs_ahead
from ._lambda import snapstart
from ._lambda.invocation import bounded
from ._lambda.plan import CURRENT_LOCK, LockPlan
from ._lambda.report import key_hash
from .exceptions import LockNotAcquired

if TYPE_CHECKING:
    from ._lambda.holding import Holding
    from .client import DynamoDBClient
    from .lock import SyncDistributedLock
    from .single_flight import SingleFlight

__all__ = ["bound_locks", "current_lock", "key_hash", "lock_handler", "lock_record"]

H = TypeVar("H", bound=Callable[..., Any])
OnContention = Callable[[Any, Any, LockNotAcquired], Any]

_log = logging.getLogger(__name__)


def _hold(plan: LockPlan, data: Any, context: Any) -> Holding:
    """A context manager holding ``plan``'s lock for ``data`` within ``context``'s time."""
    # The hold's part (the client, the lock, the engine) is imported by the first hold: on
    # demand init and the first invoke are one wait, and init without it is a third as long.
    from ._lambda.holding import Holding

    return Holding(plan, data, context)


def _import_ahead() -> None:
    """Import the hold's part and the lock request path where init runs before any request.

    The lock request path is ``http.client`` and the lean transport. Only imports: nothing
    made here can be copied into a SnapStart snapshot.
    """
    if init_runs_ahead():
        # The hold's part imports the client module, which imports the lock request path.
        from ._lambda import holding  # noqa: F401


# SnapStart's runtime hooks, where the runtime ships snapshot_restore_py (a no-op elsewhere).
snapstart.register()
_import_ahead()


@lambda_handler_decorator
def dynalease_lock_handler(
    handler: Callable[..., Any],
    event: Any,
    context: Any,
    *,
    dynalease_plan: LockPlan,
    dynalease_on_contention: OnContention | None,
    dynalease_single_flight: SingleFlight | None = None,
    **handler_kwargs: Any,
) -> Any:
    """The middleware behind `lock_handler` (its name shows in Powertools' logs)."""
    flight = None
    if dynalease_single_flight is not None:
        flight = dynalease_single_flight._begin(dynalease_plan, event, context)
        if (fresh := flight.peek()) is not None:
            return fresh[0]  # a fresh stored response, without the lock
    with bounded(context), contextlib.ExitStack() as stack:
        try:
            guard = stack.enter_context(_hold(dynalease_plan, event, context))
        except LockNotAcquired as error:
            if dynalease_on_contention is None:
                raise
            return dynalease_on_contention(event, context, error)
        if flight is not None:
            run = functools.partial(handler, event, context, **handler_kwargs)
            return flight.settle_or_run(guard, run)
        return handler(event, context, **handler_kwargs)


@lambda_handler_decorator
def bound_locks(handler: Callable[..., Any], event: Any, context: Any, **kwargs: Any) -> Any:
    """Bound every lock the handler takes by its invocation's deadline; take none itself.

    For handlers that lock deeper in their code (``distributed_lock``,
    ``SyncDistributedLock``...) rather than with `lock_handler`, which
    bounds its guards the same way. A guard acquired while the handler runs (in
    its thread, or in an asyncio task or ``asyncio.to_thread`` call made from it) stops
    renewing when the invocation's remaining time reaches zero: it is marked lost
    (``raise_if_lost()`` raises, ``check_in`` refuses) and its row is deleted at
    once, so a handler that overruns its timeout (which Lambda Managed Instances
    do not stop) never keeps a key from others. A guard that is released in time
    sends the same requests as without it:

        @bound_locks
        def handler(event, context):
            with SyncDistributedLock(client, table="locks", key="daily-report"):
                ...

    Takes a ``DurableContext`` too (the deadline is its ``.lambda_context``'s).
    """
    with bounded(context):
        return handler(event, context, **kwargs)


def lock_handler(
    client: DynamoDBClient | None = None,
    *,
    on_contention: OnContention | None = None,
    table: str | None = None,
    key: str | None = None,
    keys: Sequence[str] | None = None,
    fields: Mapping[str, str] | None = None,
    lease_duration: float | None = None,
    wait_timeout: float | None = None,
    reserve_time: float = 0.0,
    logger: Any = None,
    metrics: Any = None,
    log_key: str | None = None,
    permits: int = 1,
    fencing: bool = False,
    single_flight: SingleFlight | None = None,
    mode: Literal["read", "write"] | None = None,
) -> Callable[[H], H]:
    """Run each invocation of a Lambda handler under a lock resolved from the event.

    The options are keyword-only; ``key`` (or ``keys``) is required:

    - ``client``: a `DynamoDBClient`, else one module-level
      client created on first use and reused by warm invocations (so its
      observations of abandoned locks survive between invocations).
    - ``table``: the lock table, else the ``DYNALEASE_TABLE`` environment variable.
    - ``key``: a template such as ``"customer:{customer_id}"``, resolved exactly as
      ``distributed_lock`` resolves it, so Lambda handlers and other services that
      share a template compete for one lock.
    - ``fields``: placeholder -> JMESPath expression over the event, with
      Powertools' functions (``powertools_json``, ``powertools_base64``,
      ``powertools_base64_gzip``). Placeholders not in ``fields`` name top-level
      event keys. A missing or non-``str`` value raises ``ValueError`` /
      ``TypeError`` naming the placeholder and expression, before any request.
    - ``lease_duration``: the lease in seconds; by default the invocation's
      remaining time when it acquires, at most 30 s (so a 3 s function gets a 3 s
      lease, whose cleanup budget leaves it time to wait).
    - ``wait_timeout``: at most this long a wait; the invocation's remaining time
      minus ``reserve_time`` and the lease's cleanup budget always caps it.
      ``0`` makes one immediate attempt.
    - ``reserve_time``: seconds the handler's own work needs after acquiring.
    - ``on_contention(event, context, error)``: called instead of raising
      `LockNotAcquired` (contention, too little
      time left, or DynamoDB unreachable); its return value is the handler's
      response. ``error`` is a `LockUnavailable`
      when DynamoDB answered none of the requests: answer ``503`` for it and
      ``409`` for the rest (``examples/lambda/apigw_rest_handler.py``).
    - ``logger`` / ``metrics``: a Powertools ``Logger`` (one structured line per
      lock: outcome, table, template, key hash, wait_ms, renewals) and
      ``Metrics`` (LockAcquired, LockContention, LockUnavailable, LockWaitMs,
      LockRenewals, LockLost, LockInsufficientTime). ``log_key="key"`` logs the
      key itself instead of `key_hash` of it, ``"hash"`` the hash; by
      default the ``DYNALEASE_LOG_KEYS`` environment variable decides, as it
      does for the engine's own log lines (hash unless it is ``key``).
    - ``permits``: with ``N`` > 1, hold one of N permits of a semaphore
      (`SyncDistributedSemaphore`) instead of the lock: at most
      N invocations run at once for a key. ``current_lock()`` returns that guard.
    - ``fencing``: ``True`` takes a fenced (protocol-2) lock; the handler reads
      ``current_lock().fencing_token`` and sends it with its writes
      (docs/fencing.md).
    - ``keys``: instead of ``key``, a list of templates, each resolved from the
      event as ``key`` is: the invocation holds every resolved key at once, all or
      nothing (a multi-key lock, docs/locks.md); not with ``permits`` or ``fencing``.
    - ``single_flight``: a `SingleFlight`: invocations
      that waited for the lock return the response the holder stored instead of running
      the handler again, as do later ones while it is fresh (``result_ttl``); the
      response must fit its serializer (JSON) and an item (docs/single-flight.md).
    - ``mode``: ``"read"`` or ``"write"`` holds the key as a reader or the writer of a
      read/write lock (docs/rwlocks.md); ``current_lock()`` returns that guard (a
      writer's has ``fencing_token``). Not with ``keys``, ``permits`` or ``fencing``.

    Built with Powertools' ``lambda_handler_decorator``, so it stacks with
    ``Logger.inject_lambda_context``, ``Tracer``, ``Metrics.log_metrics`` and
    idempotency; put it innermost (closest to the handler).
    """
    plan = LockPlan(
        "event",
        client,
        table=table,
        key=key,
        keys=keys,
        fields=fields,
        lease_duration=lease_duration,
        wait_timeout=wait_timeout,
        reserve_time=reserve_time,
        logger=logger,
        metrics=metrics,
        log_key=log_key,
        permits=permits,
        fencing=fencing,
        mode=mode,
    )
    if single_flight is not None:
        from .single_flight import SingleFlight  # only for handlers that share results

        if not isinstance(single_flight, SingleFlight):
            raise TypeError(f"single_flight must be a SingleFlight, got {single_flight!r}")
        single_flight._check_handler(permits=permits, keys=keys, mode=mode)
    if on_contention is not None and not callable(on_contention):
        raise TypeError(
            "on_contention must be a callable (event, context, error) -> response, "
            f"got {type(on_contention).__name__}"
        )

    def decorate(handler: H) -> H:
        if not inspect.isfunction(handler):
            raise TypeError(
                f"lock_handler decorates a Lambda handler function (def handler(event, "
                f"context)), got {type(handler).__name__}"
            )
        if inspect.iscoroutinefunction(handler) or inspect.isasyncgenfunction(handler):
            raise TypeError(
                f"lock_handler cannot wrap async {handler.__qualname__}: Lambda calls handlers "
                "synchronously; run your coroutine with asyncio.run inside a def handler"
            )
        wrapped = dynalease_lock_handler(
            handler,
            dynalease_plan=plan,
            dynalease_on_contention=on_contention,
            dynalease_single_flight=single_flight,
        )
        return cast(H, wrapped)

    return decorate


def lock_record(
    client: DynamoDBClient | None = None,
    *,
    table: str | None = None,
    key: str | None = None,
    keys: Sequence[str] | None = None,
    fields: Mapping[str, str] | None = None,
    lease_duration: float | None = None,
    wait_timeout: float | None = None,
    reserve_time: float = 0.0,
    logger: Any = None,
    metrics: Any = None,
    log_key: str | None = None,
    permits: int = 1,
    fencing: bool = False,
    mode: Literal["read", "write"] | None = None,
) -> Callable[[H], H]:
    """Process each SQS, Kinesis or DynamoDB-stream record under its own lock.

    Wraps a Powertools batch record handler (``def record_handler(record)`` or
    ``def record_handler(record, lambda_context)``) for ``BatchProcessor``,
    ``SqsFifoPartialProcessor`` and ``process_partial_response``. ``fields``
    are evaluated on the record (e.g. ``{"customer_id":
    "powertools_json(body).customer_id"}`` for SQS). The options, and their
    defaults, are `lock_handler`'s but ``on_contention`` (``permits=N``: at
    most N records of a key at once).

    The wait comes from the invocation's remaining time at each record, so pass
    ``context=context`` to ``process_partial_response``: the wrapped handler
    asks for ``lambda_context``. A record whose lock is not acquired (contention,
    or too little time left for it) or whose handler fails raises, so the
    processor reports it in ``batchItemFailures`` and it is never acknowledged
    as done; the FIFO processor's short-circuit then applies as usual.
    """
    plan = LockPlan(
        "record",
        client,
        table=table,
        key=key,
        keys=keys,
        fields=fields,
        lease_duration=lease_duration,
        wait_timeout=wait_timeout,
        reserve_time=reserve_time,
        logger=logger,
        metrics=metrics,
        log_key=log_key,
        permits=permits,
        fencing=fencing,
        mode=mode,
    )
    warned: list[bool] = []

    def decorate(record_handler: H) -> H:
        if not callable(record_handler):
            raise TypeError(f"lock_record decorates a record handler, got {record_handler!r}")
        if inspect.iscoroutinefunction(record_handler):
            raise TypeError(
                f"lock_record wraps sync record handlers; {record_handler.__qualname__} is async"
            )
        takes_context = "lambda_context" in inspect.signature(record_handler).parameters

        @functools.wraps(record_handler)
        def locked_record(record: Any, lambda_context: Any = None) -> Any:
            if lambda_context is None and not warned:
                warned.append(True)
                _log.warning(
                    "lock_record got no lambda_context, so lock waits cannot follow the "
                    "invocation's remaining time; pass context=context to "
                    "process_partial_response (or to the processor)"
                )
            with bounded(lambda_context), _hold(plan, record, lambda_context):
                if takes_context:
                    return record_handler(record, lambda_context=lambda_context)
                return record_handler(record)

        # Powertools passes lambda_context only to handlers whose signature asks
        # for it: show the wrapper's own, not (through __wrapped__) the user's
        # function's, which may not ask.
        locked_record.__signature__ = inspect.signature(  # type: ignore[attr-defined]
            locked_record, follow_wrapped=False
        )
        return cast(H, locked_record)

    return decorate


def current_lock() -> SyncDistributedLock:
    """The lock held for the current invocation or record by the middleware.

    Use it to check ownership before a side effect, or to add the ownership
    condition to a transaction:

        with SyncTransaction(client) as transaction:
            current_lock().check_in(transaction)
            transaction.put("summaries", {...})

    Raises ``LookupError`` outside a handler wrapped by ``lock_handler`` or
    ``lock_record``.
    """
    try:
        return CURRENT_LOCK.get()
    except LookupError:
        raise LookupError(
            "no dynalease lock is held here: current_lock() works inside a handler "
            "wrapped by lock_handler or a record handler wrapped by lock_record"
        ) from None
