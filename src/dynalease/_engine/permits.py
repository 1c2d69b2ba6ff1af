"""Semaphores: one lease on whichever of N permit rows is free (or abandoned).

A semaphore guard's lease is an ordinary :class:`.lease.Lease` whose
acquisition aims at a :class:`PermitTarget` instead of one key. Each
permit is a protocol-1 row of its own, so once one is held, renewal, release,
``check_in`` and the lost signal are the lock's, unchanged; the lease's ``key``
is the permit it won. Only the choice of a permit lives here, once for the sync
and async faces, through the lock's acquire driver:

1. create a row at one permit chosen at random (uncontended: one write);
2. when that fails, read every permit in one strongly consistent
   ``BatchGetItem`` (keys it leaves unprocessed are asked again);
3. a free permit: create it; all held: observe each row in the client's
   observation cache and take over one that stayed unchanged for its stored
   lease; otherwise poll again with the backoff series, within the budget
   (:data:`.attempts.PERMIT_RULES`).

A write whose outcome was unknown is retried on the same permit when that one
is free, so a late landing cannot leave a second row of ours behind; a guard
that gives up deletes what it may have written on every permit it tried.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from ..exceptions import LockNotAcquired
from .base import LeaseCore
from .requests import Requests
from .targets import not_acquired

if TYPE_CHECKING:
    from .attempts import Item, Rules

__all__ = ["PermitTarget"]


class PermitTarget:
    """A semaphore's acquisition: one of ``permit_keys``, the first chosen at random."""

    advice = "Retry later, raise wait_timeout or the number of permits"
    together: tuple[str, ...] = ()

    def __init__(self, name: str, permit_keys: tuple[str, ...]) -> None:
        #: The semaphore's own key (each permit is a row at a key of its own).
        self.name = name
        self.first_key = permit_keys[random.randrange(len(permit_keys))]
        self.wake_keys = permit_keys

    @property
    def rules(self) -> Rules:
        """A semaphore's: a failed write is followed by a read of every permit."""
        from .attempts import PERMIT_RULES

        return PERMIT_RULES

    @property
    def permits(self) -> int:
        """How many permits the semaphore has."""
        return len(self.wake_keys)

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        """Every permit row (None when free), from one ``BatchGetItem`` (more if unprocessed)."""
        return await requests.read_rows(self.wake_keys, deadline)

    def held(self, owners: tuple[str, ...]) -> str:
        """``all are held (by 2 other owners)``: other holders' tokens stay out of messages."""
        if not owners:
            return "all are held (by rows that are not lock rows)"
        return f"all are held (by {len(owners)} other owner{'s' if len(owners) > 1 else ''})"

    def not_acquired(
        self, core: LeaseCore, why: str, cause: BaseException | None = None
    ) -> LockNotAcquired:
        """``semaphore <name> in table <table> was not acquired (none of its N permits)``."""
        subject = (
            f"semaphore {self.name!r} in table {core.table!r} was not acquired "
            f"(none of its {self.permits} permits)"
        )
        return not_acquired(core, f"{subject}: {why}", self.name, cause)
