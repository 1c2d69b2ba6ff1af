"""The lease state machine as a table: states, events, and the allowed transitions.

Read it like DESIGN.md section 3: each row of :data:`TRANSITIONS` says where a
guard goes when an event happens in a state, and its comment names the request
the lease sends from there. The lease changes state only through
``LeaseBase._move``, which looks the pair up as :func:`advance` does; a pair
missing from the table is a bug in the engine, and raises
:class:`IllegalTransition` instead of leaving a guard half-moved.

A guard's life::

    NEW -START-> ACQUIRING -WON-> HELD -RELEASE-> RELEASING -ENDED-> RELEASED
                     |               |                 \\-ENDED_LOST-> LOST
                     |               \\-LOSE-> LOST -RELEASE-> RELEASING
                     |-GAVE_UP-> NOT_ACQUIRED
                     \\-CANCEL-> CANCELLED

Why ownership was lost is kept beside the state (``Lease.loss``), written
only together with a ``LOSE`` transition.
"""

from __future__ import annotations

import enum
from typing import Final


class State(enum.Enum):
    """Where a guard is in its single life."""

    # Members are singletons, so identity is equality; the identity hash is C-fast
    # where Enum's own hashes the name in Python, and every transition hashes one.
    __hash__ = object.__hash__

    NEW = "new"
    ACQUIRING = "acquiring"
    HELD = "held"
    RELEASING = "releasing"
    RELEASED = "released"
    LOST = "lost"
    NOT_ACQUIRED = "not acquired"
    CANCELLED = "cancelled"


class Event(enum.Enum):
    """What happens to a guard; each moves it along one row of :data:`TRANSITIONS`."""

    __hash__ = object.__hash__  # as State's

    START = "acquire started"
    WON = "our create or takeover is confirmed"
    GAVE_UP = "the wait or network budget ran out, or a request failed for good"
    CANCEL = "the caller was cancelled or interrupted while acquiring"
    LOSE = "ownership is known to be gone"
    RELEASE = "release started"
    ENDED = "the release is over, ownership never lost"
    ENDED_LOST = "the release is over, ownership was lost"


S, E = State, Event

#: (state, event) -> next state; the comment says what the lease sends from there.
TRANSITIONS: Final[dict[tuple[State, Event], State]] = {
    # PutItem create (attribute_not_exists); on a failed condition GetItem, then a
    # PutItem takeover once the observed row is older than its lease_ms.
    (S.NEW, E.START): S.ACQUIRING,
    # UpdateItem renewal every lease/3 (retried every min(lease/12, 1 s)).
    (S.ACQUIRING, E.WON): S.HELD,
    # Nothing; a write that may still land is deleted (DeleteItem) if it does.
    (S.ACQUIRING, E.GAVE_UP): S.NOT_ACQUIRED,
    (S.ACQUIRING, E.CANCEL): S.CANCELLED,
    # An interrupt can land in a sync caller's thread just before the acquire starts
    # or just after its create was confirmed: nothing sent, or DeleteItem our row.
    (S.NEW, E.CANCEL): S.CANCELLED,
    (S.HELD, E.CANCEL): S.CANCELLED,
    # Renewals stop; the caller's release still sends its DeleteItem.
    (S.HELD, E.LOSE): S.LOST,
    # DeleteItem (owner equals ours), reconciled with GetItem when unsure.
    (S.HELD, E.RELEASE): S.RELEASING,
    (S.LOST, E.RELEASE): S.RELEASING,
    # Found while deleting (the row is someone else's): the delete stops; the
    # release ends in LOST.
    (S.RELEASING, E.LOSE): S.RELEASING,
    (S.RELEASING, E.ENDED): S.RELEASED,
    (S.RELEASING, E.ENDED_LOST): S.LOST,
    # A transaction committed after the release learns the lock had moved on:
    # recorded, nothing sent.
    (S.RELEASED, E.LOSE): S.RELEASED,
}

#: The states a guard's life ends in. Two rows leave them, on purpose: a LOST guard
#: is still released (its row may still be there), and a RELEASED one may still
#: learn that it had been lost.
FINISHED: Final = frozenset({S.RELEASED, S.LOST, S.NOT_ACQUIRED, S.CANCELLED})

#: The same table indexed by event, then state: a lookup builds no key tuple.
NEXT_STATE: Final[dict[Event, dict[State, State]]] = {event: {} for event in Event}
for (_state, _event), _next in TRANSITIONS.items():
    NEXT_STATE[_event][_state] = _next
del _state, _event, _next


class IllegalTransition(RuntimeError):
    """An event arrived in a state whose row does not allow it: an engine bug."""

    def __init__(self, state: State, event: Event) -> None:
        super().__init__(
            f"dynalease internal error: a guard that is {state.value} cannot take the "
            f"event {event.name} ({event.value}); please report this"
        )
        self.state = state
        self.event = event


def advance(state: State, event: Event) -> State:
    """The state after ``event`` in ``state``, by :data:`TRANSITIONS`; raises if not allowed."""
    try:
        return NEXT_STATE[event][state]
    except KeyError:
        raise IllegalTransition(state, event) from None
