"""Semaphores: one lease on whichever of N permit rows is free (or abandoned).

A semaphore guard is a :class:`PermitLease`: an ordinary :class:`.lease.Lease`
whose key is decided while it acquires. Each permit is a protocol-1 row of its
own, so once one is held, renewal, release, ``check_in`` and the lost signal
are the lock's, unchanged. Only the choice of a permit lives here, once for the
sync and async faces:

1. create a row at one permit chosen at random (uncontended: one write);
2. when that fails, read every permit in one strongly consistent
   ``BatchGetItem`` (keys it leaves unprocessed are asked again);
3. a free permit: create it; all held: observe each row in the client's
   observation cache and take over one that stayed unchanged for its stored
   lease; otherwise poll again with the lock's backoff, within the budget.

A write whose outcome was unknown is retried on the same permit when that one
is free, so a late landing cannot leave a second row of ours behind; a guard
that gives up deletes what it may have written on every permit it tried.
"""

from __future__ import annotations

import asyncio
import functools
import random
from typing import Any

from ..exceptions import LockNotAcquired, MalformedLockRow, RequestFailedError, ThrottledError
from . import protocol as p
from .acquire import FIRST_POLL_S
from .lease import Lease
from .requests import BudgetSpent, FirstWrite, OutcomeUnknown

Item = dict[str, Any]


class PermitLease(Lease):
    """One semaphore guard: the lease of one of ``permit_keys``, chosen while acquiring."""

    def __init__(self, *, name: str, permit_keys: tuple[str, ...], **options: Any) -> None:
        first = random.randrange(len(permit_keys))
        super().__init__(key=permit_keys[first], **options)
        #: The semaphore's own key (the lease's ``key`` is the permit's row).
        self.name = name
        self.permit_keys = permit_keys
        self._tried: list[str] = [permit_keys[first]]
        self._cleaning: asyncio.Lock | None = None

    @property
    def permits(self) -> int:
        """How many permits the semaphore has."""
        return len(self.permit_keys)

    def _use(self, key: str) -> None:
        """Aim the next write at permit row ``key`` (only while acquiring)."""
        if key != self.key and self.journal is not None:
            # The journal names the row the next write may create, before it is sent.
            self.journal.record(self.table, key, self.owner)
        self.key = key
        self._resource = (self.table, key)
        if key not in self._tried:
            self._tried.append(key)

    def _not_acquired(self, why: str, cause: BaseException | None = None) -> LockNotAcquired:
        error = LockNotAcquired(
            f"semaphore {self.name!r} in table {self.table!r} was not acquired "
            f"(none of its {self.permits} permits): {why}",
            table=self.table,
            key=self.name,
            owner=self.owner,
            request_id=self._last_request_id,
        )
        error.__cause__ = cause
        return error

    async def _acquire(self, deadline: float, single: bool, first: FirstWrite | None) -> None:
        poll = min(FIRST_POLL_S, p.poll_cap(self.lease_s))
        backoff = poll
        last_error: BaseException | None = None
        target: str | None = self.key  # the permit to create next (None: read them all)
        observed: p.LockRow | None = None  # set for a takeover of ``target``
        while True:
            if target is not None:
                self._use(target)
                replay, first = first, None
                try:
                    _, won = await self._write_attempt(deadline, observed, replay)
                except BudgetSpent:
                    raise self._budget_spent(single, last_error) from last_error
                except (OutcomeUnknown, ThrottledError, RequestFailedError) as error:
                    unknown = isinstance(error, OutcomeUnknown)
                    cause = error.cause if isinstance(error, OutcomeUnknown) else error
                    last_error = cause or last_error
                    # A definite failure ends a single attempt, as for a lock; an unknown
                    # outcome is followed up (the batch read shows whether it landed).
                    if (single and not unknown) or not await self._pause(backoff, deadline):
                        raise self._budget_spent(single, last_error) from last_error
                    backoff = self._next_poll(backoff)
                    target = None
                    continue
                if won:
                    return
            target = observed = None
            try:
                rows = await self._read_permits(deadline)
                self._answered = True
            except BudgetSpent:
                raise self._budget_spent(single, last_error) from last_error
            except (OutcomeUnknown, ThrottledError, RequestFailedError) as error:
                cause = error.cause if isinstance(error, OutcomeUnknown) else error
                last_error = cause or last_error
                if single or not await self._pause(poll, deadline):
                    raise self._budget_spent(single, last_error) from last_error
                poll = self._next_poll(poll)
                continue
            for key, item in rows.items():
                if item is not None and (stamp := self._ours(item)) is not None:
                    self._use(key)  # an earlier attempt of ours landed after all
                    self._confirm(item[p.VERSION_ATTR]["S"], stamp)
                    return
            free = [key for key, item in rows.items() if item is None]
            if free:
                # The permit last written, if free: a late landing of that write then fails.
                target = self.key if self.key in free else random.choice(free)
                continue
            now = self.clock.monotonic()
            stale, soonest, holders = self._observe(rows, now)
            if stale:
                target, observed = random.choice(stale)
                continue
            if single:
                self.tally.wait_timeouts += 1
                raise self._not_acquired(
                    f"all are held ({holders}) and wait_timeout=0 allows one attempt"
                )
            pause = min(poll * random.uniform(0.8, 1.2), max(0.0, soonest - now))
            released, more = await self._wait_for_permit(pause, deadline)
            if released is not None:  # a guard of this client let this permit go
                target = released
                continue
            if not more:
                self.tally.wait_timeouts += 1
                raise self._not_acquired(
                    f"all are held ({holders}) and the wait_timeout of {self.wait_s:g} s "
                    "ran out. Retry later, raise wait_timeout or the number of permits"
                )
            poll = self._next_poll(poll)

    async def _wait_for_permit(self, pause: float, deadline: float) -> tuple[str | None, bool]:
        """Sleep ``pause`` unless a guard of this client releases a permit first.

        Returns (the permit released, or None; whether time is left). Waiting on
        every permit as the lock waits on its key: a release wakes the longest
        waiter of that permit, and a wake this guard does not use is passed on.
        """
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        woken: list[str] = []

        def woke(key: str, future: asyncio.Future[None]) -> None:
            if not future.cancelled():
                woken.append(key)
                if not wake.done():
                    wake.set_result(None)

        waiters = []
        for key in self.permit_keys:
            resource = (self.table, key)
            future = self.observations.waiter(resource)
            future.add_done_callback(functools.partial(woke, key))
            waiters.append((resource, future))
        used: str | None = None
        try:
            more = await self._pause(pause, deadline, wake, jitter=False)
            await asyncio.sleep(0)  # let the callbacks of wakes set in this same step run
            used = woken[0] if woken else None
        finally:
            for resource, future in waiters:
                self.observations.discard_waiter(resource, future)
                if future.done() and not future.cancelled() and resource[1] != used:
                    self.observations.wake_next(resource)  # not ours to use: hand it on
        return used, more

    def _observe(
        self, rows: dict[str, Item | None], now: float
    ) -> tuple[list[tuple[str, p.LockRow]], float, str]:
        """Observe every held permit: (stale ones, when the next turns stale, holders)."""
        stale: list[tuple[str, p.LockRow]] = []
        soonest = float("inf")
        owners: list[str] = []
        malformed: MalformedLockRow | None = None
        for key, item in rows.items():
            assert item is not None
            try:
                row = p.parse_row(item, table=self.table, key=key)
            except MalformedLockRow as error:  # never taken over; other permits may be
                malformed = malformed or error
                continue
            owners.append(row.owner)
            first_seen = self.observations.observe((self.table, key), row.identity, now)
            eligible = first_seen + row.lease_ms / 1000
            if now >= eligible:
                stale.append((key, row))
            soonest = min(soonest, eligible)
        if not owners and malformed is not None:
            raise malformed
        # Other holders' owner tokens stay out of messages: only how many there are.
        held = f"by {len(owners)} other owner{'s' if len(owners) > 1 else ''}"
        return stale, soonest, held if owners else "by rows that are not lock rows"

    async def _read_permits(self, deadline: float) -> dict[str, Item | None]:
        """Every permit row (None when free), from one ``BatchGetItem`` (more if unprocessed)."""
        table, wanted = self.table, self.permit_keys
        found: dict[str, Item] = {}
        pause = min(FIRST_POLL_S, p.poll_cap(self.lease_s))
        while True:
            keys = wanted
            reply = await self._request(
                "read", functools.partial(self.store.read_many, table, keys), deadline
            )
            assert reply is not None  # reads have no condition
            found.update(reply.items)
            wanted = tuple(key for key in reply.unprocessed if key in keys)
            if not wanted:
                return {key: found.get(key) for key in self.permit_keys}
            # DynamoDB left some keys unread (throughput): ask again for them, backing off.
            if not await self._pause(pause, deadline):
                raise BudgetSpent
            pause = self._next_poll(pause)

    async def _cleanup_late(self) -> None:
        """Delete a row this guard may have written on any permit it tried, after giving up."""
        if self._cleaning is None:
            self._cleaning = asyncio.Lock()
        async with self._cleaning:  # one sweep at a time: each aims the lease at a permit
            held = self.key
            for key in list(self._tried):
                self.key, self._resource = key, (self.table, key)
                await super()._cleanup_late()
            self.key, self._resource = held, (self.table, held)
