"""One acquisition as a state value, and the decision of what it does next.

:func:`decide` does no I/O and reads no clock, so the unit tests drive it with
plain values. A lock, a multi-key lock and a semaphore differ only in their :class:`Rules`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from ..exceptions import MalformedLockRow
from .pacing import (
    Pace,
    Sighting,
    Waiting,
    contention_pause,
    jittered,
    keys_pause,
    next_pause,
    permit_pause,
)
from .protocol import LockRow
from .store import TLS_REFUSED

Item = dict[str, Any]
#: A backoff series: after failed reads (and a semaphore's polls), or after failed writes.
Series = Literal["poll", "backoff"]
#: Why an acquisition gave up.
Why = Literal["budget", "held", "ran out", "unreachable", "malformed"]

# --- actions: what the driver does next -------------------------------------


class Create(NamedTuple):
    """Create the row at ``key`` (a lock's key, or a permit)."""

    key: str


class TakeOver(NamedTuple):
    """Replace ``row`` at ``key``, which stayed unchanged for its stored lease."""

    key: str
    row: LockRow


class TakeOverAll(NamedTuple):
    """A write of every row at once (``key`` first): over the ``observed`` stale ones, the
    rest new."""

    key: str
    observed: dict[str, LockRow]


class Read(NamedTuple):
    """Read the row (a semaphore: every permit row), strongly consistent."""


class Look(NamedTuple):
    """Look at the rows just seen: ours, free, or held (observed in the client's cache)."""

    rows: dict[str, Item | None]


class Adopt(NamedTuple):
    """An earlier write of ours landed after all: the row at ``key`` is ours."""

    key: str
    item: Item


class Sleep(NamedTuple):
    """Pause ``seconds`` (never past the deadline), then do ``then``.

    A ``wake`` sleep ends early when a guard of this client releases a row waited on.
    """

    seconds: float
    then: Action
    wake: bool = False
    #: The backoff series that grows once this pause is over.
    grow: Series | None = None
    #: The lock's pacing memory from this wait on.
    pace: Pace | None = None
    #: Who holds the rows waited on, for the error if the wait runs out.
    holders: tuple[str, ...] = ()


class GiveUp(NamedTuple):
    """End the acquisition: the budget is spent, or the rows stay held."""

    #: BUDGET, HELD (a single attempt), RAN_OUT (the wait ran out), UNREACHABLE, or
    #: MALFORMED (a row that is not a lock row, which no wait can change).
    why: Why
    #: Who holds the rows, for the error message (empty when not known).
    holders: tuple[str, ...] = ()


BUDGET: Final = "budget"
HELD: Final = "held"
RAN_OUT: Final = "ran out"
UNREACHABLE: Final = "unreachable"
MALFORMED: Final = "malformed"

#: A request that never connected: refused, or no such host (a timeout is not one), or
#: its TLS handshake refused the endpoint's certificate (a setting, not a passing fault).
UNREACHABLE_CODES = frozenset({"EndpointConnectionError", TLS_REFUSED})
#: How long, and for how many requests, nothing may connect before the acquisition stops.
UNREACHABLE_S = 1.0
UNREACHABLE_REQUESTS = 3

Action = Create | TakeOver | TakeOverAll | Read | Look | Adopt | Sleep | GiveUp

# --- outcomes: what the last action ended with ---------------------------------


class Seen(NamedTuple):
    """The rows a read found, or the current row a write's failed condition showed."""

    rows: dict[str, Item | None]


class Looked(NamedTuple):
    """What :class:`Look` found: an earlier write of ours, free rows, held rows."""

    ours: tuple[str, Item] | None
    free: list[str]
    held: list[Sighting]
    #: The owners of the well-formed held rows, for an error message.
    holders: tuple[str, ...]
    #: The first held row that is not a lock row (never taken over).
    malformed: MalformedLockRow | None = None


class Failed(NamedTuple):
    """The request failed: ``unknown`` when it may have been applied (or not answered)."""

    unknown: bool
    #: The definite failure's code (None for an unknown outcome).
    code: str | None = None


class Spent(NamedTuple):
    """No time was left for the request within the deadline."""


class Slept(NamedTuple):
    """A sleep ended: with the key a local release woke it for, and whether time is left."""

    woken: str | None
    time_left: bool


Outcome = Seen | Looked | Failed | Spent | Slept


@dataclass
class Attempt:
    """One acquisition's state: what :func:`decide` reads, kept up by the driver."""

    lease_s: float
    deadline: float
    #: A ``wait_timeout=0`` call: one attempt within the network budget.
    single: bool
    began: float
    #: The row the last write aimed at (a semaphore's: the last permit tried).
    key: str
    #: The backoff series: after failed reads (and a semaphore's polls), after failed writes.
    poll: float
    backoff: float
    pace: Pace = field(default_factory=Pace)
    #: The action just performed and how it ended.
    step: Action = field(default_factory=Read)
    outcome: Outcome = field(default_factory=Spent)
    #: The monotonic time the rows were last looked at, or the last request failed.
    now: float = 0.0
    #: The last failure seen, named in the error if the acquisition gives up.
    last_error: BaseException | None = None
    #: Whether DynamoDB gave any request a definite answer (else a spent budget is an outage).
    answered: bool = False
    #: Requests that could not connect while nothing else happened (-1 once anything did).
    refused: int = 0
    #: Who held the rows when the attempt last chose to wait on them; None after a write.
    waited_on: tuple[str, ...] | None = None
    #: Where the jitter and the choice among free or stale rows come from.
    rng: random.Random = field(default_factory=lambda: random.Random(random.getrandbits(64)))

    def begin(self, action: Action) -> None:
        """Make ``action`` the step, noting whether the attempt is still waiting on held rows."""
        self.step = action
        if isinstance(action, Sleep) and action.wake:
            self.waited_on = action.holders
        elif isinstance(action, Create | TakeOver | TakeOverAll):
            self.waited_on = None

    def end(self, outcome: Outcome) -> None:
        """The step ended with ``outcome``: count requests that could not connect, and grow
        the backoff series after a pause that ran its course."""
        self.outcome = outcome
        if isinstance(outcome, Failed):
            refused = self.refused >= 0 and outcome.code in UNREACHABLE_CODES
            self.refused = self.refused + 1 if refused else -1
            return
        step = self.step
        ran_its_course = isinstance(outcome, Slept) and outcome.woken is None and outcome.time_left
        if ran_its_course and isinstance(step, Sleep) and step.grow == "poll":
            self.poll = next_pause(self.lease_s, self.poll)
        elif ran_its_course and isinstance(step, Sleep) and step.grow == "backoff":
            self.backoff = next_pause(self.lease_s, self.backoff)


Kind = Literal["create", "take over", "read"]


class Retry(NamedTuple):
    """What follows a failed request: give up at once in a single attempt? pause, then?"""

    single_gives_up: bool
    #: The backoff series to pause by.
    series: Series
    #: "same": the same request again; "read": a read.
    then: Literal["same", "read"]


#: A lock: (step, outcome unknown) -> retry. A failed create is sent again; a
#: takeover or an unknown outcome is followed by a read, after the write backoff.
LOCK_RETRIES: dict[tuple[Kind, bool], Retry] = {
    ("create", False): Retry(True, "poll", "same"),
    ("create", True): Retry(False, "backoff", "read"),
    ("take over", False): Retry(False, "backoff", "read"),
    ("take over", True): Retry(False, "backoff", "read"),
    ("read", False): Retry(True, "poll", "read"),
    ("read", True): Retry(False, "backoff", "read"),
}

#: A semaphore: a lock's, except that every failed write is followed by a read of all
#: permits (which shows whether it landed) and a definite failure ends a single attempt.
PERMIT_RETRIES: dict[tuple[Kind, bool], Retry] = LOCK_RETRIES | {
    ("create", False): Retry(True, "backoff", "read"),
    ("take over", False): Retry(True, "backoff", "read"),
    ("read", True): Retry(True, "poll", "read"),
}


@dataclass(frozen=True)
class Rules:
    """What differs between a lock's acquisition and a semaphore's."""

    retries: dict[tuple[Kind, bool], Retry]
    #: How long to wait while every row is held and none may be taken over yet.
    wait: Callable[[Waiting, list[Sighting]], tuple[float, Pace]]
    #: After a takeover whose condition failed: create at once when the row it showed is
    #: gone, else read it again (a lock).
    look_after_takeover: bool
    #: After a write whose condition failed: look at the rows it showed (True), or read
    #: every row again (a semaphore).
    look_after_write: bool = True
    #: Whether a wait that ran its course grows the backoff series (``poll``).
    grows_poll: bool = False
    #: Every row at once (a multi-key guard): written only when all are free or stale.
    together: bool = False


#: A lock's rules (:class:`.targets.KeyTarget`), paced by ``protocol.contention_poll``.
LOCK_RULES = Rules(LOCK_RETRIES, contention_pause, look_after_takeover=True)
#: A multi-key lock's (:class:`.targets.KeysTarget`): every row at once.
KEYS_RULES = Rules(LOCK_RETRIES, keys_pause, look_after_takeover=False, together=True)
#: A semaphore's (:class:`.permits.PermitTarget`).
PERMIT_RULES = Rules(
    PERMIT_RETRIES, permit_pause, grows_poll=True, look_after_takeover=False, look_after_write=False
)


def decide(attempt: Attempt, rules: Rules) -> Action:
    """The next action, from the last one and how it ended."""
    step, outcome = attempt.step, attempt.outcome
    if isinstance(outcome, Spent):
        return _out_of_time(attempt)
    if isinstance(outcome, Failed):
        return _retry(attempt, rules, outcome.unknown)
    if isinstance(outcome, Slept):
        assert isinstance(step, Sleep)
        if outcome.woken is not None:
            return Create(outcome.woken)
        if not outcome.time_left:
            return _out_of_time(attempt)
        return step.then
    if isinstance(outcome, Seen):
        if isinstance(step, TakeOver) and rules.look_after_takeover:
            free = all(item is None for item in outcome.rows.values())
            return Create(step.key) if free else Read()
        if isinstance(step, Create | TakeOver | TakeOverAll) and not rules.look_after_write:
            return Read()
        return Look(outcome.rows)  # a read's rows, or the rows a failed write showed
    return _choose(attempt, rules, outcome)


def _out_of_time(attempt: Attempt) -> GiveUp:
    """The deadline came while waiting on held rows (also during a poll), or otherwise."""
    if attempt.waited_on is None:
        return GiveUp(BUDGET)
    return GiveUp(RAN_OUT, attempt.waited_on)


def _kind(step: Action) -> Kind:
    if isinstance(step, Create):
        return "create"
    return "take over" if isinstance(step, TakeOver | TakeOverAll) else "read"


def _retry(attempt: Attempt, rules: Rules, unknown: bool) -> Action:
    if (
        attempt.refused >= UNREACHABLE_REQUESTS
        and not attempt.answered
        and attempt.now - attempt.began >= UNREACHABLE_S
    ):
        return GiveUp(UNREACHABLE)
    kind = _kind(attempt.step)
    retry = rules.retries[kind, unknown]
    if retry.single_gives_up and attempt.single:
        return GiveUp(BUDGET)
    pause = attempt.poll if retry.series == "poll" else attempt.backoff
    again: Action = Create(attempt.key) if retry.then == "same" and kind == "create" else Read()
    return Sleep(jittered(pause, attempt.rng), again, grow=retry.series)


def _choose(attempt: Attempt, rules: Rules, looked: Looked) -> Action:
    """After a look at the rows: ours, a free one, a stale one, or wait for one."""
    if looked.ours is not None:
        return Adopt(*looked.ours)
    if looked.malformed is not None and (not looked.held or rules.together):
        # Never taken over: with no other row to go for (or every row wanted), it ends
        # the acquisition; other permits may be free.
        return GiveUp(MALFORMED)
    if rules.together:
        return _choose_all(attempt, rules, looked)
    if looked.free:
        # The row last written, if free: a late landing of that write then fails.
        key = attempt.key if attempt.key in looked.free else attempt.rng.choice(looked.free)
        return Create(key)
    stale = [sighting for sighting in looked.held if attempt.now >= sighting.eligible]
    if stale:
        sighting = attempt.rng.choice(stale)
        return TakeOver(sighting.key, sighting.row)
    return _wait(attempt, rules, looked.held, looked.holders)


def _choose_all(attempt: Attempt, rules: Rules, looked: Looked) -> Action:
    """A multi-key guard: write every row once each is free or stale, else wait for all."""
    live = [sighting for sighting in looked.held if attempt.now < sighting.eligible]
    if not live:
        observed = {sighting.key: sighting.row for sighting in looked.held}
        return TakeOverAll(attempt.key, observed) if observed else Create(attempt.key)
    return _wait(attempt, rules, live, tuple(sighting.row.owner for sighting in live))


def _wait(attempt: Attempt, rules: Rules, held: list[Sighting], holders: tuple[str, ...]) -> Action:
    """No row may be written yet: a single attempt gives up, any other waits on ``held``."""
    if attempt.single:
        return GiveUp(HELD, holders)
    pause, pace = rules.wait(attempt, held)
    grow: Series | None = "poll" if rules.grows_poll else None
    return Sleep(pause, Read(), wake=True, grow=grow, pace=pace, holders=holders)
