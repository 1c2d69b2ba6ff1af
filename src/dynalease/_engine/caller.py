"""The sync caller's own thread: its first create and its release's delete.

A sync caller blocks anyway, so sending the request itself spares two
hand-overs between threads, which cost more CPU than the request. Only a clean
answer is handled here; anything else is returned as a :class:`FirstWrite`
for the engine to go on from on the runtime loop, where it reconciles, waits
and retries. Requires ``store.blocking_ready()``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..exceptions import DynamoDBError
from . import protocol as p
from .acquire import Acquiring
from .clock import SYSTEM_CLOCK, Stamp
from .release import Releasing
from .requests import FirstWrite, interrupted_failure
from .runtime import Runtime
from .shapes import create_operation, release_operation
from .states import LOST, Event
from .store import ConditionFailed


class CallerPath(Acquiring, Releasing):
    """The blocking halves of acquire and release, run in a sync caller's thread."""

    def hold_from_caller(self, runtime: Runtime) -> None:
        """Acquire for a sync caller, blocking; the first create goes out from this thread.

        The engine on the runtime loop takes over only if that create did not
        simply succeed. A lease acquired here gets its renewal task when the
        first renewal is due (:class:`.scheduling.DeferredRenewals`), so a short
        hold never wakes the runtime loop at all.
        """
        if not self.store.blocking_ready():
            runtime.run(self.acquire())
            return
        try:
            first = self.acquire_blocking()
        except BaseException:
            runtime.call_soon(self.abandon_first)
            raise
        if first is not None:
            runtime.run(self.acquire(first))
        elif self.clock is SYSTEM_CLOCK:
            runtime.deferred.add(self)
        else:
            runtime.call_soon(self.start_renewing)

    def release_from_caller(self, runtime: Runtime) -> None:
        """Release for a sync caller, blocking; the delete goes out from this thread.

        The release is shielded, as an async guard's is: an interrupt (Ctrl-C)
        while waiting for it must not cancel it, or the row would wait out its
        lease; so the wait is on a submitted future, never a cancellable run.
        Raises like :meth:`release`.
        """
        if not self.store.blocking_ready():
            runtime.submit(self.release()).result()
            return
        try:
            first = self.release_blocking()
        except BaseException:
            runtime.submit(self.release(self.interrupted_release()))
            raise
        if first is not None:
            runtime.submit(self.release(first)).result()
            return
        if self.after_blocking_release():
            runtime.call_soon(self.released_elsewhere)
        if self.state is LOST or self.released_at_deadline:
            raise self.lost_error()

    #: The open request a blocking write handed over (the transport's ``on_late``:
    #: sent, not answered in time or interrupted), until a :class:`FirstWrite` or
    #: :meth:`abandon_first` takes it. A clean answer never sets it.
    _late_write: Any = None
    #: What an interrupt (Ctrl-C) during :meth:`release_blocking` leaves for the
    #: runtime loop to finish (:meth:`interrupted_release`).
    _interrupted: FirstWrite | None = None

    def _adopt_late(self, late: Any) -> None:
        """Keep the still-open request of a blocking write (its ``on_late``)."""
        self._late_write = late

    def _take_late(self) -> Any:
        late, self._late_write = self._late_write, None
        return late

    def acquire_blocking(self) -> FirstWrite | None:
        """Try the first create from the calling thread; None when the lock is now held.

        Anything but a clean answer is returned for ``acquire`` to go on from on
        the runtime loop. The caller then calls ``start_renewing`` on the
        runtime loop. (A :class:`FirstWrite` is made only then: most creates
        simply succeed.)
        """
        start, deadline, single = self._begin_acquire()
        timeout = p.request_timeout(self.lease_s, deadline - self.clock.monotonic())
        if timeout <= 0:
            return FirstWrite(
                create_operation(self.fencing), deadline, None, start=start, single=single
            )
        version = p.new_token()
        stamp = Stamp.now(self.clock)
        self._pending[version] = stamp
        row = p.LockRow(self.key, self.owner, version, self._lease_ms, self._protocol)
        tally = self.tally
        tally.write_requests += 1
        try:
            # Interrupted here, the open request waits in ``_late_write`` for
            # ``abandon_first``, which cleans up on the runtime loop.
            reply = self.store.create_blocking(self.table, row, timeout, self._adopt_late)
        except (ConditionFailed, DynamoDBError) as error:
            operation = create_operation(self.fencing)
            return FirstWrite(operation, deadline, error, self._take_late(), version, start, single)
        finally:
            tally.wait_ms = (self.clock.monotonic() - start) * 1000
        tally.consumed_wcu += reply.capacity
        self._last_request_id = reply.request_id or self._last_request_id
        # A token missing from the answer raises: ``hold_from_caller`` then cleans up.
        self._won(version, stamp, reply.item)
        self._now_held()
        return None

    def abandon_first(self) -> None:
        """On the runtime loop, after an interrupt cut :meth:`acquire_blocking` short."""
        late = self._take_late()
        self._move(Event.CANCEL)
        self._pending.clear()
        if late is not None:
            finished = self.store.finish_late(create_operation(self.fencing), late)
            self._watch_late(asyncio.ensure_future(finished))
        # The create may have landed with its answer unread: delete our row if so.
        self._background(self._cleanup_late())

    def release_blocking(self) -> FirstWrite | None:
        """Try the release's delete from the calling thread; None when it is done.

        As :meth:`acquire_blocking`: anything but a clean answer is returned for
        ``release`` to go on from on the runtime loop. The caller then calls
        :meth:`released_elsewhere` on the runtime loop, and raises
        ``lost_error()`` when ``state`` is LOST.
        """
        deadline = self._begin_release()
        if deadline is None:
            return None
        timeout = p.request_timeout(self.lease_s, deadline - self.clock.monotonic())
        self.tally.caller_writes += 1
        try:
            reply = self.store.delete_blocking(
                self.table, self.key, self.owner, timeout, self._adopt_late, fencing=self.fencing
            )
        except (ConditionFailed, DynamoDBError) as error:
            return FirstWrite(release_operation(self.fencing), deadline, error, self._take_late())
        except BaseException:
            # Interrupted (Ctrl-C) with the delete sent: it counts as sent with an
            # unknown outcome, for ``interrupted_release`` to hand to ``release``.
            operation = release_operation(self.fencing)
            failure = interrupted_failure(operation)
            self._interrupted = FirstWrite(operation, deadline, failure, self._take_late())
            raise
        self.tally.caller_wcu += reply.capacity
        self._end_release()
        if self.journal is not None:
            self.journal.forget(self.owner)
        return None

    def interrupted_release(self) -> FirstWrite | None:
        """What an interrupted :meth:`release_blocking` leaves for ``release``."""
        first, self._interrupted = self._interrupted, None
        return first

    def after_blocking_release(self) -> bool:
        """After :meth:`release_blocking` deleted the row, in the caller's thread.

        Returns True when :meth:`released_elsewhere` must still run on the runtime
        loop: a renewal task to stop or a waiter of this client to wake. (The
        holder is cleared before waiters are looked for; see ``Acquiring._acquire``.)
        """
        self.observations.clear_holder(self._resource)
        return self._renewer is not None or self.observations.has_waiters(self._resource)

    def released_elsewhere(self) -> None:
        """On the runtime loop, after :meth:`release_blocking` deleted the row."""
        self._stop_renewer()
        self.observations.released(self._resource)
