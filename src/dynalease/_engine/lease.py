"""The lease state machine: acquire, take over, renew, release, reconcile.

One :class:`Lease` is one guard's life. All of its coroutines run on one event
loop (the process runtime's in production, the test's own with a manual clock
in unit tests). Other threads only read its state and its lost signal.

Every write is stamped with the time it was *sent*; validity runs from that
stamp for 90% of the lease and is only ever extended by a confirmed write. A
write whose outcome is unknown is reconciled with a strong read: it counts only
if the row shows exactly the owner and version we attempted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
import heapq
import itertools
import logging
import math
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ..exceptions import (
    DynamoDBError,
    LockLost,
    LockNotAcquired,
    LockReleaseError,
    RequestFailedError,
    ThrottledError,
)
from . import protocol as p
from .clock import Clock, Stamp, SystemClock, sleep_or_wake, wait_for
from .observations import Observations
from .store import ConditionFailed, Limit, LockStore, Reply, TimedOut, reply_of

log = logging.getLogger("dynalease")

#: The lost signal is pushed at least this often while renewal waits, so a wall
#: clock jump ends the lease promptly rather than at the next renewal. One watch
#: per event loop and clock checks every held lease: 1,000 leases cost one wake-up
#: per interval, not 1,000.
WATCH_INTERVAL_S = 1.0
FIRST_POLL_S = 0.025
_EPSILON_S = 1e-6


class State(enum.Enum):
    """Where a guard is in its single life."""

    NEW = "new"
    ACQUIRING = "acquiring"
    HELD = "held"
    RELEASING = "releasing"
    RELEASED = "released"
    LOST = "lost"
    NOT_ACQUIRED = "not acquired"
    CANCELLED = "cancelled"


_FINISHED = {State.RELEASED, State.LOST, State.NOT_ACQUIRED, State.CANCELLED}


@dataclass(frozen=True, slots=True)
class Counters:
    """A snapshot of a lease's request counters (see ``dynalease.metrics``)."""

    read_requests: int
    write_requests: int
    renewals: int
    wait_ms: float
    conditional_failures: int
    request_failures: int
    wait_timeouts: int
    cleanup_failures: int
    lost: bool
    consumed_rcu: float
    consumed_wcu: float


@dataclass(slots=True)
class FirstWrite:
    """How a write sent from a sync caller's own thread ended, for the engine to go on from.

    ``error`` is what the request raised (a failed condition, an error, or a
    failure that may have been applied); ``late`` is the still-open request
    when its answer had not arrived (see ``LockStore.finish_late``).
    """

    operation: str
    deadline: float
    error: BaseException | None
    late: Any = None
    version: str = ""
    start: float = 0.0
    single: bool = False
    was_lost: bool = False

    def adopt_late(self, late: Any) -> None:
        """Keep the still-open request (the transport's ``on_late``)."""
        self.late = late


class _Unknown(Exception):
    """A request whose outcome is unknown: timed out, reset, or a 5xx answer."""

    def __init__(self, task: asyncio.Future[Reply], cause: BaseException | None) -> None:
        super().__init__(str(cause) if cause else "no answer within the request timeout")
        self.task = task
        self.cause = cause


def _interrupted_failure(operation: str) -> RequestFailedError:
    """What an interrupted blocking write counts as: sent, outcome unknown."""
    return RequestFailedError(
        f"{operation} was interrupted before its answer arrived; it may have been applied",
        code="Interrupted",
        operation=operation,
        may_have_committed=True,
    )


class _BudgetSpent(Exception):
    """No time is left for another request within the current deadline."""


class Lease:
    """One guard: a single acquisition of one key, its renewals and its release."""

    def __init__(
        self,
        *,
        store: LockStore,
        clock: Clock,
        observations: Observations,
        table: str,
        key: str,
        lease_s: float,
        wait_s: float,
        on_lost: Callable[[LockLost], object] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.observations = observations
        self.table = table
        self.key = key
        self.lease_s = lease_s
        self.wait_s = wait_s
        self.owner = p.new_token()
        self.state = State.NEW
        #: A tighter network budget for a ``wait_s == 0`` attempt (set by the Lambda
        #: middleware from the invocation's remaining time).
        self.single_attempt_cap: float | None = None
        self._resource = (table, key)
        self._lease_ms = p.lease_ms(lease_s)
        self._span = p.validity_span(lease_s)
        self._version: str | None = None
        self._validity: Stamp | None = None
        self._pending: dict[str, Stamp] = {}
        self._late: set[asyncio.Future[Reply]] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        self._renewer: asyncio.Task[None] | None = None
        self._lost_reason = ""
        self._on_lost = on_lost
        self.lost_signal: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._reads = 0
        self._writes = 0
        self._renewals = 0
        self._wait_ms = 0.0
        self._conditional_failures = 0
        self._request_failures = 0
        self._wait_timeouts = 0
        self._cleanup_failures = 0
        self._rcu = 0.0
        self._wcu = 0.0
        # The release's delete sent from a sync caller's thread may overlap a renewal
        # counting on the runtime thread; ``+=`` on one attribute from both could
        # lose a count, so that thread counts its own.
        self._caller_writes = 0
        self._caller_wcu = 0.0
        self._interrupted: FirstWrite | None = None
        #: The transport bounds requests itself, in the loop's (the system clock's) time.
        self._limited = store.limits and isinstance(clock, SystemClock)

    # --- what other threads may ask ------------------------------------------

    def counters(self) -> Counters:
        """A consistent-enough snapshot; each field is read once."""
        return Counters(
            read_requests=self._reads,
            write_requests=self._writes + self._caller_writes,
            renewals=self._renewals,
            wait_ms=self._wait_ms,
            conditional_failures=self._conditional_failures,
            request_failures=self._request_failures,
            wait_timeouts=self._wait_timeouts,
            cleanup_failures=self._cleanup_failures,
            lost=self.state is State.LOST or bool(self._lost_reason),
            consumed_rcu=self._rcu,
            consumed_wcu=self._wcu + self._caller_wcu,
        )

    def time_left(self) -> float:
        """Seconds of local validity left; 0 when not held."""
        validity = self._validity
        if self.state is not State.HELD or validity is None:
            return 0.0
        return validity.remaining(self.clock, self._span)

    def raise_if_lost(self) -> None:
        """Raise LockLost unless the guard holds a valid lease right now."""
        if self.state is State.HELD and not self._lost_reason and self.time_left() > 0:
            return
        raise self._lost_error()

    def condition_item(self) -> dict[str, Any]:
        """The ownership ConditionCheck for a transaction; the guard must be valid."""
        self.raise_if_lost()
        return self.store.condition_item(self.table, self.key, self.owner)

    def _lost_error(self) -> LockLost:
        if self._lost_reason:
            reason = self._lost_reason
        elif self.state is State.HELD:
            reason = "its lease expired locally before a renewal was confirmed"
        else:
            reason = f"the guard is {self.state.value}, not held"
        return LockLost(
            f"lock {self.key!r} in table {self.table!r} is no longer owned by this guard: "
            f"{reason}. Stop the work it protected; acquire a new guard to continue",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )

    # --- requests -------------------------------------------------------------

    async def _request(
        self,
        kind: str,
        make: Callable[[Limit | None], Awaitable[Reply]],
        deadline: float,
        *,
        replayed: bool = False,
    ) -> Reply | None:
        """Send one request bounded by the deadline.

        Returns the reply, or None when the condition failed (the current row, if
        DynamoDB returned it, is in ``self._conflict_item``). Raises
        :class:`_Unknown` when the outcome is unknown and ``DynamoDBError`` when
        the request was definitely not applied. ``make(limit)`` makes the request;
        a ``replayed`` one is the outcome of a request already sent (and counted)
        from a caller's thread.
        """
        timeout = p.request_timeout(self.lease_s, deadline - self.clock.monotonic())
        if replayed:
            timeout = max(timeout, _EPSILON_S)
        elif timeout <= 0:
            raise _BudgetSpent
        elif kind == "read":
            self._reads += 1
        else:
            self._writes += 1
        task: asyncio.Future[Reply]
        if self._limited and not replayed:
            task = await self._limited_request(kind, make, timeout)
        else:
            task = await self._task_request(kind, make(None), timeout)
        try:
            reply = task.result()
        except ConditionFailed as failed:
            self._conditional_failures += 1
            self._conflict_item = failed.item
            return None
        except RequestFailedError as error:
            self._request_failures += 1
            if error.may_have_committed and kind != "read":
                raise _Unknown(task, error) from error
            raise
        except DynamoDBError:
            self._request_failures += 1
            raise
        if kind == "read":
            self._rcu += reply.capacity
        else:
            self._wcu += reply.capacity
        return reply

    async def _limited_request(
        self, kind: str, make: Callable[[Limit | None], Awaitable[Reply]], timeout: float
    ) -> asyncio.Future[Reply]:
        """Await the request itself; the transport bounds it and hands on a late answer.

        Saves the task and ``asyncio.wait`` per request (three loop iterations
        of about nine) that :meth:`_task_request` needs to keep a request
        running past its time limit.
        """
        late: list[Awaitable[dict[str, Any]]] = []
        outcome: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        try:
            outcome.set_result(await make(Limit(timeout, late.append)))
        except TimedOut:
            self._request_failures += 1
            raise _Unknown(self._late_reply(kind, late), None) from None
        except asyncio.CancelledError:
            if late and kind != "read" and self.state is State.ACQUIRING:
                # Cancelled with a create or takeover in flight: it may still land.
                self._watch_late(self._late_reply(kind, late))
            elif late:
                self._late_reply(kind, late)  # read to its end, for nobody
            raise
        except Exception as error:
            outcome.set_exception(error)
        return outcome

    def _late_reply(
        self, kind: str, late: list[Awaitable[dict[str, Any]]]
    ) -> asyncio.Future[Reply]:
        async def reply() -> Reply:
            return reply_of("GetItem" if kind == "read" else "write", await late[0])

        task = asyncio.ensure_future(reply())
        task.add_done_callback(_retrieve)
        return task

    async def _task_request(
        self, kind: str, operation: Awaitable[Reply], timeout: float
    ) -> asyncio.Future[Reply]:
        """Run the request as a task and wait up to ``timeout`` clock seconds for it."""
        task: asyncio.Future[Reply] = asyncio.ensure_future(operation)
        try:
            finished = await wait_for(self.clock, task, timeout)
        except asyncio.CancelledError:
            if kind != "read" and self.state is State.ACQUIRING:
                # Cancelled with a create or takeover in flight: it may still land.
                self._watch_late(task)
            # Nobody awaits it now (e.g. a renewal cut short by release): look at its
            # failure so asyncio does not log it as never retrieved.
            task.add_done_callback(_retrieve)
            raise
        if not finished:
            self._request_failures += 1
            # Nobody may await it again; retrieve its failure so asyncio does not
            # log "Task exception was never retrieved" when it finally fails.
            task.add_done_callback(_retrieve)
            raise _Unknown(task, None)
        return task

    _conflict_item: dict[str, Any] | None = None

    async def _read_row(self, deadline: float) -> dict[str, Any] | None:
        reply = await self._request(
            "read", lambda limit: self.store.read(self.table, self.key, limit), deadline
        )
        assert reply is not None  # reads have no condition
        return reply.item

    def _ours(self, item: dict[str, Any] | None) -> Stamp | None:
        """If the row shows one of our attempted versions, the stamp of that attempt."""
        if item is None or item.get(p.OWNER_ATTR) != {"S": self.owner}:
            return None
        version = item.get(p.VERSION_ATTR, {}).get("S")
        return self._pending.get(version) if isinstance(version, str) else None

    def _confirm(self, version: str, stamp: Stamp) -> None:
        self._version = version
        self._validity = stamp
        self._pending.clear()

    # --- acquire --------------------------------------------------------------

    def _begin_acquire(self) -> tuple[float, float, bool]:
        """Leave NEW; (start, deadline, single attempt) of this acquisition."""
        if self.state is not State.NEW:
            raise RuntimeError(
                f"this guard for {self.key!r} was already used ({self.state.value}); "
                "guards are single use, create a new one"
            )
        self.state = State.ACQUIRING
        start = self.clock.monotonic()
        single = self.wait_s == 0
        budget = p.zero_wait_budget(self.lease_s)
        if self.single_attempt_cap is not None:
            budget = min(budget, self.single_attempt_cap)
        return start, start + (budget if single else self.wait_s), single

    async def acquire(self, first: FirstWrite | None = None) -> None:
        """Acquire within the wait budget or raise LockNotAcquired.

        ``first`` is the outcome of :meth:`acquire_blocking` when that did not
        end the acquisition; the engine goes on from it.
        """
        if first is None:
            start, deadline, single = self._begin_acquire()
        else:
            start, deadline, single = first.start, first.deadline, first.single
        try:
            # One-time setup (a client to build, credentials to resolve) counts toward
            # the wait, but is not charged to the first request's timeout: a cold
            # client with a short budget would otherwise time out before it sent.
            await self.store.prepare()
            await self._acquire(deadline, single, first)
        except asyncio.CancelledError:
            self._finish_unacquired(State.CANCELLED)
            raise
        except BaseException:
            self._finish_unacquired(State.NOT_ACQUIRED)
            raise
        finally:
            self._wait_ms = (self.clock.monotonic() - start) * 1000
        self._now_held()
        if isinstance(self.clock, SystemClock):
            # No renewal task until the first renewal is due: a short hold ends
            # before, and then costs no task at all.
            deferred_renewals(asyncio.get_running_loop()).add(self)
        else:
            self.start_renewing()

    def _now_held(self) -> None:
        self.state = State.HELD
        self.observations.forget(self._resource)
        self.observations.held(self._resource, self.owner)

    def start_renewing(self) -> None:
        """Start the renewal task (on the runtime loop) unless released meanwhile."""
        if self.state is State.HELD and self._renewer is None:
            self._renewer = asyncio.ensure_future(self._renew_loop())

    # --- from a sync caller's own thread -----------------------------------------

    def acquire_blocking(self) -> FirstWrite | None:
        """Try the first create from the calling thread; None when the lock is now held.

        A sync caller blocks anyway, so sending its first create itself spares
        two hand-overs between threads, which cost more CPU than the request.
        Anything but a clean answer is returned for :meth:`acquire` to go on
        from on the runtime loop, where the engine reconciles, waits and retries.
        The caller then calls :meth:`start_renewing` on the runtime loop.
        Requires ``store.blocking_ready()``.
        """
        start, deadline, single = self._begin_acquire()
        timeout = p.request_timeout(self.lease_s, deadline - self.clock.monotonic())
        if timeout <= 0:
            return FirstWrite("PutItem", deadline, None, start=start, single=single)
        version = p.new_token()
        stamp = Stamp.now(self.clock)
        self._pending[version] = stamp
        row = p.LockRow(self.key, self.owner, version, self._lease_ms)
        first = FirstWrite(
            "PutItem",
            deadline,
            _interrupted_failure("PutItem"),
            version=version,
            start=start,
            single=single,
        )
        self._writes += 1
        self._interrupted = first  # until answered: ``abandon_first`` cleans up after an interrupt
        try:
            reply = self.store.create_blocking(self.table, row, timeout, first.adopt_late)
        except (ConditionFailed, DynamoDBError) as error:
            self._interrupted = None
            first.error = error
            return first
        finally:
            self._wait_ms = (self.clock.monotonic() - start) * 1000
        self._interrupted = None
        self._wcu += reply.capacity
        self._confirm(version, stamp)
        self._now_held()
        return None

    def abandon_first(self) -> None:
        """On the runtime loop, after an interrupt cut :meth:`acquire_blocking` short."""
        first, self._interrupted = self._interrupted, None
        self.state = State.CANCELLED
        self._pending.clear()
        if first is not None and first.late is not None:
            self._watch_late(asyncio.ensure_future(self.store.finish_late("PutItem", first.late)))
        # The create may have landed with its answer unread: delete our row if so.
        self._background(self._cleanup_late())

    def release_blocking(self) -> FirstWrite | None:
        """Try the release's delete from the calling thread; None when it is done.

        As :meth:`acquire_blocking`: anything but a clean answer is returned for
        :meth:`release` to go on from on the runtime loop. The caller then calls
        :meth:`released_elsewhere` on the runtime loop, and raises
        :meth:`lost_error` when :attr:`state` is LOST.
        """
        begun = self._begin_release()
        if begun is None:
            return None
        was_lost, deadline = begun
        first = FirstWrite(
            "DeleteItem", deadline, _interrupted_failure("DeleteItem"), was_lost=was_lost
        )
        timeout = p.request_timeout(self.lease_s, deadline - self.clock.monotonic())
        self._caller_writes += 1
        self._interrupted = first  # until answered: see ``interrupted_release``
        try:
            reply = self.store.delete_blocking(
                self.table, self.key, self.owner, timeout, first.adopt_late
            )
        except (ConditionFailed, DynamoDBError) as error:
            self._interrupted = None
            first.error = error
            return first
        self._interrupted = None
        self._caller_wcu += reply.capacity
        self.state = State.LOST if was_lost or self._lost_reason else State.RELEASED
        return None

    def interrupted_release(self) -> FirstWrite | None:
        """What an interrupted :meth:`release_blocking` leaves for :meth:`release`."""
        first, self._interrupted = self._interrupted, None
        return first

    def after_blocking_release(self) -> bool:
        """After :meth:`release_blocking` deleted the row, in the caller's thread.

        Returns True when :meth:`released_elsewhere` must still run on the runtime
        loop: a renewal task to stop or a waiter of this client to wake. (The
        holder is cleared before waiters are looked for; see ``_acquire``.)
        """
        self.observations.clear_holder(self._resource)
        return self._renewer is not None or self.observations.has_waiters(self._resource)

    def released_elsewhere(self) -> None:
        """On the runtime loop, after :meth:`release_blocking` deleted the row."""
        self._stop_renewer()
        self.observations.released(self._resource)

    def renewal_due(self) -> float:
        """The monotonic time of the first renewal after acquiring (or +inf)."""
        validity = self._validity
        if validity is None:
            return math.inf
        return validity.monotonic + p.renew_interval(self.lease_s)

    def lost_error(self) -> LockLost:
        """The error a release of a lost guard raises."""
        return self._lost_error()

    def _replay_with(self, first: FirstWrite, limit: Limit | None) -> Awaitable[Reply]:
        return self._replay(first)

    async def _replay(self, first: FirstWrite) -> Reply:
        """The outcome of a write sent from a caller's thread, as a request would end."""
        if first.late is not None:
            # Still open: the answer may yet say it was applied (``_watch_late``).
            self._watch_late(
                asyncio.ensure_future(self.store.finish_late(first.operation, first.late))
            )
        assert first.error is not None
        raise first.error

    def _not_acquired(self, why: str, cause: BaseException | None = None) -> LockNotAcquired:
        error = LockNotAcquired(
            f"lock {self.key!r} in table {self.table!r} was not acquired: {why}",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )
        error.__cause__ = cause
        return error

    async def _acquire(self, deadline: float, single: bool, first: FirstWrite | None) -> None:
        create = True
        poll = min(FIRST_POLL_S, p.poll_cap(self.lease_s))
        backoff = poll  # after failed or unconfirmed writes; grows like the poll
        last_error: BaseException | None = None
        while True:
            try:
                if create:
                    replay, first = first, None  # the first outcome is used once
                    item, won = await self._write_attempt(deadline, None, replay)
                    if won:
                        return
                else:
                    item = await self._read_row(deadline)
            except _BudgetSpent:
                raise self._budget_spent(single, last_error) from last_error
            except _Unknown as unknown:
                # Not confirmed as ours: back off before retrying, so a server that
                # keeps answering 5xx (or resetting) is not hammered in a tight loop.
                last_error = unknown.cause or last_error
                create = False
                if not await self._pause(backoff, deadline):
                    raise self._budget_spent(single, last_error) from last_error
                backoff = self._next_poll(backoff)
                continue
            except (ThrottledError, RequestFailedError) as error:
                last_error = error
                if single or not await self._pause(poll, deadline):
                    raise self._budget_spent(single, error) from error
                poll = self._next_poll(poll)
                continue
            if item is None:
                create = True
                continue
            stamp = self._ours(item)
            if stamp is not None:  # an earlier attempt of ours landed after all
                self._confirm(item[p.VERSION_ATTR]["S"], stamp)
                return
            row = p.parse_row(item, table=self.table, key=self.key)
            now = self.clock.monotonic()
            first_seen = self.observations.observe(self._resource, row.identity, now)
            eligible = first_seen + row.lease_ms / 1000
            if now >= eligible:
                try:
                    item, won = await self._write_attempt(deadline, row)
                except _BudgetSpent:
                    raise self._budget_spent(single, last_error) from last_error
                except (_Unknown, ThrottledError, RequestFailedError) as error:
                    cause = error.cause if isinstance(error, _Unknown) else error
                    last_error = cause or last_error
                    create = False
                    if not await self._pause(backoff, deadline):
                        raise self._budget_spent(single, last_error) from last_error
                    backoff = self._next_poll(backoff)
                    continue
                if won:
                    return
                create = item is None
                if item is None:
                    continue
                create = False
                continue
            if single:
                raise self._not_acquired(
                    f"it is held by owner {row.owner} and wait_timeout=0 allows one attempt"
                )
            create = False
            # Registered before the holder is looked at: a release in a sync caller's
            # thread clears the holder first and then looks for waiters, so it either
            # sees this waiter or we see that the key is no longer held here.
            waiter = self.observations.waiter(self._resource)
            # A holder in this process wakes us when it releases: poll it only slowly.
            if self.observations.held_here(self._resource, row.owner):
                poll = p.poll_cap(self.lease_s)
            # Jitter spreads the polls, but never past the moment the row becomes eligible.
            pause = min(poll * random.uniform(0.8, 1.2), eligible - now)
            try:
                woke = await self._pause(pause, deadline, waiter, jitter=False)
            except BaseException:
                if waiter.done():  # woken but leaving (cancelled): hand the wake on
                    self.observations.wake_next(self._resource)
                raise
            finally:
                self.observations.discard_waiter(self._resource, waiter)
            if not woke:
                self._wait_timeouts += 1
                raise self._not_acquired(
                    f"it is held by owner {row.owner} and the wait_timeout of "
                    f"{self.wait_s:g} s ran out. Retry later or raise wait_timeout"
                )
            if waiter.done():
                create = True
            poll = self._next_poll(poll)

    def _budget_spent(self, single: bool, cause: BaseException | None) -> LockNotAcquired:
        self._wait_timeouts += 1
        budget = "network budget of the single attempt" if single else "wait_timeout"
        detail = f" (last failure: {cause})" if cause is not None else ""
        error = self._not_acquired(f"the {budget} ran out{detail}")
        error.__cause__ = cause
        return error

    def _next_poll(self, poll: float) -> float:
        return min(poll * 1.6, p.poll_cap(self.lease_s))

    async def _pause(
        self,
        seconds: float,
        deadline: float,
        waiter: asyncio.Future[None] | None = None,
        *,
        jitter: bool = True,
    ) -> bool:
        """Sleep (with jitter) unless that passes the deadline; False when time is up."""
        left = deadline - self.clock.monotonic()
        if left <= 0:
            return False
        if jitter:
            seconds *= random.uniform(0.8, 1.2)
        await sleep_or_wake(self.clock, min(left, seconds), waiter)
        return (waiter is not None and waiter.done()) or self.clock.monotonic() < deadline

    async def _write_attempt(
        self, deadline: float, observed: p.LockRow | None, first: FirstWrite | None = None
    ) -> tuple[dict[str, Any] | None, bool]:
        """Create (``observed`` None) or take over; returns (current row, won).

        With ``first`` (a create already sent from the caller's thread), goes on
        from its outcome instead of sending.
        """
        make: Callable[[Limit | None], Awaitable[Reply]]
        if first is not None and first.version:
            replayed = first
            version = first.version
            stamp = self._pending[version]

            def make(limit: Limit | None) -> Awaitable[Reply]:
                return self._replay(replayed)

        else:
            version = p.new_token()
            row = p.LockRow(self.key, self.owner, version, self._lease_ms)
            stamp = Stamp.now(self.clock)
            self._pending[version] = stamp

            def make(limit: Limit | None) -> Awaitable[Reply]:
                if observed is None:
                    return self.store.create(self.table, row, limit)
                return self.store.replace(self.table, row, observed, limit)

        try:
            reply = await self._request(
                "write", make, deadline, replayed=first is not None and bool(first.version)
            )
        except _Unknown as unknown:
            self._watch_late(unknown.task)
            try:
                item = await self._read_row(deadline)
            except (_BudgetSpent, _Unknown, DynamoDBError):
                raise unknown from None
            if self._ours(item) is not None:
                self._confirm(version, self._pending[version])
                return item, True
            raise unknown from None  # not applied, or not yet: the caller backs off
        if reply is None:
            item = self._conflict_item
            if item is None:
                # DynamoDB returns the row with a failed condition (ALL_OLD), but some
                # implementations do not (docs/emulators.md). "No item" must not mean
                # "no row", or a contender retries its create in a tight loop: read it.
                item = await self._read_row(deadline)
            return item, False
        self._confirm(version, stamp)
        return None, True

    def _watch_late(self, task: asyncio.Future[Reply]) -> None:
        """A write that may still commit: clean it up if it lands after we moved on."""
        self._late.add(task)

        def landed(done: asyncio.Future[Reply]) -> None:
            self._late.discard(done)
            if done.cancelled():
                return
            failure = done.exception()
            # A lost answer may still mean the write was applied; deleting our own
            # owner's row is always safe, so treat it like a success here.
            if failure is not None and not (
                isinstance(failure, RequestFailedError) and failure.may_have_committed
            ):
                return
            if self.state in (State.NOT_ACQUIRED, State.CANCELLED):
                self._background(self._cleanup_late())

        task.add_done_callback(landed)

    def _background(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _finish_unacquired(self, state: State) -> None:
        self.state = state
        self._pending.clear()
        if self._validity is not None or self._late:
            # Acquired just as we were cancelled, or a write may still land.
            self._background(self._cleanup_late())

    async def _cleanup_late(self) -> None:
        """Delete a row this guard wrote after it stopped wanting it (owner-conditional)."""
        deadline = self.clock.monotonic() + p.cleanup_budget(self.lease_s)
        try:
            await self._delete_until_gone(deadline)
        except Exception as error:
            log.warning("dynalease: could not clean up late lock row %r: %s", self.key, error)

    # --- renew ---------------------------------------------------------------

    def check_validity(self, monotonic: float, wall: float) -> None:
        """Mark the guard lost if its validity ran out by the given readings of its clock.

        Called by the shared watches, which read the clock once per sweep.
        """
        validity = self._validity
        if (
            self.state is State.HELD
            and validity is not None
            and validity.remaining_at(monotonic, wall, self._span) <= _EPSILON_S
        ):
            self._lose("its lease expired before a renewal was confirmed")

    async def _renew_loop(self) -> None:
        watch = _ValidityWatch.of(self.clock)
        watch.add(self)
        try:
            await self._renew_until_done()
        finally:
            watch.discard(self)

    async def _renew_until_done(self) -> None:
        interval = p.renew_interval(self.lease_s)
        retry = p.renew_retry_interval(self.lease_s)
        assert self._validity is not None
        next_attempt = self._validity.monotonic + interval
        while self.state is State.HELD:
            validity = self._validity
            assert validity is not None
            left = validity.remaining(self.clock, self._span)
            if left <= _EPSILON_S:  # a sub-microsecond remainder cannot be renewed in time
                self._lose("its lease expired before a renewal was confirmed")
                return
            wait = next_attempt - self.clock.monotonic()
            if wait > 0:
                await self.clock.sleep(min(wait, left))  # the watch covers clock jumps
                continue
            confirmed = await self._renew_once()
            if confirmed:
                assert self._validity is not None
                next_attempt = self._validity.monotonic + interval
            else:
                next_attempt = self.clock.monotonic() + retry

    async def _renew_once(self) -> bool:
        """One renewal attempt; True when confirmed, False to retry soon."""
        assert self._validity is not None and self._version is not None
        deadline = self.clock.monotonic() + self._validity.remaining(self.clock, self._span)
        current = self._version
        version = p.new_token()
        stamp = Stamp.now(self.clock)
        self._pending[version] = stamp
        try:
            reply = await self._request(
                "write",
                lambda limit: self.store.renew(
                    self.table, self.key, self.owner, current, version, limit
                ),
                deadline,
            )
        except _BudgetSpent:
            return False
        except _Unknown:
            try:
                item = await self._read_row(deadline)
            except (_BudgetSpent, _Unknown, DynamoDBError):
                return False
            return self._reconcile_renewal(item, current)
        except DynamoDBError as error:
            log.debug("dynalease: renewal of %r failed: %s", self.key, error)
            return False
        if reply is None:
            item = self._conflict_item
            if item is None:
                try:
                    item = await self._read_row(deadline)
                except (_BudgetSpent, _Unknown, DynamoDBError):
                    return False
            return self._reconcile_renewal(item, current)
        if self.state is State.HELD:
            self._confirm(version, stamp)
            self._renewals += 1
        return True

    def _reconcile_renewal(self, item: dict[str, Any] | None, current: str) -> bool:
        if self.state is not State.HELD:
            return False
        stamp = self._ours(item)
        if stamp is not None:
            version = item[p.VERSION_ATTR]["S"] if item else ""
            self._confirm(version, stamp)
            self._renewals += 1
            return True
        if (
            item is not None
            and item.get(p.OWNER_ATTR) == {"S": self.owner}
            and item.get(p.VERSION_ATTR) == {"S": current}
        ):
            return False  # not applied; retry
        holder = "the row is gone" if item is None else "another owner took it over"
        self._lose(f"{holder} (renewal rejected)")
        return False

    def _lose(self, reason: str) -> None:
        """Mark the guard lost (once) and tell whoever is listening."""
        if self._lost_reason:
            return
        self._lost_reason = reason
        if self.state is State.HELD:
            self.state = State.LOST
        log.warning("dynalease: lock %r in table %r lost: %s", self.key, self.table, reason)
        error = self._lost_error()
        if not self.lost_signal.done():
            self.lost_signal.set_result(None)
        callback = self._on_lost
        if callback is not None:
            # A user callback must never stall the runtime that renews every lease.
            threading.Thread(
                target=_run_callback, args=(callback, error), name="dynalease-on-lost", daemon=True
            ).start()

    def mark_lost(self, reason: str) -> None:
        """Record that ownership is known to be gone (e.g. a rejected check_in)."""
        self._lose(reason)

    # --- release ---------------------------------------------------------------

    def _begin_release(self) -> tuple[bool, float] | None:
        """Enter RELEASING; (was lost, deadline), or None when there is nothing to release."""
        if self.state in (State.NEW, State.ACQUIRING, State.NOT_ACQUIRED, State.CANCELLED):
            return None
        if self.state in (State.RELEASED, State.RELEASING):
            return None
        if self.state is State.HELD and self.time_left() <= 0:
            self._lose("its lease expired before a renewal was confirmed")
        was_lost = self.state is State.LOST
        self.state = State.RELEASING
        return was_lost, self.clock.monotonic() + p.cleanup_budget(self.lease_s)

    def _stop_renewer(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None and not renewer.done():
            # A renewal in flight cannot recreate the row: its condition needs our
            # owner and version on an existing row, and the delete removes it.
            renewer.cancel()

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if it is still ours, within the cleanup budget.

        Raises LockLost when the guard had lost ownership (the protected work ran
        unprotected for a while) and LockReleaseError when the delete could not be
        confirmed. ``first`` is the outcome of :meth:`release_blocking` when that
        did not finish the release.
        """
        if first is None:
            begun = self._begin_release()
            if begun is None:
                return
            was_lost, deadline = begun
        else:
            was_lost, deadline = first.was_lost, first.deadline
        self._stop_renewer()
        try:
            await self._delete_until_gone(deadline, first)
        except LockReleaseError:
            self.state = State.LOST if was_lost else State.RELEASED
            self._cleanup_failures += 1
            raise
        finally:
            if self.state is State.RELEASING:
                self.state = State.LOST if was_lost or self._lost_reason else State.RELEASED
        self.observations.released(self._resource)
        if was_lost or self._lost_reason:
            self.state = State.LOST
            raise self._lost_error()

    async def _delete_until_gone(self, deadline: float, first: FirstWrite | None = None) -> None:
        retry = p.renew_retry_interval(self.lease_s)
        uncertain = False
        last_error: BaseException | None = None
        while True:
            try:
                if first is not None:
                    replay, first = first, None
                    reply = await self._request(
                        "write",
                        functools.partial(self._replay_with, replay),
                        deadline,
                        replayed=True,
                    )
                else:
                    reply = await self._request(
                        "write",
                        lambda limit: self.store.delete(self.table, self.key, self.owner, limit),
                        deadline,
                    )
            except _BudgetSpent:
                break
            except _Unknown as unknown:
                uncertain = True
                last_error = unknown.cause or last_error  # a bare timeout names nothing new
                try:
                    item = await self._read_row(deadline)
                except _BudgetSpent:
                    break
                except (_Unknown, DynamoDBError) as error:
                    cause = error.cause if isinstance(error, _Unknown) else error
                    last_error = cause or last_error
                    await self.clock.sleep(min(retry, max(0.0, deadline - self.clock.monotonic())))
                    continue
                if item is None or item.get(p.OWNER_ATTR) != {"S": self.owner}:
                    return
                # Not applied: pause like any failed delete, never retry in a tight loop.
                await self.clock.sleep(min(retry, max(0.0, deadline - self.clock.monotonic())))
                continue
            except DynamoDBError as error:
                last_error = error
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    break
                await self.clock.sleep(min(retry, left))
                continue
            if reply is None and not uncertain and self.state is State.RELEASING:
                item = self._conflict_item
                if item is None:  # not returned with the failure: find out who holds it
                    try:
                        item = await self._read_row(deadline)
                    except (_BudgetSpent, _Unknown, DynamoDBError):
                        item = None
                if item is not None and item.get(p.OWNER_ATTR) != {"S": self.owner}:
                    self._lose("another owner took the lock over before release")
                elif item is None and self._lost_reason == "":
                    # The row vanished under a valid guard: someone deleted it by hand.
                    self._lose("the row was deleted by someone else before release")
            return
        raise LockReleaseError(
            f"release of lock {self.key!r} in table {self.table!r} was not confirmed within "
            f"the cleanup budget of {p.cleanup_budget(self.lease_s):g} s"
            + (f" (last failure: {last_error})" if last_error else "")
            + "; the row stays until its lease can be taken over by observation",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )

    def abandon(self) -> None:
        """Called when the caller gave up on a guard it acquired: release in the background."""
        if self.state is State.HELD or self.state is State.LOST:
            self._background(self._release_quietly())

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except Exception as error:
            log.debug("dynalease: background release of %r: %s", self.key, error)


def _retrieve(task: asyncio.Future[Reply]) -> None:
    if not task.cancelled():
        task.exception()


class _ValidityWatch:
    """Checks every held lease of one event loop and clock each WATCH_INTERVAL_S."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.leases: set[Lease] = set()
        self.task: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, clock: Clock) -> _ValidityWatch:
        """The watch for ``clock`` on the running loop."""
        by_clock = _WATCHES.setdefault(asyncio.get_running_loop(), {})
        watch = by_clock.get(id(clock))
        if watch is None or watch.clock is not clock:
            watch = by_clock[id(clock)] = cls(clock)
        return watch

    def add(self, lease: Lease) -> None:
        self.leases.add(lease)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._run())

    def discard(self, lease: Lease) -> None:
        self.leases.discard(lease)

    async def _run(self) -> None:
        while self.leases:
            await self.clock.sleep(WATCH_INTERVAL_S)
            monotonic, wall = self.clock.monotonic(), self.clock.wall()
            for lease in list(self.leases):
                lease.check_validity(monotonic, wall)


_WATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _ValidityWatch]] = (
    weakref.WeakKeyDictionary()
)


class DeferredRenewals:
    """Starts the renewal tasks of just-acquired leases when their first renewal is due.

    Telling the runtime loop about a lease a sync caller acquired in its own
    thread would wake it twice per lock (start, then stop, a renewal task),
    which costs more CPU than the lock's requests; and a renewal task started at
    once for a short async hold is made, scheduled and cancelled for nothing.
    Instead the lease waits here: one timer on the loop starts each renewal
    task when it is due, and checks every waiting lease's validity once per
    :data:`WATCH_INTERVAL_S` (as the validity watch does for running ones). A
    lease released before its first renewal never gets a task. Only for leases
    on the system clock, whose times are the loop's times.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, Lease]] = []
        self._order = itertools.count()
        self._wake_at = math.inf  # when the loop looks next; guarded by _lock
        self._next_sweep = 0.0  # when waiting leases are next checked; guarded by _lock
        self._timer: asyncio.TimerHandle | None = None  # loop only

    def add(self, lease: Lease) -> None:
        """Take a lease just acquired in a caller's thread (any thread)."""
        due = lease.renewal_due()
        when = min(due, time.monotonic() + WATCH_INTERVAL_S)
        with self._lock:
            heapq.heappush(self._heap, (due, next(self._order), lease))
            if when >= self._wake_at:
                return  # the loop looks before this lease needs it
            self._wake_at = when
        self.loop.call_soon_threadsafe(self._schedule)

    def __len__(self) -> int:
        return len(self._heap)

    def _schedule(self) -> None:
        with self._lock:
            wake_at = self._wake_at
        if self._timer is not None:
            if self._timer.when() <= wake_at:
                return
            self._timer.cancel()
        self._timer = None if wake_at == math.inf else self.loop.call_at(wake_at, self._tick)

    def _tick(self) -> None:
        self._timer = None
        now = time.monotonic()
        due: list[Lease] = []
        waiting: list[Lease] = []
        with self._lock:
            heap = self._heap
            while heap and heap[0][0] <= now:
                due.append(heapq.heappop(heap)[2])
            if now >= self._next_sweep:
                # Once per interval, not on every tick: with many leases due one
                # after another, a sweep per start would cost n^2.
                self._next_sweep = now + WATCH_INTERVAL_S
                # Released (or lost) leases are dropped here, unseen by the loop.
                self._heap = heap = [entry for entry in heap if entry[2].state is State.HELD]
                heapq.heapify(heap)
                waiting = [entry[2] for entry in heap]
            self._wake_at = min(heap[0][0], self._next_sweep) if heap else math.inf
        for lease in due:
            if lease.state is State.HELD:
                lease.start_renewing()
        if waiting:
            wall = time.time()  # the system clock's reading, as SystemClock.wall
            for lease in waiting:
                lease.check_validity(now, wall)
        self._schedule()


_DEFERRED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DeferredRenewals] = (
    weakref.WeakKeyDictionary()
)
_DEFERRED_LOCK = threading.Lock()


def deferred_renewals(loop: asyncio.AbstractEventLoop) -> DeferredRenewals:
    """The :class:`DeferredRenewals` of ``loop`` (any thread)."""
    deferred = _DEFERRED.get(loop)
    if deferred is None:
        with _DEFERRED_LOCK:
            deferred = _DEFERRED.get(loop)
            if deferred is None:
                deferred = _DEFERRED[loop] = DeferredRenewals(loop)
    return deferred


def _run_callback(callback: Callable[[LockLost], object], error: LockLost) -> None:
    try:
        callback(error)
    except Exception:
        log.exception("dynalease: on_lost callback raised")
