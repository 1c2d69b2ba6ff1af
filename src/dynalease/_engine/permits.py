"""Semaphores: one lease on whichever of N permit rows is free (or abandoned).

Each permit is a protocol-1 row of its own, so once one is held the lease is a
lock's on that key; only the choice of a permit lives here (docs/semaphores.md).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from ..exceptions import LockNotAcquired
from .base import LeaseCore
from .targets import not_acquired

if TYPE_CHECKING:
    from .attempts import Item, Rules
    from .requests import Requests

__all__ = ["PermitTarget"]


class PermitTarget:
    """A semaphore's acquisition: one of ``permit_keys``, the first chosen at random."""

    advice = "Retry later, raise wait_timeout or the number of permits"

    def __init__(self, name: str, permit_keys: tuple[str, ...]) -> None:
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
        return len(self.wake_keys)

    def rows(self, key: str) -> tuple[str, ...]:
        """A permit is one row."""
        return (key,)

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        """Every permit row (None when free)."""
        return await requests.read_rows(self.wake_keys, deadline)

    def held(self, owners: tuple[str, ...]) -> str:
        """Other holders' tokens stay out of messages: only their count."""
        if not owners:
            return "all are held (by rows that are not lock rows)"
        return f"all are held (by {len(owners)} other owner{'s' if len(owners) > 1 else ''})"

    def not_acquired(
        self,
        core: LeaseCore,
        why: str,
        cause: BaseException | None = None,
        kind: type[LockNotAcquired] = LockNotAcquired,
    ) -> LockNotAcquired:
        subject = (
            f"semaphore {self.name!r} in table {core.table!r} was not acquired "
            f"(none of its {self.permits} permits)"
        )
        return not_acquired(core, f"{subject}: {why}", self.name, cause, kind)
