"""A fair waiter: joins the key's queue, beats while it waits, leaves once served.

Runs on the runtime loop; :mod:`.queue_rows` decides. Dead waiters ahead are found by
observation only: a beat unchanged for the lease in the client's observation cache.
"""

from __future__ import annotations

import asyncio
import random

from ..exceptions import DynamoDBError
from . import protocol as p
from . import queue_rows as q
from .clock import Clock
from .loop import sleep_or_wake
from .observations import Observations
from .store import ConditionFailed, Limit, LockStore, TimedOut

__all__ = ["QueueWaiter"]

#: How the pause between reads of the queue grows while a waiter waits.
GROWTH = 1.6


class QueueWaiter:
    """One fair guard's place in the queue of ``key``."""

    def __init__(
        self,
        *,
        store: LockStore,
        observations: Observations,
        clock: Clock,
        table: str,
        key: str,
        lease_s: float,
    ) -> None:
        self.store, self.observations, self.clock = store, observations, clock
        self.table, self.key, self.lease_s = table, key, lease_s
        #: This waiter's entry in the queue.
        self.token = p.new_token()
        self.reads = self.writes = 0
        #: Waiters ahead of us when we joined (0: the queue was empty).
        self.ahead_at_arrival: int | None = None
        self._beating: asyncio.Task[None] | None = None
        self._rng = random.Random(random.getrandbits(64))

    @property
    def resource(self) -> tuple[str, str]:
        return (self.table, q.queue_key(self.key))

    async def wait_turn(self, deadline: float) -> bool:
        """Join, then wait until first in the queue (True), or until ``deadline`` (False,
        still queued: :meth:`leave` takes us out)."""
        item = await self._join(deadline)
        self._beating = asyncio.get_running_loop().create_task(self._beat())
        pause = p.fastest_poll(self.lease_s)
        while True:
            tokens, beats = q.queue_of(item)
            now = self.clock.monotonic()
            stale = [self._stale(token, beats.get(token), now) for token in tokens]
            choice = q.choose(self.token, tokens, stale)
            if self.ahead_at_arrival is None:
                self.ahead_at_arrival = len(tokens) - 1
            if isinstance(choice, q.Head):
                return True
            if isinstance(choice, q.Out):  # our beats stopped landing: in again, at the end
                item = await self._join(deadline)
                continue
            if isinstance(choice, q.Remove):
                params = q.remove_params(
                    self.table, self.key, choice.at, choice.token, beats.get(choice.token)
                )
                await self._quietly(params, deadline)
            elif now >= deadline:
                return False
            else:
                wait = min(deadline - now, pause * (0.8 + 0.4 * self._rng.random()))
                await self._pause(wait)
                pause = min(pause * GROWTH, p.poll_cap(self.lease_s))
            try:
                item = await self._read(deadline)
            except (TimedOut, DynamoDBError):
                if self.clock.monotonic() >= deadline:
                    return False

    async def leave(self) -> None:
        """Out of the queue (served, or giving up); wakes this client's next waiter."""
        if self._beating is not None:
            self._beating.cancel()
            self._beating = None
        deadline = self.clock.monotonic() + p.cleanup_budget(self.lease_s)
        for _ in range(3):  # the entry moves up as others leave: find it again
            try:
                tokens, _ = q.queue_of(await self._read(deadline))
                if self.token not in tokens:
                    break
                index = tokens.index(self.token)
                params = q.remove_params(self.table, self.key, index, self.token, None)
                self.writes += 1
                await self.store.send("UpdateItem", params, self._limit(deadline))
                break
            except ConditionFailed:
                continue
            except (TimedOut, DynamoDBError):
                break  # the entry stays: its beats stop, and it ends by observation
        self.observations.released(self.resource)

    async def _join(self, deadline: float) -> q.Item | None:
        self.writes += 1
        params = q.join_params(self.table, self.key, self.token, p.new_token())
        reply = await self.store.send("UpdateItem", params, self._limit(deadline))
        return reply.item

    async def _read(self, deadline: float) -> q.Item | None:
        self.reads += 1
        return (
            await self.store.read(self.table, q.queue_key(self.key), self._limit(deadline))
        ).item

    async def _quietly(self, params: q.Item, deadline: float) -> None:
        self.writes += 1
        try:
            await self.store.send("UpdateItem", params, self._limit(deadline))
        except (ConditionFailed, TimedOut, DynamoDBError):
            return  # the next read shows the queue as it is

    async def _beat(self) -> None:
        interval = p.renew_interval(self.lease_s)
        while True:
            await self.clock.sleep(interval)
            deadline = self.clock.monotonic() + interval
            params = q.beat_params(self.table, self.key, self.token, p.new_token())
            self.writes += 1
            try:
                await self.store.send("UpdateItem", params, self._limit(deadline))
            except ConditionFailed:
                return  # out of the queue: the wait rejoins when it sees it
            except (TimedOut, DynamoDBError):
                continue

    def _stale(self, token: str, beat: str | None, now: float) -> bool:
        """True when ``token``'s beat stayed unchanged for the lease in our observation."""
        if token == self.token:
            return False
        resource = (self.table, f"{q.queue_key(self.key)}#{token}")
        identity = (token, beat or "", p.lease_ms(self.lease_s))
        return now >= self.observations.observe(resource, identity, now) + self.lease_s

    async def _pause(self, seconds: float) -> None:
        """Sleep, ending early when a waiter of this client leaves the queue (passed on)."""
        resource = self.resource
        wake = self.observations.wait(resource, asyncio.get_running_loop().create_future())
        try:
            await sleep_or_wake(self.clock, seconds, [wake])
        finally:
            self.observations.discard_waiter(resource, wake)
        if wake.done() and not wake.cancelled():
            self.observations.wake_next(resource)

    def _limit(self, deadline: float) -> Limit:
        left = max(0.0, deadline - self.clock.monotonic())
        return Limit(max(p.request_timeout(self.lease_s, left), 0.05), _ignore)


def _ignore(late: object) -> None:
    """A late answer needs nothing: the next read shows the queue."""
