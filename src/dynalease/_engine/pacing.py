"""How long an acquisition pauses between tries (docs/locks.md, "Acquisition").

Every pause is a function of the acquisition's state and what its last read saw,
with no I/O; its randomness comes from the state's own ``random.Random``, so the
acquire decision (``attempts.decide``) is deterministic given its input.
"""

from __future__ import annotations

import random
from typing import NamedTuple, Protocol

from . import protocol as p
from .protocol import LockRow

FIRST_POLL_S = 0.025


def first_pause(lease_s: float) -> float:
    return min(FIRST_POLL_S, p.poll_cap(lease_s))


def next_pause(lease_s: float, pause: float) -> float:
    return min(pause * 1.6, p.poll_cap(lease_s))


def jittered(seconds: float, rng: random.Random) -> float:
    """``seconds`` +-20%, so that waiters who started together spread out."""
    return seconds * rng.uniform(0.8, 1.2)


class Unread:
    """The rows a batch read left unread (DynamoDB's throughput): which to ask for again and
    the pause before, on a growing series; the pure half of ``Requests.read_rows``."""

    def __init__(self, lease_s: float, rng: random.Random) -> None:
        self.lease_s, self.rng = lease_s, rng
        self.pause = first_pause(lease_s)

    def again(
        self, asked: tuple[str, ...], unprocessed: tuple[str, ...]
    ) -> tuple[tuple[str, ...], float] | None:
        """The keys of ``asked`` to ask for again and the pause first; None when all were read."""
        wanted = tuple(key for key in unprocessed if key in asked)
        if not wanted:
            return None
        pause, self.pause = jittered(self.pause, self.rng), next_pause(self.lease_s, self.pause)
        return wanted, pause


class Sighting(NamedTuple):
    """A held row as this client watched it: when it may be taken over, and by whom held."""

    key: str
    row: LockRow
    #: When the row becomes eligible for takeover (first seen + its lease).
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
    #: Where the jitter comes from.
    rng: random.Random


def contention_pause(waiting: Waiting, held: list[Sighting]) -> tuple[float, Pace]:
    """A lock's wait on its held row: ``protocol.contention_poll``, jittered, capped.

    A holder in this process wakes us when it releases, so its row is polled only
    at the slowest cadence.
    """
    (sighting,) = held
    identity, pace, now = sighting.row.identity, waiting.pace, waiting.now
    rng = waiting.rng
    spread = rng.uniform(0.8, 1.2) if pace.last else rng.uniform(0.1, 1.0)
    unchanged = identity == pace.seen
    last = p.contention_poll(waiting.lease_s, pace.last, unchanged, now - waiting.began)
    if sighting.held_here:
        last, spread = p.poll_cap(waiting.lease_s), rng.uniform(0.8, 1.2)
    left = waiting.deadline - now
    pause = min(last * spread, sighting.eligible - now, max(left / 2, 0.05))
    return pause, Pace(last, identity)


def permit_pause(waiting: Waiting, held: list[Sighting]) -> tuple[float, Pace]:
    """A semaphore's wait while every permit is held: its backoff series, jittered."""
    soonest = min(sighting.eligible for sighting in held)
    pause = jittered(waiting.poll, waiting.rng)
    return min(pause, max(0.0, soonest - waiting.now)), waiting.pace


def keys_pause(waiting: Waiting, held: list[Sighting]) -> tuple[float, Pace]:
    """A multi-key guard's wait: the lock's pacing on the row eligible first."""
    soonest = min(held, key=lambda sighting: sighting.eligible)
    here = any(sighting.held_here for sighting in held)
    return contention_pause(waiting, [soonest._replace(held_here=here)])
