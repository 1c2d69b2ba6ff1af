"""A reader of a read/write lock: joins the shared main row, renews it, leaves it.

Runs on the runtime loop (:mod:`.shared_rows` decides; this module sends and sleeps).
Abandoned rows are recognised by observation only, in the client's observation cache
as every lock's are: a row unchanged for its stored lease.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from ..exceptions import (
    DynamoDBError,
    LockLost,
    LockNotAcquired,
    LockUnavailable,
    MalformedLockRow,
)
from . import protocol as p
from . import shared_rows as s
from .base import run_callback
from .loop import sleep_or_wake
from .requests import ignore_late
from .spec import ClientParts
from .store import ConditionFailed, Limit, Reply, TimedOut

__all__ = ["ReaderLease"]

#: How a reader's pause between reads grows while it waits (up to ``protocol.poll_cap``).
GROWTH = 1.6


class ReaderLease:
    """One reader guard's rows and renewals; every method runs on the runtime loop."""

    def __init__(
        self,
        parts: ClientParts,
        *,
        table: str,
        key: str,
        lease_s: float,
        wait_s: float,
        on_lost: Callable[[LockLost], object] | None,
    ) -> None:
        self.store, self.observations, self.clock = parts
        self.table, self.key = table, key
        self.lease_s, self.wait_s, self.on_lost = lease_s, wait_s, on_lost
        #: This reader's token in the main row's reader set.
        self.owner = p.new_token()
        self.reads = self.writes = self.renewals = 0
        self.wait_ms = 0.0
        #: A ``wait_timeout=0`` attempt's network budget, when the caller caps it (Lambda).
        self.single_cap: float | None = None
        self.lost: LockLost | None = None
        self._renewing: asyncio.Task[None] | None = None
        self._valid_until = 0.0
        self._rng = random.Random(random.getrandbits(64))

    # --- acquisition ------------------------------------------------------------

    async def acquire(self) -> None:
        """Join the readers within ``wait_s`` (one attempt when it is 0), or raise
        :class:`LockNotAcquired`."""
        clock = self.clock
        began = clock.monotonic()
        try:
            await self._acquire(began)
        finally:
            self.wait_ms = (clock.monotonic() - began) * 1000

    async def _acquire(self, began: float) -> None:
        clock = self.clock
        single = p.zero_wait_budget(self.lease_s)
        if self.single_cap is not None:
            single = min(single, self.single_cap)
        deadline = began + (self.wait_s or single)
        pause = p.fastest_poll(self.lease_s)
        choice: s.Choice = s.Join()
        joined_at = clock.monotonic()
        unknown = False
        last: BaseException | None = None
        while True:
            if isinstance(choice, s.Joined):  # an earlier join whose answer was lost
                await self._hand_over(joined_at)
                return
            if isinstance(choice, s.Join):
                joined_at = clock.monotonic()
                try:
                    await self._join(choice.observed, deadline)
                except ConditionFailed:
                    pass
                except (TimedOut, DynamoDBError) as error:
                    unknown, last = True, error
                else:
                    await self._hand_over(joined_at)
                    return
            elif isinstance(choice, s.FreeWriter):
                params = s.free_writer_params(self.table, choice.observed)
                try:
                    await self._send("UpdateItem", params, deadline)
                except (ConditionFailed, TimedOut, DynamoDBError) as error:
                    last = error
            elif self.wait_s == 0 or clock.monotonic() >= deadline:
                await self._undo_unknown_join(unknown)
                raise self._not_acquired(choice, last)
            else:
                left = deadline - clock.monotonic()
                await self._pause(min(left, pause * (0.8 + 0.4 * self._rng.random())), choice)
                pause = min(pause * GROWTH, p.poll_cap(self.lease_s))
            try:
                choice = await self._look(deadline)
            except (TimedOut, DynamoDBError) as error:
                last, choice = error, s.Wait(writer=False)

    async def _hand_over(self, joined_at: float) -> None:
        """Hold from the join sent at ``joined_at``, unless its answer came so late that less
        than the hand-over margin of validity is left (as a lock refuses its guard,
        ``protocol.handover_margin``): then leave the readers again and refuse."""
        self._hold(joined_at)
        now = self.clock.monotonic()
        left, margin = self._valid_until - now, p.handover_margin(self.lease_s)
        if left >= margin:
            return
        await self._leave_quietly(now + p.cleanup_budget(self.lease_s))
        raise LockUnavailable(
            f"read lock {self.key!r} in table {self.table!r} was not acquired: its join was "
            f"confirmed {now - joined_at:.2f} s after it was sent, with {max(left, 0.0):.2f} s "
            f"of its validity left, under the hand-over margin of {margin:g} s; it left the "
            f"readers again. A path to DynamoDB this slow cannot keep a {self.lease_s:g} s "
            "lease: fix the path, or raise lease_duration",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )

    async def _pause(self, seconds: float, choice: s.Wait) -> None:
        """Sleep, ending early when a guard of this client releases the row waited on (the
        writer row, or the lock row); a reader woken passes the wake on, as readers do
        not exclude each other."""
        key = s.writer_key(self.key) if choice.writer else self.key
        resource = (self.table, key)
        wake = self.observations.wait(resource, asyncio.get_running_loop().create_future())
        try:
            await sleep_or_wake(self.clock, seconds, [wake])
        finally:
            self.observations.discard_waiter(resource, wake)
        if wake.done() and not wake.cancelled():
            self.observations.wake_next(resource)

    async def _join(self, observed: p.LockRow | None, deadline: float) -> None:
        version = p.new_token()
        actions = s.join_actions(
            self.table, self.key, self.owner, version, p.lease_ms(self.lease_s), observed
        )
        self.writes += 1
        await self.store.transact(actions, self._limit(deadline))

    async def _look(self, deadline: float) -> s.Choice:
        """Read both rows; what to do next."""
        keys = (self.key, s.writer_key(self.key))
        self.reads += 1
        reply = await self.store.read_rows(self.table, keys, self._limit(deadline))
        now = self.clock.monotonic()
        main_item, writer_item = reply.items.get(keys[0]), reply.items.get(keys[1])
        main = self._parse(main_item, keys[0], p.PROTOCOL)
        writer = (
            None if p.is_free(writer_item) else self._parse(writer_item, keys[1], p.FENCED_PROTOCOL)
        )
        return s.choose(
            self.owner,
            main,
            s.readers_of(main_item),
            self._stale(main, now),
            writer,
            self._stale(writer, now),
        )

    def _parse(self, item: s.Item | None, key: str, protocol: int) -> p.LockRow | None:
        return (
            None
            if item is None
            else p.parse_row(item, table=self.table, key=key, protocol=protocol)
        )

    def _stale(self, row: p.LockRow | None, now: float) -> bool:
        """True when ``row`` stayed unchanged for its stored lease in our observation."""
        if row is None:
            return False
        first_seen = self.observations.observe((self.table, row.key), row.identity, now)
        return now >= first_seen + row.lease_ms / 1000

    async def _undo_unknown_join(self, unknown: bool) -> None:
        """A join whose answer never came may land later: leave the set, so that the last
        live reader can still delete the row."""
        if unknown:
            await self._leave_quietly(self.clock.monotonic() + p.cleanup_budget(self.lease_s))

    def _not_acquired(self, choice: s.Choice, last: BaseException | None) -> LockNotAcquired:
        if isinstance(choice, s.Wait) and choice.writer:
            held = "a writer holds it or waits for it (waiting writers go first)"
        else:
            held = "another owner (a writer or a pydynox lock) holds it"
        budget = (
            "wait_timeout=0 allows one attempt"
            if self.wait_s == 0
            else (f"the wait_timeout of {self.wait_s:g} s ran out")
        )
        error = LockNotAcquired(
            f"read lock {self.key!r} in table {self.table!r} was not acquired: {held} and "
            f"{budget}. Retry later or raise wait_timeout",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )
        error.__cause__ = last
        return error

    @property
    def requests(self) -> int:
        """Every request sent so far."""
        return self.reads + self.writes

    # --- holding ------------------------------------------------------------------

    def _hold(self, sent: float) -> None:
        self._valid_until = sent + p.validity_span(self.lease_s)
        self._renewing = asyncio.get_running_loop().create_task(self._renew(sent))

    def valid(self) -> bool:
        """True while the last confirmed write keeps us a reader."""
        return self.lost is None and self.clock.monotonic() < self._valid_until

    async def _renew(self, sent: float) -> None:
        interval = p.renew_interval(self.lease_s)
        while True:
            await self.clock.sleep(max(0.0, sent + interval - self.clock.monotonic()))
            while True:
                attempt = self.clock.monotonic()
                if attempt >= self._valid_until:
                    self._lose("no renewal was confirmed within the lease")
                    return
                params = s.renew_params(
                    self.table, self.key, self.owner, p.new_token(), p.lease_ms(self.lease_s)
                )
                try:
                    await self._send("UpdateItem", params, self._valid_until)
                except ConditionFailed:
                    self._lose("the shared row no longer lists this reader (taken over)")
                    return
                except (TimedOut, DynamoDBError):
                    await self.clock.sleep(p.renew_retry_interval(self.lease_s))
                    continue
                sent = attempt
                self.renewals += 1
                self._valid_until = sent + p.validity_span(self.lease_s)
                break

    def _lose(self, why: str) -> None:
        self.lost = LockLost(
            f"read lock {self.key!r} in table {self.table!r} was lost: {why}",
            table=self.table,
            key=self.key,
            owner=self.owner,
        )
        if self.on_lost is not None:
            run_callback(self.on_lost, self.lost)

    # --- release --------------------------------------------------------------

    async def release(self) -> None:
        """Leave the readers; the last one out deletes the main row."""
        if self._renewing is not None:
            self._renewing.cancel()
            self._renewing = None
        await self._leave_quietly(self.clock.monotonic() + p.cleanup_budget(self.lease_s))

    async def _leave_quietly(self, deadline: float) -> None:
        """Leave (a failure leaves the token in the set: the row then ends by observation)."""
        try:
            reply = await self._send(
                "UpdateItem", s.leave_params(self.table, self.key, self.owner), deadline
            )
            if not s.readers_of(reply.item):
                await self._send("DeleteItem", s.drop_params(self.table, self.key), deadline)
                self.observations.released((self.table, self.key))  # a local writer waits
        except (ConditionFailed, TimedOut, DynamoDBError, MalformedLockRow):
            return

    async def _send(self, operation: str, params: s.Item, deadline: float) -> Reply:
        self.writes += 1
        return await self.store.send(operation, params, self._limit(deadline))

    def _limit(self, deadline: float) -> Limit:
        left = max(0.0, deadline - self.clock.monotonic())
        return Limit(max(p.request_timeout(self.lease_s, left), 0.05), ignore_late)
