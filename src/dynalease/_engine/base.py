"""What every part of a lease shares: its identity, state, loss, validity and counts.

:class:`LeaseCore` holds no I/O. The state changes only in :meth:`LeaseCore.move`;
a loss is recorded only in :meth:`LeaseCore.lose`.
"""

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from .._redact import escaped, logged_key
from ..exceptions import LockLost
from ..metrics import LockMetrics
from . import protocol as p
from .clock import Clock, Stamp
from .counters import Tally
from .observations import Observations
from .shapes import condition_item
from .spec import Held, LeaseSpec
from .states import TRANSITIONS, Event, IllegalTransition, State
from .store import LockStore

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["LeaseCore", "LeaseEvents", "logged_key", "run_callback"]

log = logging.getLogger("dynalease")
DEADLINE_PASSED = (
    "the invocation it was acquired in reached its deadline (no lock outlives its "
    "invocation): renewal stopped and its row is deleted"
)
#: Guards every lease's lazily made ``lost_signal``.
_SIGNALS = threading.Lock()


class LeaseEvents(Protocol):
    """What the parts of a lease tell its releaser (``release.Releaser`` implements it)."""

    def landed(self) -> None:
        """A write the lease gave up on may have landed after all: delete what it wrote."""
        ...

    def deadline_reached(self) -> None:
        """The caller's deadline passed while held: lose ownership and delete the rows now."""
        ...

    async def cleanup_late(self) -> None:
        """Delete every row the lease may have written after it stopped wanting it."""
        ...


class LeaseCore:
    """One guard's identity, state and validity, and what other threads may ask of it."""

    def __init__(
        self,
        *,
        store: LockStore,
        clock: Clock,
        observations: Observations,
        spec: LeaseSpec,
        keys: tuple[str, ...],
    ) -> None:
        self.store = store
        self.clock = clock
        self.observations = observations
        self.spec = spec
        #: The rows this guard aims at, then holds (a semaphore's: the permit it won), all
        #: written, renewed and deleted together with one version: set by :meth:`hold`.
        self.keys = keys
        self.owner = p.new_token()
        self.state = State.NEW
        #: Why ownership was lost: written only by :meth:`lose`.
        self.loss: str | None = None
        self.tally = Tally()
        #: What the won acquisition holds, with the confirmed version and when the write
        #: that made it was sent: set by :meth:`hold`, renewed by :meth:`confirm`.
        self.held: Held | None = None
        self.last_request_id: str | None = None
        #: The caller's deadline (``deadline.py``): set by :meth:`start`.
        self.deadline: float | None = None
        #: Versions written but not yet confirmed, with when each was sent.
        self.pending: dict[str, Stamp] = {}
        #: Writes that may still land after we stopped waiting (see ``requests``).
        self.late: set[asyncio.Future[Any]] = set()
        self._lost_signal: concurrent.futures.Future[None] | None = None

    # --- the settings, as the parts read them -----------------------------------

    @property
    def table(self) -> str:
        return self.spec.table

    @property
    def lease_s(self) -> float:
        return self.spec.lease_s

    @property
    def wait_s(self) -> float:
        return self.spec.wait_s

    @property
    def fencing(self) -> bool:
        return self.spec.fencing

    # --- what is held, as the parts read it ------------------------------------

    @property
    def version(self) -> str | None:
        """The confirmed version of the rows held, or None."""
        return None if self.held is None else self.held.version

    @property
    def validity(self) -> Stamp | None:
        """When the write that made the confirmed version was sent, or None."""
        return None if self.held is None else self.held.stamp

    @property
    def took_over(self) -> bool:
        """True when the acquisition took over an abandoned row."""
        return self.held is not None and self.held.took_over

    @property
    def fencing_token(self) -> int | None:
        """A fenced guard's token once held, else None."""
        return None if self.held is None else self.held.token

    @property
    def resource(self) -> tuple[str, str]:
        """The (table, key) the client's observation cache knows this guard's row by."""
        return (self.table, self.key)

    @property
    def lost_signal(self) -> "concurrent.futures.Future[None]":
        """A future done once the lease is lost; made on first use (most guards never ask)."""
        with _SIGNALS:
            signal = self._lost_signal
            if signal is None:
                import concurrent.futures  # loaded by the first guard asked

                signal = self._lost_signal = concurrent.futures.Future()
                if self.loss is not None:
                    signal.set_result(None)
        return signal

    # --- the state machine ------------------------------------------------------

    def start(self, deadline: float | None) -> None:
        """Leave NEW: an acquisition starts, bounded by the caller's ``deadline`` (monotonic
        time, ``deadline.deadline_on``), if any."""
        self.move(Event.START)
        self.deadline = deadline

    def move(self, event: Event) -> None:
        """The one way the state changes: along ``states.TRANSITIONS``, or raise."""
        try:
            self.state = TRANSITIONS[self.state, event]
        except KeyError:
            raise IllegalTransition(self.state, event) from None

    def lose(self, reason: str) -> None:
        """Record that ownership is gone (once) and tell whoever is listening."""
        if self.loss is not None:
            return
        # The reason first: another thread that sees the new state finds it.
        self.loss = reason
        self.move(Event.LOSE)
        log.warning(
            "dynalease: lock %s in table %r lost: %s", logged_key(self.key), self.table, reason
        )
        error = self.lost_error()
        with _SIGNALS:
            signal = self._lost_signal
        if signal is not None and not signal.done():
            signal.set_result(None)
        callback = self.spec.on_lost
        if callback is not None:
            # A user callback must never stall the runtime that renews every lease.
            threading.Thread(
                target=run_callback, args=(callback, error), name="dynalease-on-lost", daemon=True
            ).start()

    # --- validity ----------------------------------------------------------------

    def confirm(self, version: str, stamp: Stamp) -> None:
        """A renewal of ``version``, sent at ``stamp``, is confirmed: validity runs from there."""
        assert self.held is not None
        self.held = self.held._replace(version=version, stamp=stamp)
        self.pending.clear()

    def hold(self, held: Held) -> None:
        """An acquisition won ``held``: its row is this guard's (a semaphore's: the permit
        won); a fenced one's token is the counter in ``held.item``.

        ``item`` may be a reconciling read's: it still shows our write's counter,
        since only a change of owner changes it.
        """
        # Held first: a broken answer below still leaves rows to clean up (their validity).
        self.keys, self.held = held.keys, held
        self.pending.clear()
        if self.fencing:
            # UPDATED_NEW always returns the counter it changed; nothing back is a broken server.
            token = p.fence_of(held.item or {}, table=self.table, key=self.key)
            self.held = held._replace(token=token)

    def owns(self, item: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
        """True when ``item`` is a row that names this guard's owner."""
        return item is not None and item.get(p.OWNER_ATTR) == {"S": self.owner}

    def ours(self, item: dict[str, Any] | None) -> Stamp | None:
        """If the row shows one of our attempted versions, the stamp of that attempt."""
        version = item.get(p.VERSION_ATTR, {}).get("S") if self.owns(item) else None
        return self.pending.get(version) if isinstance(version, str) else None

    def new_write(self, key: str) -> tuple[p.LockRow, Stamp]:
        """The row of our next create or takeover at ``key``, stamped and noted as pending."""
        version, stamp = self.new_version()
        spec = self.spec
        holder = spec.holder.for_write()
        row = p.LockRow(key, self.owner, version, spec.lease_ms, spec.protocol, None, holder)
        return row, stamp

    def new_version(self) -> tuple[str, Stamp]:
        """A version for our next write (a renewal's), stamped now and noted as pending."""
        version = p.new_token()
        stamp = self.pending[version] = Stamp.now(self.clock)
        return version, stamp

    def drop_pending(self) -> None:
        """No write of ours is awaited any more (the acquisition ended without the row)."""
        self.pending.clear()

    # --- what other threads may ask ------------------------------------------

    def counters(self) -> LockMetrics:
        """A consistent-enough snapshot of the request counters."""
        return self.tally.snapshot(lost=self.loss is not None)

    def time_left(self) -> float:
        """Seconds of local validity left; 0 when not held."""
        if self.state is not State.HELD:
            return 0.0
        left = self.validity_left()
        if self.deadline is None:
            return left
        return min(left, max(0.0, self.deadline - self.clock.monotonic()))

    def validity_left(self) -> float:
        """Seconds the last confirmed write keeps us the owner, in any state (0: none)."""
        validity = self.validity
        if validity is None:
            return 0.0
        return validity.remaining(self.clock, self.spec.span)

    def deadline_passed(self) -> bool:
        """True once the caller's deadline (if any) has passed."""
        return self.deadline is not None and self.clock.monotonic() >= self.deadline

    def raise_if_lost(self) -> None:
        """Raise LockLost unless the guard holds a valid lease right now."""
        if self.state is State.HELD and self.loss is None and self.time_left() > 0:
            return
        raise self.lost_error()

    @property
    def key(self) -> str:
        """The guard's first row: the one its messages, journal entry and cache name."""
        return self.keys[0]

    def condition_items(self) -> list[dict[str, Any]]:
        """One ownership ConditionCheck per row this guard holds; the guard must be valid."""
        self.raise_if_lost()
        return [condition_item(self.table, key, self.owner) for key in self.keys]

    def lost_error(self) -> LockLost:
        """The error for a guard that no longer owns its lock (a release of a lost guard)."""
        if self.loss is not None:
            reason = self.loss
        elif self.state is State.HELD and self.deadline_passed():
            reason = DEADLINE_PASSED  # the renewal schedule deletes the row right now
        elif self.state is State.HELD:
            reason = "its lease expired locally before a renewal was confirmed"
        else:
            reason = f"the guard is {self.state.value}, not held"
        subject = f"lock {self.key!r}"
        if len(self.keys) > 1:
            subject = f"lock on {len(self.keys)} keys (first {self.key!r})"
        return LockLost(
            f"{subject} in table {self.table!r} is no longer owned by this guard: "
            f"{reason}. Stop the work it protected; acquire a new guard to continue",
            table=self.table,
            key=self.key,
            owner=self.owner,
            request_id=self.last_request_id,
        )

    def journal_rows(self, key: str, keys: tuple[str, ...] = ()) -> None:
        """Name in the journal the rows the next write may create, before it is sent."""
        journal = self.spec.journal
        if journal is not None:
            journal.record(self.table, key, self.owner, fencing=self.fencing, keys=keys)

    def note_answer(self, request_id: str | None) -> None:
        if request_id:
            self.last_request_id = request_id

    def log_text(self, error: BaseException, key: str | None = None) -> str:
        """``error``'s message for a log line: the key as :func:`logged_key` names it, and
        controls escaped (a transport's error may carry a key's repr or a server's text)."""
        key = self.key if key is None else key
        text, name = str(error), logged_key(key)
        if name != repr(key):
            text = text.replace(repr(key), name)
        return escaped(text)

    def forget(self) -> None:
        """After giving up: drop the journal entry once no write of ours may still land."""
        journal = self.spec.journal
        if journal is not None and not self.late:
            journal.forget(self.owner)


def run_callback(callback: Callable[[LockLost], object], error: LockLost) -> None:
    """Call a guard's ``on_lost`` with ``error``; what it raises is logged, not raised."""
    try:
        callback(error)
    except Exception:
        log.exception("dynalease: on_lost callback raised")
