"""What an acquisition aims at: a :class:`Target`, and a lock's, :class:`KeyTarget`.

The acquire driver (``acquire.py``) and its decision (``attempts.py``) are the
same for a lock and a semaphore; a target says which rows they aim at, how
those rows are read, which rules pace the tries, and how the errors read
(:func:`give_up_error`). A semaphore's is ``permits.PermitTarget``.
"""

from __future__ import annotations

from typing import Protocol

from ..exceptions import LockNotAcquired, LockUnavailable
from .attempts import BUDGET, HELD, LOCK_RETRIES, UNREACHABLE, Attempt, GiveUp, Item, Rules
from .base import LeaseCore
from .pacing import ContentionPoll, KeysPoll
from .requests import Requests

__all__ = ["KeyTarget", "KeysTarget", "Target", "give_up_error", "not_acquired"]


class Target(Protocol):
    """What an acquisition aims at: its rows, how it reads them, how its errors read."""

    rules: Rules
    #: The row the first create goes to.
    first_key: str
    #: The rows whose release by a guard of this client wakes a waiting acquisition.
    wake_keys: tuple[str, ...]
    #: What to do when the wait runs out, for the error message.
    advice: str
    #: Every row a multi-key guard holds at once (empty for a lock and a semaphore).
    together: tuple[str, ...]

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        """Every row aimed at, strongly consistent (None where there is none)."""
        ...

    def held(self, owners: tuple[str, ...]) -> str:
        """Who holds the rows, as the error message says it."""
        ...

    def not_acquired(
        self, core: LeaseCore, why: str, cause: BaseException | None = None
    ) -> LockNotAcquired:
        """The error of an acquisition that gave up, for ``why``."""
        ...


class KeyTarget:
    """A lock's acquisition: one row, paced by ``protocol.contention_poll``."""

    rules = Rules(LOCK_RETRIES, ContentionPoll(), look_after_takeover=True)
    advice = "Retry later or raise wait_timeout"
    together: tuple[str, ...] = ()

    def __init__(self, key: str) -> None:
        self.first_key = key
        self.wake_keys: tuple[str, ...] = (key,)

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        """The lock's row."""
        return {self.first_key: await requests.read_row(self.first_key, deadline)}

    def held(self, owners: tuple[str, ...]) -> str:
        """``it is held by another owner`` (other holders' tokens stay out of messages)."""
        return "it is held by another owner"

    def not_acquired(
        self, core: LeaseCore, why: str, cause: BaseException | None = None
    ) -> LockNotAcquired:
        """``lock <key> in table <table> was not acquired: <why>``."""
        subject = f"lock {core.key!r} in table {core.table!r} was not acquired"
        return not_acquired(core, f"{subject}: {why}", core.key, cause)


class KeysTarget:
    """A multi-key guard's acquisition: every row at once, in one transaction.

    The rows are written together only when each is free or stale (unchanged
    for its stored lease); otherwise the guard reads them all again (one
    ``BatchGetItem``) after the lock's pacing, until all are free at once.
    """

    rules = Rules(LOCK_RETRIES, KeysPoll(), look_after_takeover=False, together=True)
    advice = "Retry later or raise wait_timeout"

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.first_key = keys[0]
        self.wake_keys = self.together = keys

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        """Every row, from one strongly consistent ``BatchGetItem``."""
        return await requests.read_rows(self.together, deadline)

    def held(self, owners: tuple[str, ...]) -> str:
        """``3 of its 5 keys are held by other owners``."""
        count = len(owners)
        return f"{count} of its {len(self.together)} keys {'is' if count == 1 else 'are'} held"

    def not_acquired(
        self, core: LeaseCore, why: str, cause: BaseException | None = None
    ) -> LockNotAcquired:
        """``lock on 5 keys (first 'a') in table <table> was not acquired: <why>``."""
        subject = (
            f"lock on {len(self.together)} keys (first {core.key!r}) in table {core.table!r} "
            "was not acquired (nothing was written)"
        )
        return not_acquired(core, f"{subject}: {why}", core.key, cause)


def not_acquired(
    core: LeaseCore, message: str, key: str, cause: BaseException | None
) -> LockNotAcquired:
    """:class:`LockNotAcquired` with ``message``, naming ``key`` and this guard's owner."""
    error = LockNotAcquired(
        message, table=core.table, key=key, owner=core.owner, request_id=core.last_request_id
    )
    error.__cause__ = cause
    return error


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
        return target.not_acquired(core, f"{holders} and wait_timeout=0 allows one attempt")
    return target.not_acquired(
        core, f"{holders} and the wait_timeout of {core.wait_s:g} s ran out. {target.advice}"
    )


def _budget_spent(core: LeaseCore, target: Target, attempt: Attempt) -> LockNotAcquired:
    """Out of budget: contention or slow answers, or an outage when nothing was answered."""
    cause = attempt.last_error
    budget = "network budget of the single attempt" if attempt.single else "wait_timeout"
    sent = core.tally.read_requests + core.tally.write_requests
    if attempt.answered or not sent:
        detail = f" (last failure: {cause})" if cause is not None else ""
        return target.not_acquired(core, f"the {budget} ran out{detail}", cause)
    failure = cause if cause is not None else "no answer within the request timeout"
    error = LockUnavailable(
        f"lock {attempt.key!r} in table {core.table!r} was not acquired: the {budget} ran "
        f"out and DynamoDB answered none of its {sent} request{'s' if sent > 1 else ''} "
        f"(last failure: {failure}). This is an outage, not contention: check the "
        "endpoint and Region, the network path to DynamoDB (a Lambda function in a VPC "
        "needs a DynamoDB VPC endpoint or a NAT gateway), the credentials and the "
        "table's throughput, then retry",
        table=core.table,
        key=attempt.key,
        owner=core.owner,
        request_id=core.last_request_id,
    )
    error.__cause__ = cause
    return error


def _unreachable(core: LeaseCore, attempt: Attempt) -> LockUnavailable:
    """Nothing could connect for a while: most likely a wrong endpoint or Region."""
    error = LockUnavailable(
        f"lock {attempt.key!r} in table {core.table!r} was not acquired: none of its "
        f"{attempt.refused} requests could connect (last failure: {attempt.last_error}); "
        "the endpoint refused the connection or its host name did not resolve. This is "
        "not contention: the acquisition stopped at once instead of waiting out its "
        f"wait_timeout of {core.wait_s:g} s. Check the endpoint URL and Region (`dynalease "
        f"doctor --table {core.table}` checks them) and that the server is running",
        table=core.table,
        key=attempt.key,
        owner=core.owner,
        request_id=core.last_request_id,
    )
    error.__cause__ = attempt.last_error
    return error
