"""What a guard is made with and what it wins, as values: its settings (:class:`LeaseSpec`),
its client's parts (:class:`ClientParts`, :class:`LeaseParts`) and a won acquisition
(:class:`Held`). ``base.LeaseCore`` keeps them; a spec's attributes are ``Final`` and a
``Held`` is replaced, not changed.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypedDict

from ..exceptions import LockLost
from . import protocol as p
from .clock import Clock, Stamp
from .holder import Holder
from .observations import Observations
from .store import LockStore

if TYPE_CHECKING:
    from .journal import Journal

__all__ = ["ClientParts", "Held", "LeaseParts", "LeaseSpec"]


class LeaseSpec:
    """One guard's settings, fixed when the guard is made (``DynamoDBClient._new_lease``)."""

    __slots__ = ("fencing", "holder", "journal", "lease_s", "on_lost", "table", "wait_s")

    def __init__(
        self,
        table: str,
        lease_s: float,
        wait_s: float,
        *,
        fencing: bool = False,
        journal: "Journal | None" = None,
        on_lost: Callable[[LockLost], object] | None = None,
        holder: Holder | None = None,
    ) -> None:
        self.table: Final = table
        self.lease_s: Final = lease_s
        self.wait_s: Final = wait_s
        #: Protocol-2 rows, and a fencing token per acquisition.
        self.fencing: Final = fencing
        #: Where the rows this guard may hold are named for the recovery extension.
        self.journal: Final = journal
        #: Called (on a thread of its own) once ownership is lost.
        self.on_lost: Final = on_lost
        #: Who holds the rows, written with each create and takeover (``holder.py``): the
        #: one part of the spec that changes (``set_metadata``), and only its metadata.
        self.holder: Final = Holder() if holder is None else holder

    @property
    def protocol(self) -> int:
        return p.FENCED_PROTOCOL if self.fencing else p.PROTOCOL

    @property
    def lease_ms(self) -> int:
        """The lease written to the row."""
        return p.lease_ms(self.lease_s)

    @property
    def span(self) -> float:
        """How long a confirmed write keeps us the owner (``protocol.validity_span``)."""
        return p.validity_span(self.lease_s)


class Held(NamedTuple):
    """What a won acquisition holds: its rows, the version written, when it was sent, and
    the answer that shows a fenced write's counter (the first row's).

    The guard keeps it (:attr:`LeaseCore.held`) while it holds the rows: each confirmed
    renewal replaces ``version`` and ``stamp``, and :meth:`LeaseCore.hold` fills ``token``.
    """

    keys: tuple[str, ...]
    version: str
    stamp: Stamp
    item: dict[str, Any] | None
    took_over: bool = False
    #: A fenced guard's token, the counter in ``item``.
    token: int | None = None


class ClientParts(NamedTuple):
    """What every guard of one client acts with: its store, its observation cache, and
    the clock (a fair waiter and a reader are handed them as one)."""

    store: LockStore
    observations: Observations
    clock: Clock


class LeaseParts(TypedDict):
    """What a lease is made of besides its rows: the client's store, clock and observation
    cache, and the guard's settings (``Lease`` passes them on to :class:`LeaseCore`)."""

    store: LockStore
    clock: Clock
    observations: Observations
    spec: LeaseSpec
