"""Fair locks: waiters take the key in arrival order (docs/fairness.md).

``SyncFairLock(...)`` is ``SyncDistributedLock(..., fair=True)`` (and ``FairLock`` the
async form), with what a fair guard adds: how many waiters it found ahead. The guard
first waits its turn in its keys' queues (``_engine/queue.py``), then takes the key's
lock row as every lock does, so pydynox and unfair guards, which do not queue, still
exclude it and are excluded.
"""

from __future__ import annotations

from typing import Self, cast

from ._calls import Chosen, GuardOptions
from ._engine.queue import QueueWaiter
from .lock import DistributedLock, SyncDistributedLock, _Guard

__all__ = ["FairLock", "SyncFairLock"]


class _FairGuard(_Guard):
    """A lock guard with ``fair=True`` whatever its ``fair`` says."""

    def _made(self, options: GuardOptions, chosen: Chosen) -> None:
        super()._made(options, chosen._replace(fair=True))

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
