"""Release: stop renewing and delete our row (owner-conditional), within the cleanup budget.

The same delete cleans up a row this guard wrote after it had given up.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..exceptions import DynamoDBError, LockLost, LockReleaseError
from . import protocol as p
from .base import DEADLINE_PASSED, LeaseCore, logged_key
from .renew import Renewer
from .requests import BudgetSpent, FirstWrite, OutcomeUnknown, Requests
from .states import Event, State

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("dynalease")


class Releaser:
    """Ending a guard's hold: RELEASING, then RELEASED or LOST.

    ``written``: every row this guard may have written while acquiring.
    """

    def __init__(
        self,
        core: LeaseCore,
        requests: Requests,
        renewer: Renewer,
        written: Callable[[], list[str]],
    ) -> None:
        self.core = core
        self.requests = requests
        self.renewer = renewer
        self._written = written
        #: One clean-up at a time (made on the loop at the first: most guards never need it).
        self._cleaning: asyncio.Lock | None = None

    def begin(self) -> float | None:
        """Enter RELEASING; the cleanup deadline, or None when there is nothing to release."""
        core = self.core
        state = core.state
        if (state is not State.HELD and state is not State.LOST) or core.released_at_deadline:
            return None  # never held, or already released (or being released)
        if state is State.HELD and core.time_left() <= 0:
            past = core.deadline_passed()
            core._lose(
                DEADLINE_PASSED if past else "its lease expired before a renewal was confirmed"
            )
        core._move(Event.RELEASE)
        return core.clock.monotonic() + p.cleanup_budget(core.lease_s)

    def end(self) -> None:
        """Leave RELEASING: LOST if ownership was lost on the way, RELEASED otherwise."""
        self.core._move(Event.ENDED if self.core.loss is None else Event.ENDED_LOST)

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if it is still ours, within the cleanup budget.

        Raises LockLost when ownership had been lost, LockReleaseError when the delete
        could not be confirmed.
        """
        core = self.core
        deadline = self.begin() if first is None else first.deadline
        if deadline is None:
            if core.released_at_deadline:
                raise core.lost_error()
            return
        await self._release_row(deadline, first)

    async def _release_row(self, deadline: float, first: FirstWrite | None = None) -> None:
        core = self.core
        self.renewer.stop()
        try:
            await self._delete_until_gone(core.key, deadline, first)
        except LockReleaseError:
            core.tally.cleanup_failures += 1
            raise
        finally:
            if core.state is State.RELEASING:
                self.end()
        if core.journal is not None:  # the row is gone or not ours: confirmed
            core.journal.forget(core.owner)
        for key in core.keys:  # wakes a waiter of this client on any of them
            core.observations.released((core.table, key))
        if core.loss is not None:
            raise core.lost_error()

    async def _delete_until_gone(
        self, key: str, deadline: float, first: FirstWrite | None = None
    ) -> None:
        core = self.core
        if core.multi and first is None:
            await self._delete_all_until_gone(deadline)
            return
        uncertain = False
        last_error: BaseException | None = None
        while True:
            try:
                if first is not None:
                    replay, first = first, None
                    reply = self.requests.replay(replay)
                else:
                    reply = await self.requests.send(
                        "write",
                        lambda limit: core.store.delete(
                            core.table, key, core.owner, limit, fencing=core.fencing
                        ),
                        deadline,
                    )
            except BudgetSpent:
                break
            except OutcomeUnknown as unknown:
                uncertain = True
                last_error = unknown.cause or last_error  # a bare timeout names nothing new
                try:
                    item = await self.requests.read_row(key, deadline)
                except BudgetSpent:
                    break
                except (OutcomeUnknown, DynamoDBError) as error:
                    cause = error.cause if isinstance(error, OutcomeUnknown) else error
                    last_error = cause or last_error
                    await self._pause(deadline)
                    continue
                if not core.owns(item):
                    return
                # Not applied: pause like any failed delete, never retry in a tight loop.
                await self._pause(deadline)
                continue
            except DynamoDBError as error:
                last_error = error
                if deadline - core.clock.monotonic() <= 0:
                    break
                await self._pause(deadline)
                continue
            if reply is None and not uncertain and core.state is State.RELEASING:
                await self._refused(key, deadline)
            return
        raise self._not_confirmed(f"lock {key!r}", key, last_error, "the row stays")

    async def _delete_all_until_gone(self, deadline: float) -> None:
        """A multi-key guard's release: delete every row still ours in one transaction.

        A row gone or another owner's means the guard was lost; the rows still ours
        are deleted all the same.
        """
        core, requests = self.core, self.requests
        keys: tuple[str, ...] = core.keys
        last_error: BaseException | None = None
        while keys:
            refused = False
            try:
                reply = await requests.send(
                    "write",
                    functools.partial(core.store.delete_many, core.table, keys, core.owner),
                    deadline,
                )
                if reply is not None:
                    return
                refused = True  # a condition failed: nothing was deleted
            except BudgetSpent:
                break
            except (OutcomeUnknown, DynamoDBError) as error:
                cause = error.cause if isinstance(error, OutcomeUnknown) else error
                last_error = cause or last_error
            try:
                items = await requests.read_rows(keys, deadline)
            except BudgetSpent:
                break
            except (OutcomeUnknown, DynamoDBError):
                await self._pause(deadline)
                continue
            ours = tuple(key for key, item in items.items() if core.owns(item))
            if refused and len(ours) < len(keys) and core.state is State.RELEASING:
                core._lose("another owner took one of its keys over, or a row was deleted")
            if ours == keys:
                await self._pause(deadline)  # not applied: never retry in a tight loop
            keys = ours
        else:
            return
        lock = f"the lock on {len(core.keys)} keys (first {core.key!r})"
        raise self._not_confirmed(lock, core.key, last_error, "the rows stay")

    def _not_confirmed(
        self, lock: str, key: str, last_error: BaseException | None, left: str
    ) -> LockReleaseError:
        core = self.core
        return LockReleaseError(
            f"release of {lock} in table {core.table!r} was not confirmed within the cleanup "
            f"budget of {p.cleanup_budget(core.lease_s):g} s"
            + (f" (last failure: {last_error})" if last_error else "")
            + f"; {left} until the lease can be taken over by observation",
            table=core.table,
            key=key,
            owner=core.owner,
            request_id=core.last_request_id,
        )

    async def _pause(self, deadline: float) -> None:
        core = self.core
        left = max(0.0, deadline - core.clock.monotonic())
        await core.clock.sleep(min(p.renew_retry_interval(core.lease_s), left))

    async def _refused(self, key: str, deadline: float) -> None:
        """Our delete's condition failed: find out who holds the row, and record the loss."""
        core = self.core
        item = self.requests.conflict_item
        if item is None:
            try:
                item = await self.requests.read_row(key, deadline)
            except (BudgetSpent, OutcomeUnknown, DynamoDBError):
                item = None
        if item is not None and not core.owns(item):
            core._lose("another owner took the lock over before release")
        elif item is None and core.loss is None:
            # The row vanished under a valid guard: someone deleted it by hand.
            core._lose("the row was deleted by someone else before release")

    async def cleanup_late(self) -> None:
        """Delete every row this guard may have written after it stopped wanting it."""
        import asyncio

        core = self.core
        if self._cleaning is None:
            self._cleaning = asyncio.Lock()
        async with self._cleaning:
            for key in (core.key,) if core.multi else self._written():
                deadline = core.clock.monotonic() + p.cleanup_budget(core.lease_s)
                try:
                    await self._delete_until_gone(key, deadline)
                    core.forget()
                except Exception as error:
                    log.warning(
                        "dynalease: could not clean up late lock row %s: %s",
                        logged_key(key),
                        core.log_text(error, key),
                    )

    def end_at_deadline(self) -> None:
        """The caller's deadline passed while held: lose ownership and delete the row now.

        The caller's code may still run; its own release then only reports the loss.
        """
        core = self.core
        if core.state is not State.HELD:
            return
        core._lose(DEADLINE_PASSED)
        cleanup = self.begin()
        core.released_at_deadline = True
        if cleanup is not None:
            core.background(self._release_at_deadline(cleanup))

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
            self.core.background(self._release_quietly())

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except Exception as error:
            log.debug(
                "dynalease: background release of %s: %s",
                logged_key(self.core.key),
                self.core.log_text(error),
            )
