"""How long an acquisition pauses between tries: the pacing rules.

Every pause is a function of the acquisition's state and what its last read saw,
with no I/O, so the acquire decision (``attempts.decide``) stays pure:

- :func:`first_pause`, :func:`next_pause`: the backoff series (25 ms, x1.6, up to
  :func:`.protocol.poll_cap`) that follows a failed request, and that paces a
  semaphore's polls;
- :func:`contention_pause`: a lock's waits on a held row (``protocol.contention_poll``);
- :func:`permit_pause`: a semaphore's waits while every permit is held;
- :func:`keys_pause`: a multi-key guard's waits while some of its rows are held.
"""

from __future__ import annotations

import random
from typing import NamedTuple, Protocol

from . import protocol as p
from .protocol import LockRow

#: The first pause of the backoff series.
FIRST_POLL_S = 0.025


def first_pause(lease_s: float) -> float:
    """The first pause of the backoff series."""
    return min(FIRST_POLL_S, p.poll_cap(lease_s))


def next_pause(lease_s: float, pause: float) -> float:
    """The pause after ``pause`` in the backoff series: x1.6, up to the poll cap."""
    return min(pause * 1.6, p.poll_cap(lease_s))


def jittered(seconds: float) -> float:
    """``seconds`` +-20%, so that waiters who started together spread out."""
    return seconds * random.uniform(0.8, 1.2)


class Sighting(NamedTuple):
    """A held row as this client watched it: when it may be taken over, and by whom held."""

    key: str
    row: LockRow
    #: The monotonic time the row becomes eligible for takeover (first seen + its lease).
    eligible: float
    #: True when the holder is a guard of this client (its release wakes us).
    held_here: bool


class Pace(NamedTuple):
    """What a lock's contention pacing remembers between its waits."""

    #: The last contention pause, before jitter (None before the first).
    last: float | None = None
    #: The row the last contention read saw.
    seen: tuple[str, str, int] | None = None


class Waiting(Protocol):
    """What a wait rule reads of the acquisition's state (``attempts.Attempt``)."""

    lease_s: float
    pace: Pace
    #: When the rows were looked at, when the acquisition began, its deadline.
    now: float
    began: float
    deadline: float
    #: The current pause of the backoff series.
    poll: float


def contention_pause(waiting: Waiting, held: list[Sighting]) -> tuple[float, Pace]:
    """A lock's wait on its held row: ``protocol.contention_poll``, jittered, capped.

    A first wait starts at a random phase (0.1-1.0 of the pause), later ones get
    +-20%: waiters that arrived together do not read together. A holder in this
    process wakes us when it releases, so its row is polled only at the slowest
    cadence. No pause passes the row's eligibility, or half the wait left (at
    least 50 ms): a short wait still reads before it gives up. Returns the pause
    and the pacing memory for the next wait.
    """
    (sighting,) = held
    identity, pace, now = sighting.row.identity, waiting.pace, waiting.now
    spread = random.uniform(0.8, 1.2) if pace.last else random.uniform(0.1, 1.0)
    unchanged = identity == pace.seen
    last = p.contention_poll(waiting.lease_s, pace.last, unchanged, now - waiting.began)
    if sighting.held_here:
        last, spread = p.poll_cap(waiting.lease_s), random.uniform(0.8, 1.2)
    left = waiting.deadline - now
    pause = min(last * spread, sighting.eligible - now, max(left / 2, 0.05))
    return pause, Pace(last, identity)


def permit_pause(waiting: Waiting, held: list[Sighting]) -> tuple[float, Pace]:
    """A semaphore's wait while every permit is held: its backoff series, jittered.

    Never past the moment the first held permit becomes eligible for takeover
    (the pacing memory is not used).
    """
    soonest = min(sighting.eligible for sighting in held)
    return min(jittered(waiting.poll), max(0.0, soonest - waiting.now)), waiting.pace


def keys_pause(waiting: Waiting, held: list[Sighting]) -> tuple[float, Pace]:
    """A multi-key guard's wait while some of its rows are held: the lock's pacing.

    :func:`contention_pause` on the held row that becomes eligible first; any held
    row whose holder is a guard of this client caps the pause at the slowest
    cadence (its release wakes us).
    """
    soonest = min(held, key=lambda sighting: sighting.eligible)
    here = any(sighting.held_here for sighting in held)
    return contention_pause(waiting, [soonest._replace(held_here=here)])
