"""The lease: one guard's life, composed of the engine's parts (docs/architecture.md).

All of its coroutines run on one event loop; other threads only read its state and
its lost signal, except a sync caller's own-thread path (``caller.py``).
"""

from __future__ import annotations

from typing import Unpack

from .acquire import Acquirer
from .base import LeaseCore
from .caller import CallerPath
from .release import Releaser
from .renew import Renewer
from .spec import LeaseParts, LeaseSpec
from .store import FirstWrite
from .targets import KeyTarget, Target

__all__ = ["Lease", "LeaseSpec"]


class Lease(LeaseCore):
    """One guard: a single acquisition, its renewals and its release.

    ``target``: what the acquisition aims at (by default the lock's ``key``).
    """

    def __init__(
        self, *, key: str = "", target: Target | None = None, **parts: Unpack[LeaseParts]
    ) -> None:
        aim: Target = KeyTarget(key) if target is None else target
        super().__init__(keys=aim.rows(aim.first_key), **parts)
        written = [aim.rows(aim.first_key)]
        # The releaser hears from the parts it releases through (``LeaseEvents``).
        self.releaser = Releaser(self, written)
        self.renewer = Renewer(self, self.releaser)
        self.releaser.serve(self.renewer)
        self.acquirer = Acquirer(self, self.renewer, aim, self.releaser, written)
        self.caller = CallerPath(self, self.acquirer, self.renewer, self.releaser)

    async def acquire(
        self, first: FirstWrite | None = None, attempt_cap: float | None = None
    ) -> None:
        """Acquire within the wait budget or raise LockNotAcquired (``Acquirer.acquire``)."""
        await self.acquirer.acquire(first, attempt_cap)

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if still ours (``Releaser.release``)."""
        await self.releaser.release(first)

    def abandon(self) -> None:
        """The caller gave up on a guard it acquired: release in the background."""
        self.releaser.abandon()
