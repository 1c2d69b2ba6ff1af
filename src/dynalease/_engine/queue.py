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
from .lease import Lease
from .loop import sleep_or_wake
from .requests import ignore_late
from .spec import ClientParts
from .store import ConditionFailed, Limit, TimedOut

__all__ = ["QueueWaiter", "get_in_line"]


def get_in_line(
    lease: Lease, fair: object, parts: ClientParts, queues: tuple[str, ...] = ()
) -> None:
    """``fair=True``: ``lease``'s acquisition first waits its turn in the queues of its keys
    (or of ``queues``: a semaphore's one name for all its permits; docs/fairness.md). Bad
    input is refused here, before any request."""
    if not isinstance(fair, bool):
        raise TypeError(
            f"fair must be True or False, got {type(fair).__name__}; fair=True serves "
            "waiters in arrival order (docs/fairness.md)"
        )
    for name in lease.keys:
        if name.startswith(q.QUEUE_PREFIX):
            raise ValueError(
                f"key {name!r} starts with {q.QUEUE_PREFIX!r}, which is reserved for the queue "
                "rows of fair locks; use another key"
            )
    if fair:
        lease.acquirer.line = QueueWaiter(
            parts, table=lease.table, keys=queues or lease.keys, lease_s=lease.lease_s
        )


#: How the pause between reads of the queue grows while a waiter waits.
GROWTH = 1.6


class QueueWaiter:
    """One fair guard's place in the queue of each of ``keys`` (one key, or a multi-key
    guard's every key).

    A multi-key waiter joins every queue in one transaction. DynamoDB's transactions are
    serializable with each other and with single-item writes, so any two waiters are in
    the same order on every queue they share: the earliest of them is first on all its
    keys, and no two waiters wait for each other.
    """

    def __init__(
        self, parts: ClientParts, *, table: str, keys: tuple[str, ...], lease_s: float
    ) -> None:
        self.store, self.observations, self.clock = parts
        self.table, self.keys, self.lease_s = table, keys, lease_s
        #: This waiter's entry in each queue.
        self.token = p.new_token()
        #: A fair acquisition's turn comes after a request at least.
        self.immediate = False
        self.reads = self.writes = 0
        #: Waiters ahead of us when we joined, on the most crowded key (0: none).
        self.ahead_at_arrival: int | None = None
        self._beating: asyncio.Task[None] | None = None
        self._rng = random.Random(random.getrandbits(64))

    def _resource(self, key: str) -> tuple[str, str]:
        return (self.table, q.queue_key(key))

    async def wait_turn(self, deadline: float, single: bool = False) -> bool:
        """Join, then wait until first in every queue (True), or until ``deadline`` (False,
        still queued: :meth:`leave` takes us out); a ``single`` attempt does not wait."""
        try:
            items = await self._join(deadline)
        except TimedOut:
            return False  # it may have landed: leave() looks
        self._beating = asyncio.get_running_loop().create_task(self._beat())
        pause = p.fastest_poll(self.lease_s)
        while True:
            now = self.clock.monotonic()
            choices = {key: self._choose(key, items.get(key), now) for key in self.keys}
            if self.ahead_at_arrival is None:
                self.ahead_at_arrival = max(
                    (c.ahead for c in choices.values() if isinstance(c, q.Wait)), default=0
                )
            if all(isinstance(choice, q.Head) for choice in choices.values()):
                return True
            if any(isinstance(choice, q.Out) for choice in choices.values()):
                # Our beats stopped landing: out of every queue, and in again at the end.
                await self._leave_all(deadline)
                items = await self._join(deadline)
                continue
            removals = [(k, c) for k, c in choices.items() if isinstance(c, q.Remove)]
            for key, choice in removals:
                _, beats = q.queue_of(items.get(key))
                params = q.remove_params(
                    self.table, key, choice.at, choice.token, beats.get(choice.token)
                )
                await self._quietly(params, deadline)
            if not removals:
                if now >= deadline or single:
                    return False
                wait = min(deadline - now, pause * (0.8 + 0.4 * self._rng.random()))
                await self._pause(wait)
                pause = min(pause * GROWTH, p.poll_cap(self.lease_s))
            try:
                items = await self._read(deadline)
            except (TimedOut, DynamoDBError):
                if self.clock.monotonic() >= deadline:
                    return False

    def _choose(self, key: str, item: q.Item | None, now: float) -> q.Choice:
        tokens, beats = q.queue_of(item)
        stale = [self._stale(key, token, beats.get(token), now) for token in tokens]
        return q.choose(self.token, tokens, stale)

    async def leave(self) -> None:
        """Out of every queue (served, or giving up); wakes this client's next waiters."""
        if self._beating is not None:
            self._beating.cancel()
            self._beating = None
        await self._leave_all(self.clock.monotonic() + p.cleanup_budget(self.lease_s))
        for key in self.keys:
            self.observations.released(self._resource(key))

    async def _leave_all(self, deadline: float) -> None:
        for _ in range(3):  # an entry moves up as others leave: find it again
            try:
                items = await self._read(deadline)
            except (TimedOut, DynamoDBError):
                return  # the entries stay: their beats stop, and they end by observation
            queued = [
                (key, tokens.index(self.token))
                for key in self.keys
                if self.token in (tokens := q.queue_of(items.get(key))[0])
            ]
            if not queued:
                return
            removed = [
                await self._quietly(
                    q.remove_params(self.table, key, index, self.token, None), deadline
                )
                for key, index in queued
            ]
            if all(removed):
                return

    async def _join(self, deadline: float) -> dict[str, q.Item]:
        """Into every queue at once; the queues as they are after it."""
        self.writes += 1
        beat = p.new_token()
        joins = [q.join_params(self.table, key, self.token, beat) for key in self.keys]
        if len(joins) == 1:
            reply = await self.store.send("UpdateItem", joins[0], self._limit(deadline))
            return {} if reply.item is None else {self.keys[0]: reply.item}
        await self.store.transact([q.as_action(join) for join in joins], self._limit(deadline))
        return await self._read(deadline)

    async def _read(self, deadline: float) -> dict[str, q.Item]:
        """Every queue row, by key."""
        self.reads += 1
        rows = tuple(q.queue_key(key) for key in self.keys)
        reply = await self.store.read_rows(self.table, rows, self._limit(deadline))
        return {
            key: reply.items[row]
            for key, row in zip(self.keys, rows, strict=True)
            if row in reply.items
        }

    async def _quietly(self, params: q.Item, deadline: float) -> bool:
        """Send ``params``; False when it failed (the next read shows the queue as it is)."""
        self.writes += 1
        try:
            await self.store.send("UpdateItem", params, self._limit(deadline))
        except (ConditionFailed, TimedOut, DynamoDBError):
            return False
        return True

    async def _beat(self) -> None:
        interval = p.renew_interval(self.lease_s)
        while True:
            await self.clock.sleep(interval)
            deadline = self.clock.monotonic() + interval
            beat = p.new_token()
            for key in self.keys:
                params = q.beat_params(self.table, key, self.token, beat)
                self.writes += 1
                try:
                    await self.store.send("UpdateItem", params, self._limit(deadline))
                except (ConditionFailed, TimedOut, DynamoDBError):
                    continue  # out of that queue (the wait rejoins), or the next beat lands

    def _stale(self, key: str, token: str, beat: str | None, now: float) -> bool:
        """True when ``token``'s beat stayed unchanged for the lease in our observation."""
        if token == self.token:
            return False
        resource = (self.table, f"{q.queue_key(key)}#{token}")
        identity = (token, beat or "", p.lease_ms(self.lease_s))
        return now >= self.observations.observe(resource, identity, now) + self.lease_s

    async def _pause(self, seconds: float) -> None:
        """Sleep, ending early when a waiter of this client leaves a queue (passed on)."""
        loop = asyncio.get_running_loop()
        wakes = {
            key: self.observations.wait(self._resource(key), loop.create_future())
            for key in self.keys
        }
        try:
            await sleep_or_wake(self.clock, seconds, list(wakes.values()))
        finally:
            for key, wake in wakes.items():
                self.observations.discard_waiter(self._resource(key), wake)
        for key, wake in wakes.items():
            if wake.done() and not wake.cancelled():
                self.observations.wake_next(self._resource(key))

    def _limit(self, deadline: float) -> Limit:
        left = max(0.0, deadline - self.clock.monotonic())
        return Limit(max(p.request_timeout(self.lease_s, left), 0.05), ignore_late)
