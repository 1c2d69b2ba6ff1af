"""Distributed semaphores: at most N holders of one key, across processes and machines.

Thin faces, as the locks are: each guard drives one permit lease of the engine
(``_engine/permits.py``), which picks a free or abandoned permit row. Once a
permit is held, the guard behaves exactly like a lock guard on that row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from ._calls import GuardedCalls, GuardOptions, OnLost, Options
from ._engine.holder import check_metadata
from ._engine.permits import PermitTarget
from ._engine.states import State
from .client import DynamoDBClient
from .keys import PERMIT_PREFIX, KeyTemplate, permit_keys
from .lock import DistributedLock, SyncDistributedLock, _Guard

__all__ = ["DistributedSemaphore", "SyncDistributedSemaphore", "distributed_semaphore"]

_UNHELD = frozenset({State.NEW, State.ACQUIRING, State.NOT_ACQUIRED, State.CANCELLED})


class _Permits(NamedTuple):
    """What a semaphore's options choose beside `GuardOptions`."""

    key: str
    permits: int
    fair: bool
    metadata: Mapping[str, Any] | None


class _SemaphoreOptions(Options):
    """A semaphore's options, taken alike by its guards and its decorator (`Options`)."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        key: str,
        permits: int,
        lease_duration: float = 30.0,
        wait_timeout: float = 35.0,
        on_lost: OnLost | None = None,
        fair: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        options = self._checked(client, table, lease_duration, wait_timeout, on_lost)
        self._made(options, _Permits(key, permits, fair, metadata))

    def _made(self, options: GuardOptions, chosen: _Permits) -> None:
        raise NotImplementedError


class _SemaphoreGuard(_SemaphoreOptions, _Guard):
    """What sync and async semaphore guards share: the permits and their keys."""

    # A semaphore has options of its own: its _made takes them, not a lock's.
    def _made(self, options: GuardOptions, chosen: _Permits) -> None:  # type: ignore[override]
        table, lease_s, wait_s, on_lost = options
        key, permits, fair, metadata = chosen
        keys = permit_keys(key, permits)
        # A fair semaphore has one queue for all its permits.
        queue = (f"{PERMIT_PREFIX}{key}",)
        self._lease = self._client._new_lease(
            table, key, lease_s, wait_s, on_lost, keys, fair=fair, queues=queue
        )
        self.set_metadata(metadata)  # checked here, before any request

    @property
    def _permit(self) -> PermitTarget:
        return cast(PermitTarget, self._lease.acquirer.target)

    @property
    def key(self) -> str:
        """The semaphore's key (its permits are rows at derived keys, see ``permit_key``)."""
        return self._permit.name

    @property
    def permits(self) -> int:
        """How many holders the semaphore admits at once."""
        return self._permit.permits

    @property
    def permit_key(self) -> str | None:
        """The row key of the permit this guard holds (``dynalease-permit:<i>:<key>``), or None.

        That row is an ordinary lock row: ``dynalease inspect --key`` shows it,
        and ``check_in`` conditions a transaction on it.
        """
        lease = self._lease
        return None if lease.state in _UNHELD else lease.key

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(table={self.table!r}, key={self.key!r}, "
            f"permits={self.permits}, state={self._lease.state.value!r})"
        )


class DistributedSemaphore(_SemaphoreGuard, DistributedLock):
    """An async context manager holding one of ``permits`` permits of a key, renewed.

    At most ``permits`` guards hold the same key at once, in any process;
    everything else (durations, ``LockNotAcquired`` when no permit is had within
    ``wait_timeout``, ``LockLost``, ``check_in``, metrics) is as for
    `DistributedLock`. Every caller must use the same number
    of permits (docs/semaphores.md says what happens otherwise).

    For example:

        async with DistributedSemaphore(client, table="locks", key="partner-api", permits=5):
            await call_partner()
    """


class SyncDistributedSemaphore(_SemaphoreGuard, SyncDistributedLock):
    """The sync form of `DistributedSemaphore`; waiting releases the GIL.

    For example:

        with SyncDistributedSemaphore(client, table="locks", key="reindex", permits=3):
            reindex()
    """


class distributed_semaphore(_SemaphoreOptions, GuardedCalls):
    """Run each call of a ``def`` or ``async def`` function holding one of ``permits`` permits.

    Takes the options of `SyncDistributedSemaphore` (each call's guard is made with them).
    ``key`` is a template over the function's arguments, as for `distributed_lock`; errors
    in it, and a bad ``permits`` or ``metadata``, are raised here, before any request.

    For example:

        @distributed_semaphore(client, table="locks", key="reindex:{index}", permits=3)
        def reindex(index: str) -> None:
            ...
    """

    _guards = (DistributedSemaphore, SyncDistributedSemaphore)

    def _made(self, options: GuardOptions, chosen: _Permits) -> None:
        key, permits, fair, metadata = chosen
        self._template = KeyTemplate(key)
        # A fixed key is checked whole now; else the count now, each resolved key at call time.
        permit_keys(self._template.resolve({}) if not self._template.placeholders else "k", permits)
        check_metadata(metadata)
        chosen_now = {"permits": permits, "fair": fair, "metadata": metadata}
        self._keywords = options._asdict() | chosen_now
