"""The sync caller's own thread: its first create and its release's delete.

A sync caller blocks anyway, so sending the request itself spares two thread
hand-overs. Only a clean answer is handled here; anything else becomes a
:class:`FirstWrite` for the engine to go on from on the runtime loop.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import DynamoDBError
from . import protocol as p
from .acquire import Acquirer
from .base import LeaseCore
from .release import Releaser
from .renew import Renewer
from .runtime import Runtime
from .shapes import create_operation, release_operation
from .spec import Held
from .states import Event, State
from .store import ConditionFailed, FirstWrite, interrupted_failure


class CallerPath:
    """The blocking halves of acquire and release, run in a sync caller's thread."""

    def __init__(
        self,
        core: LeaseCore,
        acquirer: Acquirer,
        renewer: Renewer,
        releaser: Releaser,
    ) -> None:
        self.core = core
        self.acquirer = acquirer
        self.renewer = renewer
        self.releaser = releaser
        #: The open request a blocking write handed to ``on_late``, until taken.
        self._late_write: Any = None
        self._interrupted: FirstWrite | None = None

    def hold(self, runtime: Runtime, attempt_cap: float | None = None) -> None:
        """Acquire for a sync caller, blocking; the first create goes out from this thread.

        Unless the acquisition waits its turn in a line first: all of it then runs on the
        loop. ``attempt_cap``: as for ``Acquirer.begin``.
        """
        if not self.core.store.blocking_for(self.core.keys) or not self.acquirer.line.immediate:
            runtime.run(self.acquirer.acquire(attempt_cap=attempt_cap))
            return
        try:
            first = self.acquire_blocking(attempt_cap)
        except BaseException as stop:
            # An error (a refused hand-over among them) ends the acquisition; an interrupt
            # cancels it, and may come after it was held.
            gave_up = isinstance(stop, Exception) and self.core.state is State.ACQUIRING
            ended = Event.GAVE_UP if gave_up else Event.CANCEL
            runtime.call_soon(lambda: self.abandon_first(ended))
            raise
        if first is not None:
            runtime.run(self.acquirer.acquire(first))
        else:
            self.renewer.defer(runtime)

    def release(self, runtime: Runtime) -> None:
        """Release for a sync caller, blocking; the delete goes out from this thread.

        Shielded: an interrupt must not cancel it, or the row would wait out its lease,
        so the wait is on a submitted future, never a cancellable run.
        """
        if not self.core.store.blocking_for(self.core.keys):
            runtime.submit(self.releaser.release()).result()
            return
        try:
            first = self.release_blocking()
        except BaseException:
            runtime.submit(self.releaser.release(self.interrupted_release()))
            raise
        if first is not None:
            runtime.submit(self.releaser.release(first)).result()
            return
        if self.after_blocking_release():
            runtime.call_soon(self.released_elsewhere)
        if self.core.state is State.LOST or self.releaser.released_at_deadline:
            raise self.core.lost_error()

    def _adopt_late(self, late: Any) -> None:
        self._late_write = late

    def _take_late(self) -> Any:
        late, self._late_write = self._late_write, None
        return late

    def acquire_blocking(self, attempt_cap: float | None = None) -> FirstWrite | None:
        """Try the first create from the calling thread; None when the lock is now held."""
        core = self.core
        start, deadline, single = self.acquirer.begin(attempt_cap)
        timeout = p.request_timeout(core.lease_s, deadline - core.clock.monotonic())
        operation = create_operation(core.fencing)
        if timeout <= 0:
            return FirstWrite(operation, deadline, None, start=start, single=single)
        row, stamp = core.new_write(core.key)
        core.tally.write_requests += 1
        try:
            # Interrupted here, the open request waits in ``_late_write`` for
            # ``abandon_first``, which cleans up on the runtime loop.
            reply = core.store.create_blocking(core.table, row, timeout, self._adopt_late)
        except (ConditionFailed, DynamoDBError) as error:
            core.note_answer(error.request_id)
            late = self._take_late()
            return FirstWrite(operation, deadline, error, late, row.version, start, single)
        finally:
            core.tally.wait_ms = (core.clock.monotonic() - start) * 1000
        core.tally.consumed_wcu += reply.capacity
        core.note_answer(reply.request_id)
        # A token missing from the answer, or too little validity left, raises: ``hold``
        # then cleans up.
        core.hold(Held(core.keys, row.version, stamp, reply.item))
        self.acquirer.complete()
        return None

    def abandon_first(self, ended: Event = Event.CANCEL) -> None:
        """On the runtime loop, after an interrupt or an error cut :meth:`acquire_blocking`
        short; ``ended``: how the acquisition ended."""
        core = self.core
        late = self._take_late()
        core.move(ended)
        core.drop_pending()
        if late is not None:
            self.releaser.watch_late_answer(late)
        # The create may have landed with its answer unread: delete our row if so.
        self.releaser.landed()

    def release_blocking(self) -> FirstWrite | None:
        """Try the release's delete from the calling thread; None when it is done."""
        core = self.core
        deadline = self.releaser.begin()
        if deadline is None:
            return None
        timeout = p.request_timeout(core.lease_s, deadline - core.clock.monotonic())
        operation = release_operation(core.fencing)
        core.tally.caller_writes += 1
        try:
            reply = core.store.delete_blocking(
                core.table, core.key, core.owner, timeout, self._adopt_late, fencing=core.fencing
            )
        except (ConditionFailed, DynamoDBError) as error:
            return FirstWrite(operation, deadline, error, self._take_late())
        except BaseException:
            # Interrupted with the delete sent: its outcome is unknown.
            failure = interrupted_failure(operation)
            self._interrupted = FirstWrite(operation, deadline, failure, self._take_late())
            raise
        core.tally.caller_wcu += reply.capacity
        core.note_answer(reply.request_id)
        self.releaser.end()
        if core.spec.journal is not None:
            core.spec.journal.forget(core.owner)
        return None

    def interrupted_release(self) -> FirstWrite | None:
        """What an interrupted :meth:`release_blocking` leaves for ``release``."""
        first, self._interrupted = self._interrupted, None
        return first

    def after_blocking_release(self) -> bool:
        """Whether :meth:`released_elsewhere` must still run on the runtime loop.

        The holder is cleared before waiters are looked for (see ``Driver._look``).
        """
        core = self.core
        core.observations.clear_holder(core.resource)
        return self.renewer.task is not None or core.observations.has_waiters(core.resource)

    def released_elsewhere(self) -> None:
        """On the runtime loop, after :meth:`release_blocking` deleted the row."""
        self.renewer.stop()
        self.core.observations.released(self.core.resource)
