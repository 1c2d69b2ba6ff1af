"""Leader election: one leader among N candidates, with terms that fence and observers.

The vocabulary is etcd's and kazoo's: candidates ``campaign``; the winner leads
until it ``resign``\\ s, crashes or loses its lease, and a standby then takes over;
anyone reads the ``leader()`` or ``observe``\\ s changes without campaigning. The
leader's row is a fenced lock row at the election's name (docs/election.md): a
leadership is a fenced lock guard, its ``term`` the guard's fencing token, so the
fencing helpers (`dynalease.fencing`) refuse a deposed leader's writes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Self, TypeVar

from . import _election
from ._calls import OnLost, check_options
from ._election import Leader, Sightings, check_value, leader_of, read_leader_item
from ._engine.protocol import MAX_DURATION_S, poll_cap
from .client import DynamoDBClient
from .exceptions import LockLost, LockNotAcquired
from .keys import validate_key
from .lock import DistributedLock, SyncDistributedLock

__all__ = ["Election", "Leader", "Leadership", "SyncElection", "SyncLeadership"]

R = TypeVar("R")


class _Election:
    """What both faces share: the settings, checked before any request, and the reads."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        name: str,
        lease_duration: float = 30.0,
        poll_interval: float | None = None,
        on_lost: OnLost | None = None,
    ) -> None:
        lease_s = check_options(client, table, lease_duration, 0.0, on_lost, True).lease_duration
        self._client, self.table, self.lease_duration = client, table, lease_s
        self.name = validate_key(name, parameter="name")
        if poll_interval is None:
            poll_interval = poll_cap(lease_s)
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, int | float):
            raise TypeError(f"poll_interval must be seconds, got {type(poll_interval).__name__}")
        if not 0.05 <= poll_interval <= lease_s:
            raise ValueError(
                f"poll_interval must be from 0.05 s to the lease ({lease_s:g} s), got "
                f"{poll_interval!r}: observers read the row once per interval"
            )
        self.poll_interval = float(poll_interval)
        self._on_lost = on_lost

    def _lock_options(self, wait_timeout: float | None) -> dict[str, Any]:
        if wait_timeout is not None:
            check_options(self._client, self.table, self.lease_duration, wait_timeout, None)
        return {
            "table": self.table,
            "key": self.name,
            "lease_duration": self.lease_duration,
            # Campaigning without a bound is attempts of a day each, one after another.
            "wait_timeout": MAX_DURATION_S if wait_timeout is None else wait_timeout,
            "on_lost": self._on_lost,
            "fencing": True,
        }

    def _read(self) -> Leader | None:
        item = read_leader_item(self._client, self.table, self.name)
        return leader_of(item, table=self.table, name=self.name)

    def _sightings(self) -> tuple[Sightings, Callable[[], dict[str, Any] | None]]:
        return Sightings(self.table, self.name), lambda: read_leader_item(
            self._client, self.table, self.name
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table!r}, name={self.name!r})"


class _Leadership:
    """What both forms of a won term share: the term, the lease's state, the value."""

    def __init__(self, election: _Election, lock: SyncDistributedLock | DistributedLock) -> None:
        self._election, self._lock = election, lock
        self.since = time.time()
        self._resigned = False

    @property
    def lock(self) -> SyncDistributedLock | DistributedLock:
        """The fenced lock guard this term holds (for ``check_in`` and transactions)."""
        return self._lock

    @property
    def term(self) -> int:
        """This term's fencing token: larger than every earlier leader's."""
        return self._lock.fencing_token

    @property
    def owner(self) -> str:
        """This candidate's owner token, as the leader's row and ``Leader.owner`` show it."""
        return self._lock.owner

    @property
    def lost(self) -> bool:
        """True once leadership is known to be gone (expired, taken over, resigned)."""
        return self._resigned or self._lock.lost

    @property
    def time_left(self) -> float:
        """Seconds of validity left before this leader must count itself deposed."""
        return self._lock.time_left

    def raise_if_lost(self) -> None:
        """Raise `LockLost` unless this term still leads."""
        self._lock.raise_if_lost()

    def _publish(self, value: object) -> None:
        election = self._election
        _election.publish(
            election._client,
            election.table,
            election.name,
            self.owner,
            self.term,
            self.since,
            check_value(value),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._election.name!r}, term={self.term})"


class SyncLeadership(_Leadership):
    """A won term (sync): renewed in the background until `resign` or loss.

    A context manager: leaving the block resigns, so a crash of the work inside it
    (an exception) lets a standby take over at its next poll.
    """

    _lock: SyncDistributedLock

    def publish(self, value: str | None) -> None:
        """Publish ``value`` (at most 512 characters) for ``leader()`` and observers.

        Raises `LockLost` if this term no longer leads.
        """
        self._publish(value)

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds until leadership is lost; True if it was."""
        return self._resigned or self._lock.wait_lost(timeout)

    def resign(self) -> None:
        """Give leadership up now (the row is freed; a standby leads at its next poll).

        Idempotent; a term already lost resigns quietly.
        """
        if not self._resigned:
            self._resigned = True
            with contextlib.suppress(LockLost):
                self._lock.__exit__(None, None, None)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        if not self._resigned:
            self._resigned = True
            self._lock.__exit__(exc_type, exc, traceback)


class Leadership(_Leadership):
    """A won term (async): the async form of `SyncLeadership`."""

    _lock: DistributedLock

    async def publish(self, value: str | None) -> None:
        """Publish ``value`` (at most 512 characters) for ``leader()`` and observers."""
        await self._election._client._in_pool(lambda: self._publish(value))

    async def until_lost(self) -> None:
        """Return when leadership is lost."""
        await self._lock.until_lost()

    async def resign(self) -> None:
        """Give leadership up now; idempotent, quiet for a term already lost."""
        if not self._resigned:
            self._resigned = True
            with contextlib.suppress(LockLost):
                await self._lock.__aexit__(None, None, None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        if not self._resigned:
            self._resigned = True
            await self._lock.__aexit__(exc_type, exc, traceback)


class SyncElection(_Election):
    """An election (sync): campaign, read the leader, observe changes.

    Every candidate and observer of one election uses the same ``table``, ``name``
    and ``lease_duration``. Failover after a crash takes about ``lease_duration``
    plus one poll (docs/election.md).

    For example:

        election = SyncElection(client, table="locks", name="scheduler")
        with election.campaign(value="10.0.0.7:8080") as leadership:
            run_scheduler(fencing_token=leadership.term)
    """

    def campaign(
        self, value: str | None = None, *, wait_timeout: float | None = None
    ) -> SyncLeadership:
        """Block until this candidate leads; publish ``value`` with the term.

        ``wait_timeout=None`` campaigns until it wins; a number bounds the wait as a
        lock's does (``0``: one attempt), raising
        `LockNotAcquired`.
        """
        check_value(value)
        options = self._lock_options(wait_timeout)
        while True:
            lock = SyncDistributedLock(self._client, **options)
            try:
                lock.__enter__()
            except LockNotAcquired:
                if wait_timeout is not None:
                    raise
                continue
            leadership = SyncLeadership(self, lock)
            try:
                leadership.publish(value)
            except LockLost:
                leadership.resign()
                continue
            return leadership

    def lead(
        self,
        work: Callable[[SyncLeadership], R],
        value: str | None = None,
        *,
        wait_timeout: float | None = None,
    ) -> R:
        """Campaign, run ``work(leadership)`` as leader, resign when it returns or raises.

        A crash of ``work`` resigns at once, so a standby leads at its next poll.
        """
        with self.campaign(value, wait_timeout=wait_timeout) as leadership:
            return work(leadership)

    def leader(self) -> Leader | None:
        """The current leader as its row shows it, or None; campaigns for nothing.

        One read cannot tell a crashed leader whose lease has not run out yet:
        `observe` can.
        """
        return self._read()

    def observe(
        self, callback: Callable[[Leader | None], object], *, stop: threading.Event
    ) -> None:
        """Call ``callback`` with the leader now and on every change, until ``stop`` is set.

        Reads once per ``poll_interval``; a change between two reads shows as the
        later state, so the last state is never missed. None means no leader (the row is
        free, or unchanged for its whole lease: its leader is gone).
        """
        sightings, read = self._sightings()
        last: object = object()
        while not stop.is_set():
            state = sightings.state(read())
            if state != last:
                last = state
                callback(state)
            stop.wait(self.poll_interval)


class Election(_Election):
    """An election (async): the async form of `SyncElection`.

    For example:

        election = Election(client, table="locks", name="scheduler")
        await election.lead(run_scheduler, value="10.0.0.7:8080")
    """

    async def campaign(
        self, value: str | None = None, *, wait_timeout: float | None = None
    ) -> Leadership:
        """Wait until this candidate leads (see `SyncElection.campaign`)."""
        check_value(value)
        options = self._lock_options(wait_timeout)
        while True:
            lock = DistributedLock(self._client, **options)
            try:
                await lock.__aenter__()
            except LockNotAcquired:
                if wait_timeout is not None:
                    raise
                continue
            leadership = Leadership(self, lock)
            try:
                await leadership.publish(value)
            except LockLost:
                await leadership.resign()
                continue
            return leadership

    async def lead(
        self,
        work: Callable[[Leadership], Awaitable[R]],
        value: str | None = None,
        *,
        wait_timeout: float | None = None,
    ) -> R:
        """Campaign, run ``work(leadership)`` as a task while leading, then resign.

        Loss cancels the task and raises `LockLost`; a
        crash of the task resigns at once (a standby leads at its next poll) and
        its exception is raised.
        """
        import asyncio

        leadership = await self.campaign(value, wait_timeout=wait_timeout)
        async with leadership:
            task = asyncio.ensure_future(work(leadership))
            lost = asyncio.ensure_future(leadership.until_lost())
            try:
                await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                lost.cancel()
                if not task.done():
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if task.cancelled():
                leadership.raise_if_lost()
            return task.result()

    async def leader(self) -> Leader | None:
        """The current leader as its row shows it, or None (see `SyncElection.leader`)."""
        return await self._client._in_pool(self._read)

    async def observe(self) -> AsyncIterator[Leader | None]:
        """Yield the leader now and on every change, in order (see `SyncElection.observe`).

        For example:

            async for leader in election.observe():
                print(leader.value if leader else "no leader")
        """
        import asyncio

        sightings, read = self._sightings()
        last: object = object()
        while True:
            state = sightings.state(await self._client._in_pool(read))
            if state != last:
                last = state
                yield state
            await asyncio.sleep(self.poll_interval)
