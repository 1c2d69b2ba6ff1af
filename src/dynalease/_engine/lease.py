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
from .runtime import Runtime
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
        self.requests = Requests(self, landed=self._late_write_landed)
        self.renewer = Renewer(self, self.requests, at_deadline=self._end_at_deadline)
        self.releaser = Releaser(
            self, self.requests, self.renewer, written=lambda: self.acquirer.written
        )
        self.acquirer = Acquirer(
            self, self.requests, self.renewer, aim, cleanup=self.releaser.cleanup_late
        )
        self.caller = CallerPath(self, self.requests, self.acquirer, self.renewer, self.releaser)

    @property
    def target(self) -> Target:
        """What the acquisition aims at (a semaphore's: its permits)."""
        return self.acquirer.target

    def _end_at_deadline(self) -> None:
        self.releaser.end_at_deadline()

    def _late_write_landed(self) -> None:
        self.background(self.releaser.cleanup_late())

    # --- the faces' entry points --------------------------------------------------

    async def acquire(self, first: FirstWrite | None = None) -> None:
        """Acquire within the wait budget or raise LockNotAcquired (``Acquirer.acquire``)."""
        await self.acquirer.acquire(first)

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if still ours (``Releaser.release``)."""
        await self.releaser.release(first)

    def abandon(self) -> None:
        """The caller gave up on a guard it acquired: release in the background."""
        self.releaser.abandon()

    def hold_from_caller(self, runtime: Runtime) -> None:
        """Acquire for a sync caller, blocking (``CallerPath.hold``)."""
        self.caller.hold(runtime)

    def release_from_caller(self, runtime: Runtime) -> None:
        """Release for a sync caller, blocking (``CallerPath.release``)."""
        self.caller.release(runtime)

    def acquire_blocking(self) -> FirstWrite | None:
        """The first create from the calling thread (``CallerPath.acquire_blocking``)."""
        return self.caller.acquire_blocking()

    def abandon_first(self) -> None:
        """After an interrupt cut :meth:`acquire_blocking` short (on the runtime loop)."""
        self.caller.abandon_first()

    def release_blocking(self) -> FirstWrite | None:
        """The release's delete from the calling thread (``CallerPath.release_blocking``)."""
        return self.caller.release_blocking()

    def interrupted_release(self) -> FirstWrite | None:
        """What an interrupted :meth:`release_blocking` leaves for :meth:`release`."""
        return self.caller.interrupted_release()

    def after_blocking_release(self) -> bool:
        """Whether :meth:`released_elsewhere` must still run on the runtime loop."""
        return self.caller.after_blocking_release()

    def released_elsewhere(self) -> None:
        """On the runtime loop, after :meth:`release_blocking` deleted the row."""
        self.caller.released_elsewhere()

    def start_renewing(self) -> None:
        """Start the renewal task now (on the runtime loop) unless released meanwhile."""
        self.renewer.start_renewing()

    def renewal_due(self) -> float:
        """The monotonic time of the first renewal after acquiring (or +inf)."""
        return self.renewer.renewal_due()
