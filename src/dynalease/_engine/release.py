"""Release: stop renewing and delete our row (owner-conditional), within the cleanup budget.

The same delete cleans up a row this guard wrote after it had given up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..exceptions import DynamoDBError, LockLost, LockReleaseError
from . import protocol as p
from . import release_rules as rules
from .base import DEADLINE_PASSED, LeaseCore, logged_key
from .release_rules import Deletion
from .renew import Renewer
from .states import Event, State
from .store import BudgetSpent, FirstWrite, OutcomeUnknown

if TYPE_CHECKING:
    from .release_loop import ReleaseLoop

log = logging.getLogger("dynalease")


class Releaser:
    """Ending a guard's hold: RELEASING, then RELEASED or LOST; the lease's
    :class:`.base.LeaseEvents`.

    ``written``: every set of rows this guard may write while acquiring (the acquirer's
    list). Made before the parts it is told about, which :meth:`serve` then hands it.
    """

    renewer: Renewer

    def __init__(self, core: LeaseCore, written: list[tuple[str, ...]]) -> None:
        self.core = core
        self._written = written
        self._on_loop: ReleaseLoop | None = None
        #: The caller's deadline ended the hold (:meth:`end_at_deadline`).
        self.released_at_deadline = False

    def serve(self, renewer: Renewer) -> None:
        """Release stopping ``renewer`` (which reports to us)."""
        self.renewer = renewer

    @property
    def on_loop(self) -> ReleaseLoop:
        """The release's loop side, made on the loop by the first step that needs it (a
        sync caller's release that its own thread ends never does)."""
        if self._on_loop is None:
            from .release_loop import ReleaseLoop  # asyncio comes with it

            self._on_loop = ReleaseLoop(self.core, self)
        return self._on_loop

    def watch_late_answer(self, late: Any) -> None:
        """A write a caller's thread sent may still land: delete it if it does (on the loop)."""
        self.on_loop.requests.watch_late_answer(late)

    def landed(self) -> None:
        """A write the lease gave up on may have landed after all: delete what it wrote."""
        self.on_loop.background(self.cleanup_late())

    def deadline_reached(self) -> None:
        """The caller's deadline passed while held: see :meth:`end_at_deadline`."""
        self.end_at_deadline()

    def begin(self) -> float | None:
        """Enter RELEASING; the cleanup deadline, or None when there is nothing to release."""
        core = self.core
        state = core.state
        if (state is not State.HELD and state is not State.LOST) or self.released_at_deadline:
            return None  # never held, or already released (or being released)
        if state is State.HELD and core.time_left() <= 0:
            past = core.deadline_passed()
            core.lose(
                DEADLINE_PASSED if past else "its lease expired before a renewal was confirmed"
            )
        core.move(Event.RELEASE)
        return core.clock.monotonic() + p.cleanup_budget(core.lease_s)

    def end(self) -> None:
        """Leave RELEASING: LOST if ownership was lost on the way, RELEASED otherwise."""
        self.core.move(Event.ENDED if self.core.loss is None else Event.ENDED_LOST)

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if it is still ours, within the cleanup budget.

        Raises LockLost when ownership had been lost, LockReleaseError when the delete
        could not be confirmed.
        """
        core = self.core
        deadline = self.begin() if first is None else first.deadline
        if deadline is None:
            if self.released_at_deadline:
                raise core.lost_error()
            return
        await self._release_row(deadline, first)

    async def _release_row(self, deadline: float, first: FirstWrite | None = None) -> None:
        core = self.core
        self.renewer.stop()
        try:
            await self._delete_until_gone(core.keys, deadline, first)
        except LockReleaseError:
            core.tally.cleanup_failures += 1
            raise
        finally:
            if core.state is State.RELEASING:
                self.end()
        if core.spec.journal is not None:  # the row is gone or not ours: confirmed
            core.spec.journal.forget(core.owner)
        for key in core.keys:  # wakes a waiter of this client on any of them
            core.observations.released((core.table, key))
        if core.loss is not None:
            raise core.lost_error()

    async def _delete_until_gone(
        self, keys: tuple[str, ...], deadline: float, first: FirstWrite | None = None
    ) -> None:
        """Delete ``keys`` while still ours, as :func:`.release_rules.decide` chooses (going on
        from ``first``'s outcome); raises when not confirmed by ``deadline``."""
        deletion = Deletion(keys, self.core.owner)
        action: rules.Action = rules.Delete(keys)
        while not isinstance(action, rules.Done | rules.GiveUp):
            deletion.releasing = self.core.state is State.RELEASING
            deletion.end(action, await self._perform(deletion, action, deadline, first))
            first = None  # the caller's outcome is used once
            action = rules.decide(deletion)
        if isinstance(action, rules.GiveUp):
            raise self._not_confirmed(keys, deletion.last_error)

    async def _perform(
        self,
        deletion: Deletion,
        action: rules.Action,
        deadline: float,
        first: FirstWrite | None,
    ) -> rules.Outcome:
        core, requests = self.core, self.on_loop.requests
        try:
            if isinstance(action, rules.Delete):
                return await self._delete(action.keys, deadline, first)
            if isinstance(action, rules.Check):
                return rules.Rows(await requests.read_rows(action.keys, deadline))
            if isinstance(action, rules.Lose):
                core.lose(action.why)
            else:
                assert isinstance(action, rules.Pause)
                left = max(0.0, deadline - core.clock.monotonic())
                await core.clock.sleep(min(p.renew_retry_interval(core.lease_s), left))
            return rules.Noted()
        except BudgetSpent:
            return rules.Spent()
        except OutcomeUnknown as unknown:
            # A bare timeout names nothing new.
            deletion.last_error = unknown.cause or deletion.last_error
            return rules.Unknown() if isinstance(action, rules.Delete) else rules.Unread()
        except DynamoDBError as error:
            deletion.last_error = error
            if isinstance(action, rules.Check):
                return rules.Unread()
            return rules.Failed(time_left=deadline - core.clock.monotonic() > 0)

    async def _delete(
        self, keys: tuple[str, ...], deadline: float, first: FirstWrite | None
    ) -> rules.Outcome:
        core, requests = self.core, self.on_loop.requests
        if first is not None:
            reply = requests.replay(first)
        else:
            reply = await requests.send(
                "write",
                lambda limit: core.store.delete_rows(
                    core.table, keys, core.owner, limit, fencing=core.fencing
                ),
                deadline,
            )
        return rules.Deleted() if reply is not None else rules.Refused(requests.conflict_item)

    def _not_confirmed(
        self, keys: tuple[str, ...], last_error: BaseException | None
    ) -> LockReleaseError:
        core = self.core
        lock, left = f"lock {keys[0]!r}", "the row stays"
        if len(keys) > 1:
            lock, left = f"the lock on {len(keys)} keys (first {keys[0]!r})", "the rows stay"
        return LockReleaseError(
            f"release of {lock} in table {core.table!r} was not confirmed within the cleanup "
            f"budget of {p.cleanup_budget(core.lease_s):g} s"
            + (f" (last failure: {last_error})" if last_error else "")
            + f"; {left} until the lease can be taken over by observation",
            table=core.table,
            key=keys[0],
            owner=core.owner,
            request_id=core.last_request_id,
        )

    async def cleanup_late(self) -> None:
        """Delete every row this guard may have written after it stopped wanting it."""
        core = self.core
        async with self.on_loop.cleaning:
            for keys in self._written:
                deadline = core.clock.monotonic() + p.cleanup_budget(core.lease_s)
                try:
                    await self._delete_until_gone(keys, deadline)
                    core.forget()
                except Exception as error:
                    log.warning(
                        "dynalease: could not clean up late lock row %s: %s",
                        logged_key(keys[0]),
                        core.log_text(error, keys[0]),
                    )

    def end_at_deadline(self) -> None:
        """The caller's deadline passed while held: lose ownership and delete the row now.

        The caller's code may still run; its own release then only reports the loss.
        """
        core = self.core
        if core.state is not State.HELD:
            return
        core.lose(DEADLINE_PASSED)
        cleanup = self.begin()
        self.released_at_deadline = True
        if cleanup is not None:
            self.on_loop.background(self._release_at_deadline(cleanup))

    async def _release_at_deadline(self, cleanup: float) -> None:
        try:
            await self._release_row(cleanup)
        except LockLost:
            pass  # the loss was recorded and logged by ``end_at_deadline``
        except Exception as error:
            log.warning(
                "dynalease: the row of lock %s was not deleted at its invocation's deadline: %s",
                logged_key(self.core.key),
                self.core.log_text(error),
            )

    def abandon(self) -> None:
        """The caller gave up on a guard it acquired: release in the background."""
        if self.core.state is State.HELD or self.core.state is State.LOST:
            self.on_loop.background(self._release_quietly())

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except Exception as error:
            log.debug(
                "dynalease: background release of %s: %s",
                logged_key(self.core.key),
                self.core.log_text(error),
            )
