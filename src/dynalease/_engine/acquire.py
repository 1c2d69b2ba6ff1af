"""Acquire: create the row, or observe the holder and take over once it is stale.

A create (``attribute_not_exists``) that fails shows the current row; the
client's observation cache remembers when it first saw that (owner, version,
lease_ms), and the row may be taken over only once it has stayed unchanged for
its stored lease. Until then the acquirer waits, woken early when a holder in
this process releases. Everything happens within the wait budget (a single
attempt's network budget when ``wait_s == 0``).

When the budget ends, the error says which of two things happened: DynamoDB
answered at least one request (a reply, a failed condition, a read that found a
row or none), so the lock was busy or the answers came too slowly, and that is
:class:`LockNotAcquired`; or every request failed (connection errors, timeouts,
5xx, throttling), which is an outage, :class:`LockUnavailable`. Only a bool is
kept for it, set on the paths where a definite answer arrives.

One outage ends early: when every request so far could not even connect (the
endpoint refused the connection or its host name did not resolve) for
``UNREACHABLE_S`` and ``UNREACHABLE_REQUESTS`` requests, the endpoint or Region
is most likely wrong, and waiting out the whole budget only hides that. Any
other failure (a timeout, a reset, 5xx, throttling) or any answer keeps the
wait to its end, as a transient outage needs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from .._redact import logged_key
from ..exceptions import (
    DynamoDBError,
    GuardReused,
    LockNotAcquired,
    LockUnavailable,
    RequestFailedError,
    ThrottledError,
)
from . import protocol as p
from .clock import Stamp, SystemClock, sleep_or_wake
from .deadline import deadline_on
from .renew import Renewing
from .requests import BudgetSpent, FirstWrite, OutcomeUnknown
from .scheduling import deferred_renewals
from .states import NEW, START, WON, Event
from .store import Limit, Reply

FIRST_POLL_S = 0.025
#: A request that never connected: refused, or no such host (a timeout is not one).
UNREACHABLE_CODES = frozenset({"EndpointConnectionError"})
#: How long, and for how many requests, nothing may connect before the acquisition stops.
UNREACHABLE_S = 1.0
UNREACHABLE_REQUESTS = 3


class Acquiring(Renewing):
    """Getting a guard from NEW to HELD, or to NOT_ACQUIRED or CANCELLED."""

    #: Whether DynamoDB gave any request of this acquisition a definite answer (a
    #: failed condition, a read); a class default, so an uncontended acquire that
    #: wins at once never writes it. Without one, a spent budget is an outage.
    _answered = False
    #: Whether the acquisition won by taking over a stale row (for its trace).
    _took_over = False

    def _begin_acquire(self) -> tuple[float, float, bool]:
        """Leave NEW; (start, deadline, single attempt) of this acquisition."""
        if self.state is not NEW:
            raise GuardReused(
                f"this guard for {logged_key(self.key)} was already used ({self.state.value}); "
                "guards are single use, create a new one"
            )
        self._move(START)
        deadline = deadline_on(self.clock)
        if deadline is not None:  # bounded by the caller's deadline (``deadline.py``)
            self.deadline = deadline
        if self.journal is not None:  # before the first request: it may commit unanswered
            self.journal.record(self.table, self.key, self.owner, fencing=self.fencing)
        start = self.clock.monotonic()
        if self.wait_s != 0:
            return start, start + self.wait_s, False
        budget = p.zero_wait_budget(self.lease_s)
        if self.single_attempt_cap is not None:
            budget = min(budget, self.single_attempt_cap)
        return start, start + budget, True

    async def acquire(self, first: FirstWrite | None = None) -> None:
        """Acquire within the wait budget or raise LockNotAcquired.

        ``first`` is the outcome of ``acquire_blocking`` when that did not end
        the acquisition; the engine goes on from it.
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
            self._finish_unacquired(Event.CANCEL)
            raise
        except BaseException:
            self._finish_unacquired(Event.GAVE_UP)
            raise
        finally:
            self.tally.wait_ms = (self.clock.monotonic() - start) * 1000
        self._now_held()
        if isinstance(self.clock, SystemClock):
            # No renewal task until the first renewal is due: a short hold ends
            # before, and then costs no task at all.
            deferred_renewals(asyncio.get_running_loop()).add(self)
        else:
            self.start_renewing()

    def _now_held(self) -> None:
        self._move(WON)
        self.observations.forget(self._resource)
        self.observations.held(self._resource, self.owner)

    def _finish_unacquired(self, event: Event) -> None:
        self._move(event)
        self._pending.clear()
        if self._validity is not None or self._late:
            # Acquired just as we were cancelled, or a write may still land.
            self._background(self._cleanup_late())
        else:
            self._forget()

    def _not_acquired(self, why: str, cause: BaseException | None = None) -> LockNotAcquired:
        error = LockNotAcquired(
            f"lock {self.key!r} in table {self.table!r} was not acquired: {why}",
            table=self.table,
            key=self.key,
            owner=self.owner,
            request_id=self._last_request_id,
        )
        error.__cause__ = cause
        return error

    async def _acquire(self, deadline: float, single: bool, first: FirstWrite | None) -> None:
        create = True
        poll = min(FIRST_POLL_S, p.poll_cap(self.lease_s))
        backoff = poll  # after failed or unconfirmed writes; grows like the poll
        seen: tuple[str, str, int] | None = None  # the row our last contention read saw
        pace: float | None = None  # the last contention pause (p.contention_poll)
        began = self.clock.monotonic()
        last_error: BaseException | None = None
        refused = 0  # requests that could not connect, while nothing else happened
        while True:
            try:
                if create:
                    replay, first = first, None  # the first outcome is used once
                    item, won = await self._write_attempt(deadline, None, replay)
                    if won:
                        return
                else:
                    item = await self._read_row(deadline)
                    self._answered = True
            except BudgetSpent:
                raise self._budget_spent(single, last_error) from last_error
            except OutcomeUnknown as unknown:
                # Not confirmed as ours: back off before retrying, so a server that
                # keeps answering 5xx (or resetting) is not hammered in a tight loop.
                last_error = unknown.cause or last_error
                create, refused = False, -1
                if not await self._pause(backoff, deadline):
                    raise self._budget_spent(single, last_error) from last_error
                backoff = self._next_poll(backoff)
                continue
            except (ThrottledError, RequestFailedError) as error:
                last_error = error
                refused = refused + 1 if refused >= 0 and error.code in UNREACHABLE_CODES else -1
                if (
                    refused >= UNREACHABLE_REQUESTS
                    and not self._answered
                    and self.clock.monotonic() - began >= UNREACHABLE_S
                ):
                    raise self._unreachable(refused, error) from error
                if single or not await self._pause(poll, deadline):
                    raise self._budget_spent(single, error) from error
                poll = self._next_poll(poll)
                continue
            if item is None or (self.fencing and p.is_free(item)):
                create = True
                continue
            stamp = self._ours(item)
            if stamp is not None:  # an earlier attempt of ours landed after all
                self._won(item[p.VERSION_ATTR]["S"], stamp, item)
                return
            row = p.parse_row(item, table=self.table, key=self.key, protocol=self._protocol)
            now = self.clock.monotonic()
            first_seen = self.observations.observe(self._resource, row.identity, now)
            eligible = first_seen + row.lease_ms / 1000
            if now >= eligible:
                try:
                    item, won = await self._write_attempt(deadline, row)
                except BudgetSpent:
                    raise self._budget_spent(single, last_error) from last_error
                except (OutcomeUnknown, ThrottledError, RequestFailedError) as error:
                    cause = error.cause if isinstance(error, OutcomeUnknown) else error
                    last_error = cause or last_error
                    create = False
                    if not await self._pause(backoff, deadline):
                        raise self._budget_spent(single, last_error) from last_error
                    backoff = self._next_poll(backoff)
                    continue
                if won:
                    return
                create = item is None or (self.fencing and p.is_free(item))
                continue
            if single:
                self.tally.wait_timeouts += 1  # a failed single attempt, as pydynox counts it
                raise self._not_acquired(
                    "it is held by another owner and wait_timeout=0 allows one attempt"
                )
            create = False
            # Registered before the holder is looked at: a release in a sync caller's
            # thread clears the holder first and then looks for waiters, so it either
            # sees this waiter or we see that the key is no longer held here.
            waiter = self.observations.waiter(self._resource)
            # Jitter spreads the polls; a first wait starts at a random phase, so waiters
            # that arrived together do not read together. Never past the row's eligibility.
            spread = random.uniform(0.8, 1.2) if pace else random.uniform(0.1, 1.0)
            pace = p.contention_poll(self.lease_s, pace, row.identity == seen, now - began)
            seen = row.identity
            # A holder in this process wakes us when it releases: poll it only slowly.
            if self.observations.held_here(self._resource, row.owner):
                pace, spread = p.poll_cap(self.lease_s), random.uniform(0.8, 1.2)
            # A short wait still reads: no pause is over half the wait left (>= 50 ms).
            pause = min(pace * spread, eligible - now, max((deadline - now) / 2, 0.05))
            try:
                woke = await self._pause(pause, deadline, waiter, jitter=False)
            except BaseException:
                if waiter.done():  # woken but leaving (cancelled): hand the wake on
                    self.observations.wake_next(self._resource)
                raise
            finally:
                self.observations.discard_waiter(self._resource, waiter)
            if not woke:
                self.tally.wait_timeouts += 1
                raise self._not_acquired(
                    "it is held by another owner and the wait_timeout of "
                    f"{self.wait_s:g} s ran out. Retry later or raise wait_timeout"
                )
            if waiter.done():
                create = True

    def _budget_spent(self, single: bool, cause: BaseException | None) -> LockNotAcquired:
        tally = self.tally
        tally.wait_timeouts += 1
        budget = "network budget of the single attempt" if single else "wait_timeout"
        sent = tally.read_requests + tally.write_requests
        if self._answered or not sent:
            detail = f" (last failure: {cause})" if cause is not None else ""
            return self._not_acquired(f"the {budget} ran out{detail}", cause)
        failure = cause if cause is not None else "no answer within the request timeout"
        error = LockUnavailable(
            f"lock {self.key!r} in table {self.table!r} was not acquired: the {budget} ran "
            f"out and DynamoDB answered none of its {sent} request{'s' if sent > 1 else ''} "
            f"(last failure: {failure}). This is an outage, not contention: check the "
            "endpoint and Region, the network path to DynamoDB (a Lambda function in a VPC "
            "needs a DynamoDB VPC endpoint or a NAT gateway), the credentials and the "
            "table's throughput, then retry",
            table=self.table,
            key=self.key,
            owner=self.owner,
            request_id=self._last_request_id,
        )
        error.__cause__ = cause
        return error

    def _unreachable(self, refused: int, cause: DynamoDBError) -> LockUnavailable:
        self.tally.wait_timeouts += 1
        return LockUnavailable(
            f"lock {self.key!r} in table {self.table!r} was not acquired: none of its "
            f"{refused} requests could connect (last failure: {cause}); the endpoint refused "
            "the connection or its host name did not resolve. This is not contention: the "
            f"acquisition stopped at once instead of waiting out its wait_timeout of "
            f"{self.wait_s:g} s. Check the endpoint URL and Region (`dynalease doctor "
            f"--table {self.table}` checks them) and that the server is running",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )

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
            row = p.LockRow(self.key, self.owner, version, self._lease_ms, self._protocol)
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
        except OutcomeUnknown as unknown:
            self._watch_late(unknown.task)
            try:
                item = await self._read_row(deadline)
            except (BudgetSpent, OutcomeUnknown, DynamoDBError):
                raise unknown from None
            if self._ours(item) is not None:
                self._won(version, self._pending[version], item)
                return item, True
            self._answered = True  # the read was answered: DynamoDB is reachable
            raise unknown from None  # not applied, or not yet: the caller backs off
        if reply is None:
            self._answered = True
            item = self._conflict_item
            if item is None:
                # DynamoDB returns the row with a failed condition (ALL_OLD), but some
                # implementations do not (docs/emulators.md). "No item" must not mean
                # "no row", or a contender retries its create in a tight loop: read it.
                item = await self._read_row(deadline)
            return item, False
        self._won(version, stamp, reply.item)
        if observed is not None:
            self._took_over = True
        return None, True
