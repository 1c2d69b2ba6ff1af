"""Fair locks: waiters take the key in arrival order (docs/fairness.md).

``SyncFairLock(...)`` is ``SyncDistributedLock(..., fair=True)`` (and ``FairLock`` the
async form), with what a fair guard adds: how many waiters it found ahead. The guard
first waits its turn in its keys' queues (``_engine/queue.py``), then takes the key's
lock row as every lock does, so pydynox and unfair guards, which do not queue, still
exclude it and are excluded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self, cast

from ._engine.queue import QueueWaiter
from .client import DynamoDBClient
from .lock import DistributedLock, OnLost, SyncDistributedLock, _Guard

__all__ = ["FairLock", "SyncFairLock"]


class _FairGuard(_Guard):
    """A lock guard with ``fair=True``."""

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
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            client,
            table=table,
            key=key,
            lease_duration=lease_duration,
            wait_timeout=wait_timeout,
            on_lost=on_lost,
            fencing=fencing,
            keys=keys,
            fair=True,
            metadata=metadata,
        )

    @property
    def waiters_ahead_at_arrival(self) -> int | None:
        """How many waiters were queued ahead of this guard when it arrived.

        Counted on its most crowded key; None before it arrived.
        """
        return cast(QueueWaiter, self._lease.acquirer.line).ahead_at_arrival

    @property
    def lock(self) -> Self:
        """The guard itself (a lock guard: ``fencing_token``, ``check_in``...)."""
        return self


class FairLock(_FairGuard, DistributedLock):
    """An async context manager holding a key after every fair waiter that arrived earlier.

    Arrival is the moment DynamoDB appends the guard to the key's queue row (with
    ``keys=[...]``: to every key's, in one transaction); a waiter that gives up or dies
    leaves the queue. Every fair guard of a key must use the same ``lease_duration``.

    For example:

        async with FairLock(client, table="locks", key="report"):
            await build_report()
    """


class SyncFairLock(_FairGuard, SyncDistributedLock):
    """The sync form of `FairLock`.

    For example:

        with SyncFairLock(client, table="locks", key="report"):
            build_report()
    """
