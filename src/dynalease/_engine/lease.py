"""The lease: one guard's life, composed of the engine's parts.

One :class:`Lease` is one guard's life. All of its coroutines run on one event
loop (the process runtime's in production, the test's own with a manual clock
in unit tests). Other threads only read its state and its lost signal.

Every write is stamped with the time it was *sent*; validity runs from that
stamp for 90% of the lease and is only ever extended by a confirmed write. A
write whose outcome is unknown is reconciled with a strong read: it counts only
if the row shows exactly the owner and version we attempted.

The parts, each in a file of its own and each handed the lease's core:

- ``base.LeaseCore``: identity, state changes, loss, validity, what other threads ask;
- ``requests.Requests``: bounded requests, unknown outcomes, late answers;
- ``acquire.Acquirer``: the acquire driver, over ``attempts.decide`` and a target
  (``targets.KeyTarget`` for a lock, ``targets.KeysTarget`` for a multi-key lock,
  ``permits.PermitTarget`` for a semaphore);
- ``renew.Renewer``: the renewal task and the validity checks;
- ``release.Releaser``: the release and the cleanup of late writes;
- ``caller.CallerPath``: the sync caller's own-thread path.
"""

from __future__ import annotations

from collections.abc import Callable

from ..exceptions import LockLost
from .acquire import Acquirer
from .base import LeaseCore
from .caller import CallerPath
from .clock import Clock
from .journal import Journal
from .observations import Observations
from .release import Releaser
from .renew import Renewer
from .requests import FirstWrite, Requests
from .store import LockStore
from .targets import KeyTarget, Target

__all__ = ["Lease"]


class Lease(LeaseCore):
    """One guard: a single acquisition of one key, its renewals and its release.

    ``target`` is what the acquisition aims at: by default the lock's ``key``; a
    semaphore's lease aims at its permits (``permits.PermitTarget``).
    """

    def __init__(
        self,
        *,
        store: LockStore,
        clock: Clock,
        observations: Observations,
        table: str,
        lease_s: float,
        wait_s: float,
        key: str = "",
        target: Target | None = None,
        on_lost: Callable[[LockLost], object] | None = None,
        fencing: bool = False,
        journal: Journal | None = None,
    ) -> None:
        aim: Target = KeyTarget(key) if target is None else target
        super().__init__(
            store=store,
            clock=clock,
            observations=observations,
            table=table,
            key=aim.first_key,
            lease_s=lease_s,
            wait_s=wait_s,
            on_lost=on_lost,
            fencing=fencing,
            journal=journal,
        )
        self.together = aim.together
        self.requests = Requests(self, landed=lambda: self.background(self.releaser.cleanup_late()))
        self.renewer = Renewer(
            self, self.requests, at_deadline=lambda: self.releaser.end_at_deadline()
        )
        self.releaser = Releaser(
            self, self.requests, self.renewer, written=lambda: self.acquirer.written
        )
        self.acquirer = Acquirer(
            self, self.requests, self.renewer, aim, cleanup=self.releaser.cleanup_late
        )
        self.caller = CallerPath(self, self.requests, self.acquirer, self.renewer, self.releaser)

    # --- the faces' entry points (a sync caller's: ``caller``) --------------------

    async def acquire(self, first: FirstWrite | None = None) -> None:
        """Acquire within the wait budget or raise LockNotAcquired (``Acquirer.acquire``)."""
        await self.acquirer.acquire(first)

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if still ours (``Releaser.release``)."""
        await self.releaser.release(first)

    def abandon(self) -> None:
        """The caller gave up on a guard it acquired: release in the background."""
        self.releaser.abandon()
