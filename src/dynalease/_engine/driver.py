"""The acquire driver: performs what :func:`.attempts.decide` chooses until a write wins.

Loaded only when an acquisition needs the runtime loop (a sync caller's clean first
create never does). When the budget ends, :func:`give_up_error` tells contention
(DynamoDB answered something: :class:`LockNotAcquired`) from an outage (nothing was
answered: :class:`LockUnavailable`). One outage ends early: when no request so far
could even connect (refused, the host name did not resolve, or the endpoint's TLS
certificate failed verification) for
``attempts.UNREACHABLE_S`` and ``UNREACHABLE_REQUESTS`` requests, the endpoint or Region
is most likely wrong, and waiting out the budget would only hide that.
"""

from __future__ import annotations

import asyncio
from asyncio import CancelledError

from ..exceptions import (
    DynamoDBError,
    LockNotAcquired,
    LockUnavailable,
    MalformedLockRow,
    RequestFailedError,
    ThrottledError,
)
from . import protocol as p
from .attempts import (
    BUDGET,
    HELD,
    MALFORMED,
    UNREACHABLE,
    Action,
    Adopt,
    Attempt,
    Create,
    Failed,
    GiveUp,
    Item,
    Look,
    Looked,
    Outcome,
    Read,
    Seen,
    Sleep,
    Slept,
    Spent,
    TakeOver,
    TakeOverAll,
    decide,
)
from .base import LeaseCore, LeaseEvents
from .clock import Stamp
from .loop import sleep_or_wake
from .pacing import Sighting, first_pause
from .requests import Requests
from .spec import Held
from .store import TLS_REFUSED, BudgetSpent, FirstWrite, OutcomeUnknown
from .targets import Target, gave_up, not_acquired

__all__ = ["CancelledError", "Driver", "give_up_error"]


class Driver:
    """One acquisition's run on the loop, for an :class:`.acquire.Acquirer`."""

    def __init__(
        self,
        core: LeaseCore,
        events: LeaseEvents,
        target: Target,
        written: list[tuple[str, ...]],
    ) -> None:
        self.core = core
        self.requests = Requests(core, events)  # the acquisition's own
        self.target = target
        #: Every set of rows this guard aimed a write at: the acquirer's list, which its
        #: cleanup reads.
        self.written = written
        self._waiters: list[tuple[str, asyncio.Future[None]]] = []
        #: The loop the acquisition runs on (its renewals are deferred on it).
        self.loop = asyncio.get_running_loop()
        self._held: Held | None = None

    async def run(self, deadline: float, single: bool, first: FirstWrite | None) -> Held:
        """Drive the acquisition from its first write (or ``first``'s outcome) until it wins;
        what it holds then."""
        core = self.core
        pause = first_pause(core.lease_s)
        began = core.clock.monotonic()  # after the transport's setup
        attempt = Attempt(core.lease_s, deadline, single, began, core.key, pause, pause)
        action: Action = Create(attempt.key)
        try:
            while not isinstance(action, GiveUp):
                if await self._perform(attempt, action, first):
                    assert self._held is not None
                    return self._held
                first = None  # the caller's first outcome is used once
                action = decide(attempt, self.target.rules)
        finally:
            self._release_waiters(None)
        if action.why == MALFORMED:
            assert isinstance(attempt.outcome, Looked) and attempt.outcome.malformed is not None
            raise attempt.outcome.malformed
        raise give_up_error(self.core, self.target, attempt, action)

    async def _perform(self, attempt: Attempt, action: Action, first: FirstWrite | None) -> bool:
        """Do ``action``; True when the row is now ours, else its outcome is in ``attempt``."""
        attempt.begin(action)
        outcome: Outcome
        try:
            if isinstance(action, Create | TakeOver | TakeOverAll):
                rows = await self._write(attempt, action, first)
                if rows is None:
                    return True
                outcome = Seen(rows)
            elif isinstance(action, Read):
                outcome = Seen(
                    self._free_as_none(
                        await self.requests.read_rows(self.target.wake_keys, attempt.deadline)
                    )
                )
                attempt.answered = True
            elif isinstance(action, Look):
                outcome = self._look(attempt, action.rows)
            elif isinstance(action, Adopt):
                self._aim(attempt, action.key)
                stamp = self.core.ours(action.item)
                assert stamp is not None
                self._won(action.key, action.item[p.VERSION_ATTR]["S"], stamp, action.item)
                return True
            else:
                assert isinstance(action, Sleep)
                outcome = await self._sleep(attempt, action)
        except BudgetSpent:
            outcome = Spent()
        except OutcomeUnknown as unknown:
            attempt.last_error = unknown.cause or attempt.last_error
            attempt.now = self.core.clock.monotonic()
            outcome = Failed(unknown=True)
        except (ThrottledError, RequestFailedError) as error:
            attempt.last_error = error
            attempt.now = self.core.clock.monotonic()
            outcome = Failed(unknown=False, code=error.code)
        attempt.end(outcome)
        return False

    def _aim(self, attempt: Attempt, key: str) -> None:
        """The next write goes to ``key``: the journal names its row before it is sent."""
        if key != attempt.key:
            self.core.journal_rows(key)
        attempt.key = key
        rows = self.target.rows(key)
        if rows not in self.written:
            self.written.append(rows)

    def _won(
        self, key: str, version: str, stamp: Stamp, item: Item | None, took_over: bool = False
    ) -> None:
        self._held = Held(self.target.rows(key), version, stamp, item, took_over)

    def _free_as_none(self, rows: dict[str, Item | None]) -> dict[str, Item | None]:
        """``rows`` with a free fenced row (no owner, counter kept) as no row at all."""
        fencing = self.core.fencing
        return {key: None if fencing and p.is_free(item) else item for key, item in rows.items()}

    async def _write(
        self, attempt: Attempt, action: Create | TakeOver | TakeOverAll, first: FirstWrite | None
    ) -> dict[str, Item | None] | None:
        """Create or take over every row the target writes at ``action.key`` (or go on from
        ``first``'s outcome); None when it won, else the rows its failed condition showed
        (read when the answer did not show them)."""
        core, requests, key = self.core, self.requests, action.key
        keys = self.target.rows(key)
        self._aim(attempt, key)
        try:
            if first is not None and first.sent:
                version, stamp = first.version, core.pending[first.version]
                reply = requests.replay(first)
            else:
                row, stamp = core.new_write(key)
                version = row.version
                rows = tuple(row._replace(key=each) for each in keys)
                observed = _observed(action)
                reply = await requests.send(
                    "write",
                    lambda limit: core.store.write_rows(core.table, rows, observed, limit),
                    attempt.deadline,
                )
        except OutcomeUnknown as unknown:
            await self._landed(attempt, unknown, keys, version)
            return None
        if reply is not None:
            self._won(key, version, stamp, reply.item, isinstance(action, TakeOver))
            return None
        attempt.answered = True
        item = requests.conflict_item
        if item is not None:
            return self._free_as_none({key: item})
        # DynamoDB returns the row with a failed condition (ALL_OLD), but some
        # implementations do not (docs/emulators.md), and a transaction never does.
        # "No item" must not mean "no row", or a contender retries its create in a
        # tight loop: read them.
        return self._free_as_none(await requests.read_rows(keys, attempt.deadline))

    async def _landed(
        self, attempt: Attempt, unknown: OutcomeUnknown, keys: tuple[str, ...], version: str
    ) -> None:
        """Return when a write of ``version`` to ``keys`` whose outcome is ``unknown`` landed
        (all or nothing: the first row shows it), else raise it."""
        core, requests, key = self.core, self.requests, keys[0]
        requests.watch_late(unknown.task)
        try:
            item = (await requests.read_rows(keys, attempt.deadline))[key]
        except (BudgetSpent, OutcomeUnknown, DynamoDBError):
            raise unknown from None
        if core.ours(item) is None:
            attempt.answered = True
            raise unknown from None  # not applied, or not yet: the decision backs off
        self._won(key, version, core.pending[version], item)

    def _look(self, attempt: Attempt, rows: dict[str, Item | None]) -> Looked:
        """Ours, free or held: each held row observed in the client's cache."""
        core, observations = self.core, self.core.observations
        # Registered before the holders are looked at: a release in a sync caller's
        # thread clears the holder first and then looks for waiters, so it either
        # sees this waiter or we see that the key is no longer held here.
        self._release_waiters(None)
        self._waiters = [
            (key, observations.wait((core.table, key), self.loop.create_future()))
            for key in self.target.wake_keys
        ]
        now = attempt.now = core.clock.monotonic()
        for key, item in rows.items():
            if item is not None and core.ours(item) is not None:
                return Looked((key, item), [], [], ())  # an earlier attempt of ours landed
        free = [key for key, item in rows.items() if item is None]
        if free and not self.target.rules.together:
            return Looked(None, free, [], ())
        held: list[Sighting] = []
        malformed: MalformedLockRow | None = None
        for key, item in rows.items():
            if item is None:
                continue  # free (rules that want every row look at the held ones too)
            try:
                row = p.parse_row(item, table=core.table, key=key, protocol=core.spec.protocol)
            except MalformedLockRow as error:  # the rules decide what it means
                malformed = malformed or error
                continue
            first_seen = observations.observe((core.table, key), row.identity, now)
            here = observations.held_here((core.table, key), row.owner)
            held.append(Sighting(key, row, first_seen + row.lease_ms / 1000, here))
        owners = tuple(sighting.row.owner for sighting in held)
        return Looked(None, free, held, owners, malformed)

    async def _sleep(self, attempt: Attempt, sleep: Sleep) -> Slept:
        """Sleep (a wait on held rows ends early when a guard of this client releases one)."""
        clock = self.core.clock
        left = attempt.deadline - clock.monotonic()
        if left <= 0:
            return Slept(None, time_left=False)
        waiters = self._waiters if sleep.wake else []
        woken: str | None = None
        try:
            await sleep_or_wake(clock, min(left, sleep.seconds), [wake for _, wake in waiters])
            woken = next((key for key, future in waiters if future.done()), None)
        finally:
            self._release_waiters(woken)
        if sleep.pace is not None:
            attempt.pace = sleep.pace
        return Slept(woken, woken is not None or clock.monotonic() < attempt.deadline)

    def _release_waiters(self, used: str | None) -> None:
        """Stop waiting; a wake this guard does not use is handed to the next waiter."""
        waiters, self._waiters = self._waiters, []
        observations = self.core.observations
        for key, future in waiters:
            resource = (self.core.table, key)
            observations.discard_waiter(resource, future)
            if future.done() and not future.cancelled() and key != used:
                observations.wake_next(resource)


def _observed(action: Create | TakeOver | TakeOverAll) -> dict[str, p.LockRow]:
    """The rows a write replaces, by key (none for a create)."""
    if isinstance(action, TakeOver):
        return {action.key: action.row}
    return action.observed if isinstance(action, TakeOverAll) else {}


def give_up_error(
    core: LeaseCore, target: Target, attempt: Attempt, give_up: GiveUp
) -> LockNotAcquired:
    """The error an acquisition that gives up raises (counted as a wait timeout)."""
    core.tally.wait_timeouts += 1  # a failed single attempt counts, as pydynox counts it
    if give_up.why == BUDGET:
        return _budget_spent(core, target, attempt)
    if give_up.why == UNREACHABLE:
        return _unreachable(core, attempt)
    holders = target.held(give_up.holders)
    if give_up.why == HELD:
        return gave_up(core, target, f"{holders} and wait_timeout=0 allows one attempt")
    cause = attempt.last_error
    if _at_deadline(core, attempt):
        return gave_up(
            core,
            target,
            f"{holders} and the invocation's deadline came before the wait_timeout of "
            f"{core.wait_s:g} s ran out (no lock outlives its invocation)",
            cause,
        )
    return gave_up(
        core,
        target,
        f"{holders} and the wait_timeout of {core.wait_s:g} s ran out{_last_failure(cause)}. "
        f"{target.advice}",
        cause,
    )


def _at_deadline(core: LeaseCore, attempt: Attempt) -> bool:
    """True when the caller's deadline, not the wait, ended the attempt."""
    return core.deadline is not None and attempt.deadline >= core.deadline


def _last_failure(cause: BaseException | None) -> str:
    return f" (last failure: {cause})" if cause is not None else ""


def _budget_spent(core: LeaseCore, target: Target, attempt: Attempt) -> LockNotAcquired:
    cause = attempt.last_error
    budget = "network budget of the single attempt" if attempt.single else "wait_timeout"
    sent = core.tally.read_requests + core.tally.write_requests
    if _at_deadline(core, attempt):
        if not sent:
            why = "the invocation's deadline had passed, so no request was made"
        else:
            why = f"the invocation's deadline came first{_last_failure(cause)}"
        return gave_up(core, target, f"{why} (no lock outlives its invocation)", cause)
    if attempt.answered or not sent:
        return gave_up(core, target, f"the {budget} ran out{_last_failure(cause)}", cause)
    failure = cause if cause is not None else "no answer within the request timeout"
    if _tls_refused(cause):
        why = (
            "This is neither an outage nor contention: the endpoint's TLS certificate "
            "failed verification, so nothing was sent; fix what the last failure names"
        )
    else:
        why = (
            "This is an outage, not contention: check the endpoint and Region, the network "
            "path to DynamoDB (a Lambda function in a VPC needs a DynamoDB VPC endpoint or "
            "a NAT gateway), the credentials and the table's throughput, then retry"
        )
    message = (
        f"lock {attempt.key!r} in table {core.table!r} was not acquired: the {budget} ran "
        f"out and DynamoDB answered none of its {sent} request{'s' if sent > 1 else ''} "
        f"(last failure: {failure}). {why}"
    )
    return not_acquired(core, message, attempt.key, cause, LockUnavailable)


def _unreachable(core: LeaseCore, attempt: Attempt) -> LockNotAcquired:
    if _tls_refused(attempt.last_error):
        what = (
            "the endpoint's TLS certificate failed verification, so nothing was sent. "
            "This is not contention or an outage"
        )
        check = "Fix what the last failure names, then retry"
    else:
        what = (
            "the endpoint refused the connection or its host name did not resolve. This is "
            "not contention"
        )
        check = (
            f"Check the endpoint URL and Region (`dynalease doctor --table {core.table}` "
            "checks them) and that the server is running"
        )
    message = (
        f"lock {attempt.key!r} in table {core.table!r} was not acquired: none of its "
        f"{attempt.refused} requests could connect (last failure: {attempt.last_error}); "
        f"{what}: the acquisition stopped at once instead of waiting out its wait_timeout "
        f"of {core.wait_s:g} s. {check}"
    )
    return not_acquired(core, message, attempt.key, attempt.last_error, LockUnavailable)


def _tls_refused(error: BaseException | None) -> bool:
    """A request refused by the TLS handshake's check of the endpoint's certificate."""
    return isinstance(error, RequestFailedError) and error.code == TLS_REFUSED
