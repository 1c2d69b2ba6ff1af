"""The lease state machine as a table: states, events, and the allowed transitions.

A pair missing from :data:`TABLE` is an engine bug: ``LeaseCore.move`` raises
:class:`IllegalTransition` instead of leaving a guard half-moved.

A guard's life::

    NEW -START-> ACQUIRING -WON-> HELD -RELEASE-> RELEASING -ENDED-> RELEASED
                     |               |                 \\-ENDED_LOST-> LOST
                     |               \\-LOSE-> LOST -RELEASE-> RELEASING
                     |-GAVE_UP-> NOT_ACQUIRED
                     \\-CANCEL-> CANCELLED
"""

from __future__ import annotations

import enum
from typing import Final


class State(enum.Enum):
    """Where a guard is in its single life."""

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

    START = "acquire started"
    WON = "our create or takeover is confirmed"
    GAVE_UP = "the wait or network budget ran out, or a request failed for good"
    CANCEL = "the caller was cancelled or interrupted while acquiring"
    LOSE = "ownership is known to be gone"
    RELEASE = "release started"
    ENDED = "the release is over, ownership never lost"
    ENDED_LOST = "the release is over, ownership was lost"


#: In ``state``, on ``event``, the guard goes to ``next``; ``sends``: what it sends from there,
#: as a single unfenced key does. A fenced lock creates, takes over and releases with
#: UpdateItem (its released row keeps the counter); a multi-key lock writes its rows in one
#: TransactWriteItems and reads them with BatchGetItem.
TABLE: Final = """
state         event        next          sends
NEW           START        ACQUIRING     PutItem create (attribute_not_exists); on a failed
                                         condition GetItem polls, then a PutItem takeover once
                                         the same row was seen for its stored lease_ms
ACQUIRING     WON          HELD          UpdateItem renewal every lease/3, retried every
                                         min(lease/12, 1 s) after a failure
ACQUIRING     GAVE_UP      NOT_ACQUIRED  nothing; a write that may still land is deleted if it does
ACQUIRING     CANCEL       CANCELLED     as GAVE_UP
NEW           CANCEL       CANCELLED     nothing: an interrupt in a sync caller's thread before
                                         the acquire started
HELD          CANCEL       CANCELLED     DeleteItem of our row: an interrupt just after a sync
                                         caller's create was confirmed
HELD          LOSE         LOST          renewals stop; the caller's release still deletes
HELD          RELEASE      RELEASING     DeleteItem (owner equals ours), reconciled by GetItem
LOST          RELEASE      RELEASING     as from HELD: the row may still be ours
RELEASING     LOSE         RELEASING     the delete found another owner and stops
RELEASING     ENDED        RELEASED      nothing
RELEASING     ENDED_LOST   LOST          nothing; release raises LockLost
RELEASED      LOSE         RELEASED      nothing: a later transaction learned the lock had moved on
"""


def _parse(table: str) -> dict[tuple[State, Event], State]:
    rows: dict[tuple[State, Event], State] = {}
    for line in table.strip().splitlines()[1:]:
        if line.startswith(" "):
            continue  # the "sends" column goes on
        state, event, following = line.split()[:3]
        pair = (State[state], Event[event])
        if pair in rows:
            raise ValueError(f"the state table has two rows for {state} on {event}")
        rows[pair] = State[following]
    return rows


TRANSITIONS: Final[dict[tuple[State, Event], State]] = _parse(TABLE)


class IllegalTransition(RuntimeError):
    """An event arrived in a state whose row does not allow it: an engine bug."""

    def __init__(self, state: State, event: Event) -> None:
        super().__init__(
            f"dynalease internal error: a guard that is {state.value} cannot take the "
            f"event {event.name} ({event.value}); please report this"
        )
        self.state = state
        self.event = event
