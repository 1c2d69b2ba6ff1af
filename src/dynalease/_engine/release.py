"""Release: stop renewing and delete our row, within the cleanup budget.

The delete is conditioned on our owner; one whose outcome is unknown is
reconciled with a strong read (the release counts only if the row is gone or
no longer ours). The same delete cleans up a row this guard wrote after it had
given up (a late create or takeover): :meth:`Releasing._cleanup_late`.
"""

from __future__ import annotations

import functools
import logging

from ..exceptions import DynamoDBError, LockLost, LockReleaseError
from . import protocol as p
from .base import logged_key
from .deadline import DEADLINE_PASSED
from .requests import BudgetSpent, FirstWrite, OutcomeUnknown, Requests
from .states import ENDED, ENDED_LOST, HELD, LOST, RELEASE, RELEASING, State

log = logging.getLogger("dynalease")


class Releasing(Requests):
    """Ending a guard's hold: RELEASING, then RELEASED or LOST."""

    def _begin_release(self) -> float | None:
        """Enter RELEASING; the cleanup deadline, or None when there is nothing to release."""
        state = self.state
        if (state is not HELD and state is not LOST) or self.released_at_deadline:
            return None  # never held, or already released (or being released)
        if state is HELD and self.time_left() <= 0:
            deadline = self.deadline
            past = deadline is not None and self.clock.monotonic() >= deadline
            self._lose(
                DEADLINE_PASSED if past else "its lease expired before a renewal was confirmed"
            )
        self._move(RELEASE)
        return self.clock.monotonic() + p.cleanup_budget(self.lease_s)

    def _end_release(self) -> None:
        """Leave RELEASING: LOST if ownership was lost on the way, RELEASED otherwise."""
        self._move(ENDED if self.loss is None else ENDED_LOST)

    def _stop_renewer(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None and not renewer.done():
            # A renewal in flight cannot recreate the row: its condition needs our
            # owner and version on an existing row, and the delete removes it.
            renewer.cancel()

    async def release(self, first: FirstWrite | None = None) -> None:
        """Stop renewing and delete the row if it is still ours, within the cleanup budget.

        Raises LockLost when the guard had lost ownership (the protected work ran
        unprotected for a while) and LockReleaseError when the delete could not be
        confirmed. ``first`` is the outcome of ``release_blocking`` when that did
        not finish the release.
        """
        if first is None:
            deadline = self._begin_release()
            if deadline is None:
                if self.released_at_deadline:
                    raise self._lost_error()
                return
        else:
            deadline = first.deadline
        await self._release_row(deadline, first)

    async def _release_row(self, deadline: float, first: FirstWrite | None = None) -> None:
        """:meth:`release` from RELEASING on: the delete within ``deadline``, then the end state."""
        self._stop_renewer()
        try:
            await self._delete_until_gone(deadline, first)
        except LockReleaseError:
            self.tally.cleanup_failures += 1
            raise
        finally:
            if self.state is RELEASING:
                self._end_release()
        if self.journal is not None:  # the row is gone or not ours: confirmed
            self.journal.forget(self.owner)
        self.observations.released(self._resource)
        if self.loss is not None:
            raise self._lost_error()

    async def _delete_until_gone(self, deadline: float, first: FirstWrite | None = None) -> None:
        retry = p.renew_retry_interval(self.lease_s)
        uncertain = False
        last_error: BaseException | None = None
        while True:
            try:
                if first is not None:
                    replay, first = first, None
                    reply = await self._request(
                        "write",
                        functools.partial(self._replay_with, replay),
                        deadline,
                        replayed=True,
                    )
                else:
                    reply = await self._request(
                        "write",
                        lambda limit: self.store.delete(
                            self.table, self.key, self.owner, limit, fencing=self.fencing
                        ),
                        deadline,
                    )
            except BudgetSpent:
                break
            except OutcomeUnknown as unknown:
                uncertain = True
                last_error = unknown.cause or last_error  # a bare timeout names nothing new
                try:
                    item = await self._read_row(deadline)
                except BudgetSpent:
                    break
                except (OutcomeUnknown, DynamoDBError) as error:
                    cause = error.cause if isinstance(error, OutcomeUnknown) else error
                    last_error = cause or last_error
                    await self.clock.sleep(min(retry, max(0.0, deadline - self.clock.monotonic())))
                    continue
                if item is None or item.get(p.OWNER_ATTR) != {"S": self.owner}:
                    return
                # Not applied: pause like any failed delete, never retry in a tight loop.
                await self.clock.sleep(min(retry, max(0.0, deadline - self.clock.monotonic())))
                continue
            except DynamoDBError as error:
                last_error = error
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    break
                await self.clock.sleep(min(retry, left))
                continue
            if reply is None and not uncertain and self.state is State.RELEASING:
                item = self._conflict_item
                if item is None:  # not returned with the failure: find out who holds it
                    try:
                        item = await self._read_row(deadline)
                    except (BudgetSpent, OutcomeUnknown, DynamoDBError):
                        item = None
                if item is not None and item.get(p.OWNER_ATTR) != {"S": self.owner}:
                    self._lose("another owner took the lock over before release")
                elif item is None and self.loss is None:
                    # The row vanished under a valid guard: someone deleted it by hand.
                    self._lose("the row was deleted by someone else before release")
            return
        raise LockReleaseError(
            f"release of lock {self.key!r} in table {self.table!r} was not confirmed within "
            f"the cleanup budget of {p.cleanup_budget(self.lease_s):g} s"
            + (f" (last failure: {last_error})" if last_error else "")
            + "; the row stays until its lease can be taken over by observation",
            table=self.table,
            key=self.key,
            owner=self.owner,
            request_id=self._last_request_id,
        )

    async def _cleanup_late(self) -> None:
        """Delete a row this guard wrote after it stopped wanting it (owner-conditional)."""
        deadline = self.clock.monotonic() + p.cleanup_budget(self.lease_s)
        try:
            await self._delete_until_gone(deadline)
            self._forget()
        except Exception as error:
            log.warning(
                "dynalease: could not clean up late lock row %s: %s",
                logged_key(self.key),
                self._log_text(error),
            )

    def end_at_deadline(self) -> None:
        """The deadline passed while held: lose ownership and delete the row now, in the background.

        Called by the renewal schedule (``renew``) at the lease's ``deadline``. The
        caller's code may still run; its ``raise_if_lost`` raises from now on, and its
        own release only reports the loss.
        """
        if self.state is not HELD:
            return
        self._lose(DEADLINE_PASSED)
        cleanup = self._begin_release()
        self.released_at_deadline = True
        if cleanup is not None:
            self._background(self._release_at_deadline(cleanup))

    async def _release_at_deadline(self, cleanup: float) -> None:
        try:
            await self._release_row(cleanup)
        except LockLost:
            pass  # the loss was recorded and logged by ``end_at_deadline``
        except Exception as error:
            log.warning(
                "dynalease: the row of lock %s was not deleted at its invocation's deadline: %s",
                logged_key(self.key),
                self._log_text(error),
            )

    def abandon(self) -> None:
        """Called when the caller gave up on a guard it acquired: release in the background."""
        if self.state is State.HELD or self.state is State.LOST:
            self._background(self._release_quietly())

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except Exception as error:
            log.debug(
                "dynalease: background release of %s: %s",
                logged_key(self.key),
                self._log_text(error),
            )
