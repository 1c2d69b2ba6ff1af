"""Fair locks: waiters take the key in arrival order (docs/fairness.md).

A fair guard joins the key's queue row (``_engine/queue_rows.py``), waits until it is
first, then takes the key's lock row as an ordinary lock guard (so pydynox and unfair
guards, which do not queue, still exclude it and are excluded), and leaves the queue.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Self

from ._engine.clock import SYSTEM_CLOCK
from ._engine.protocol import wait_left
from ._engine.queue import QueueWaiter
from ._engine.queue_rows import QUEUE_PREFIX
from ._engine.store import TimedOut
from ._keyset import key_set
from .client import DynamoDBClient
from .exceptions import GuardReused, LockNotAcquired
from .lock import DistributedLock, OnLost, SyncDistributedLock, _check_options
from .metrics import LockMetrics

__all__ = ["FairLock", "SyncFairLock"]


class _FairGuard:
    """What sync and async fair guards share: the place in the queue, then the lock."""

    _lock_class: type[DistributedLock] | type[SyncDistributedLock]

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        key: str | None = None,
        lease_duration: float = 30.0,
        wait_timeout: float = 35.0,
        on_lost: OnLost | None = None,
        fencing: bool = False,
        keys: Sequence[str] | None = None,
    ) -> None:
        lease_s, wait_s = _check_options(
            client, table, lease_duration, wait_timeout, on_lost, fencing
        )
        names = key_set(key, keys, fencing=fencing)
        for name in names:
            if name.startswith(QUEUE_PREFIX):
                raise ValueError(
                    f"key {name!r} starts with {QUEUE_PREFIX!r}, which is reserved for the "
                    "queue rows of fair locks; use another key"
                )
        client._check_process()
        self._client, self._table, self._key, self._keys = client, table, names[0], names
        self._options: dict[str, Any] = {
            "lease_duration": lease_s,
            "on_lost": on_lost,
            "fencing": fencing,
            **({"keys": names} if len(names) > 1 else {"key": names[0]}),
        }
        self._wait_s = wait_s
        self._waiter = QueueWaiter(
            store=client._lock_store,
            observations=client._observations,
            clock=SYSTEM_CLOCK,
            table=table,
            keys=names,
            lease_s=lease_s,
        )
        self._lock: Any = None
        self._began = 0.0

    @property
    def table(self) -> str:
        """The lock table."""
        return self._table

    @property
    def key(self) -> str:
        """The key locked (with ``keys``: the first of them)."""
        return self._key

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key locked: ``(key,)``, or the ``keys`` given."""
        return self._keys

    @property
    def lock(self) -> SyncDistributedLock | DistributedLock:
        """The lock guard taken once first in the queue (its ``fencing_token``, ``check_in``,
        ``raise_if_lost``...); ``RuntimeError`` before."""
        if self._lock is None:
            raise RuntimeError("the fair guard has not reached the key yet: use it inside")
        lock: SyncDistributedLock | DistributedLock = self._lock
        return lock

    @property
    def waiters_ahead_at_arrival(self) -> int | None:
        """How many waiters were queued ahead when this guard arrived (None before)."""
        return self._waiter.ahead_at_arrival

    @property
    def metrics(self) -> LockMetrics:
        """The lock guard's metrics, with the queue's requests added."""
        waiter = self._waiter
        base = LockMetrics() if self._lock is None else self._lock.metrics
        wait_ms = (time.monotonic() - self._began) * 1000 if self._lock is None else None
        return LockMetrics(
            read_requests=base.read_requests + waiter.reads,
            write_requests=base.write_requests + waiter.writes,
            renewals=base.renewals,
            wait_ms=base.wait_ms if wait_ms is None else wait_ms,
            lost=base.lost,
        )

    def _begin(self) -> tuple[float, float]:
        """The start and the deadline of the wait."""
        if self._began:
            raise GuardReused(
                f"this fair guard for {self._key!r} was already used: create a new guard"
            )
        self._began = time.monotonic()
        return self._began, self._began + self._wait_s

    def _next(self) -> Any:
        """The lock guard, waiting only for what is left of ``wait_timeout``."""
        left = wait_left(self._wait_s, time.monotonic() - self._began)
        self._lock = self._lock_class(
            self._client, table=self._table, wait_timeout=left, **self._options
        )
        return self._lock

    def _not_first(self, cause: BaseException | None = None) -> LockNotAcquired:
        error = LockNotAcquired(
            f"fair lock {self._key!r} in table {self._table!r} was not acquired: waiters "
            f"that arrived earlier were still ahead when the wait_timeout of {self._wait_s:g} s "
            "ran out. Retry later or raise wait_timeout",
            table=self._table,
            key=self._key,
            owner=self._waiter.token,
        )
        error.__cause__ = cause
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self._table!r}, key={self._key!r})"


class FairLock(_FairGuard):
    """An async context manager holding a key after every waiter that arrived earlier.

    ``keys=[...]`` waits in the queue of every key (joined in one transaction) and then
    takes them all at once, as a multi-key lock does. Arrival is the moment DynamoDB
    appends the guard to the key's queue row; a waiter that
    gives up or dies leaves the queue. Every fair guard of a key must use the same
    ``lease_duration``. pydynox and unfair guards do not queue: they still exclude a
    fair holder and are excluded, but may take the key between two fair waiters.

    Example::

        async with FairLock(client, table="locks", key="report") as fair:
            await build_report()
    """

    _lock_class = DistributedLock

    async def __aenter__(self) -> Self:
        _, deadline = self._begin()
        run = self._client._runtime().run_async
        try:
            first = await run(self._waiter.wait_turn(deadline))
            if not first:
                raise self._not_first()
            await self._next().__aenter__()
        except TimedOut as error:
            raise self._not_first(error) from error
        finally:
            await run(self._waiter.leave(), shield=True)
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        await self._lock.__aexit__(exc_type, exc, traceback)


class SyncFairLock(_FairGuard):
    """The sync form of :class:`FairLock`.

    Example::

        with SyncFairLock(client, table="locks", key="report"):
            build_report()
    """

    _lock_class = SyncDistributedLock

    def __enter__(self) -> Self:
        _, deadline = self._begin()
        runtime = self._client._runtime()
        try:
            if not runtime.run(self._waiter.wait_turn(deadline)):
                raise self._not_first()
            self._next().__enter__()
        except TimedOut as error:
            raise self._not_first(error) from error
        finally:
            runtime.run(self._waiter.leave())
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self._lock.__exit__(exc_type, exc, traceback)
