"""Renewal: keep a held lease valid (docs/protocol.md, "Renewal"), and notice when it is not.

A guard renews every row it holds at once (several in one transaction), so its rows keep
one version.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from .. import _tracing
from ..exceptions import DynamoDBError
from . import protocol as p
from .base import LeaseCore, LeaseEvents, logged_key
from .scheduling import deferred_renewals
from .states import State
from .store import BudgetSpent, OutcomeUnknown

if TYPE_CHECKING:
    import asyncio

    from .requests import Requests
    from .runtime import Runtime

log = logging.getLogger("dynalease")

#: Validity below this cannot be renewed in time.
EPSILON_S = 1e-6


class Renewer:
    """The renewal task of a held lease and the validity checks around it."""

    def __init__(self, core: LeaseCore, events: LeaseEvents) -> None:
        self.core = core
        self._events = events
        self.task: asyncio.Task[None] | None = None
        self._stopped = False
        #: The acquisition's span link (:mod:`dynalease._tracing`), set by the face that
        #: traced it: renewals start traces of their own, linked to it.
        self.trace_link: Any = None

    @property
    def state(self) -> State:
        return self.core.state

    def defer(self, owner: Runtime | asyncio.AbstractEventLoop) -> None:
        """Start renewing when the first renewal is due (from any thread)."""
        deferred_renewals(owner, self.core.clock).add(self)

    def start_renewing(self) -> None:
        """Start the renewal task (on the runtime loop) unless released meanwhile."""
        from .watch import watched  # the loop side of renewing, loaded by the first renewal

        if self.core.state is State.HELD and self.task is None and not self._stopped:
            self.task = watched(self, self.core, self._events, self._run)

    def stop(self) -> None:
        """Stop renewing for good: cancel the task, and never start one."""
        self._stopped = True
        task, self.task = self.task, None
        if task is not None and not task.done():
            # A renewal in flight cannot recreate the row: its condition needs our
            # owner and version on an existing row, and the delete removes it.
            task.cancel()

    def renewal_due(self) -> float:
        """The monotonic time of the first renewal after acquiring, or the deadline if sooner."""
        validity = self.core.validity
        if validity is None:
            return math.inf
        due = validity.monotonic + p.renew_interval(self.core.lease_s)
        deadline = self.core.deadline
        return due if deadline is None else min(due, deadline)

    def check_validity(self, monotonic: float, wall: float) -> None:
        """Mark the guard lost if its validity ran out by these readings of its clock."""
        core = self.core
        validity = core.validity
        if (
            core.state is State.HELD
            and validity is not None
            and validity.remaining_at(monotonic, wall, core.spec.span) <= EPSILON_S
        ):
            core.lose("its lease expired before a renewal was confirmed")

    async def _run(self, requests: Requests) -> None:
        if self.trace_link is not None:  # renewals: traces of their own, linked
            _tracing.renewing(self.trace_link)
        await self._renew_until_done(requests)

    async def _renew_until_done(self, requests: Requests) -> None:
        core, clock = self.core, self.core.clock
        interval = p.renew_interval(core.lease_s)
        retry = p.renew_retry_interval(core.lease_s)
        next_attempt = self.renewal_due()
        while core.state is State.HELD:
            validity = core.validity
            assert validity is not None
            left = validity.remaining(clock, core.spec.span)
            if left <= EPSILON_S:
                core.lose("its lease expired before a renewal was confirmed")
                return
            now = clock.monotonic()
            if core.deadline is not None and now >= core.deadline:
                self._events.deadline_reached()
                return
            end = math.inf if core.deadline is None else core.deadline
            wait = min(next_attempt, end) - now
            if wait > 0:
                await clock.sleep(min(wait, left))  # the watch covers clock jumps
                continue
            if await self._renew_once(requests):
                assert core.validity is not None
                next_attempt = core.validity.monotonic + interval
            else:
                next_attempt = clock.monotonic() + retry

    async def _renew_once(self, requests: Requests) -> bool:
        """One renewal attempt; True when confirmed, False to retry soon."""
        core = self.core
        assert core.validity is not None and core.version is not None
        deadline = core.clock.monotonic() + core.validity.remaining(core.clock, core.spec.span)
        current, store, holder = core.version, core.store, core.spec.holder.unsent
        version, stamp = core.new_version()
        try:
            reply = await requests.send(
                "write",
                lambda limit: store.renew_rows(
                    core.table, core.keys, core.owner, current, version, limit, holder
                ),
                deadline,
            )
        except BudgetSpent:
            return False
        except OutcomeUnknown:
            return await self._read_and_reconcile(requests, None, deadline, current)
        except DynamoDBError as error:
            log.debug(
                "dynalease: renewal of %s failed: %s", logged_key(core.key), core.log_text(error)
            )
            return False
        if reply is None:  # the condition failed: whose row is it now?
            return await self._read_and_reconcile(
                requests, requests.conflict_item, deadline, current
            )
        if core.state is State.HELD:
            core.confirm(version, stamp)
            core.spec.holder.sent(holder)
            core.tally.renewals += 1
        return True

    async def _read_and_reconcile(
        self, requests: Requests, item: dict[str, Any] | None, deadline: float, current: str
    ) -> bool:
        """Reconcile with ``item``, or with a strong read of the rows when there is none.

        The rows show one version (all or nothing): one gone or not ours loses the guard.
        """
        core = self.core
        try:
            if item is None:
                items = await requests.read_rows(core.keys, deadline)
                lost = [row for row in items.values() if not core.owns(row)]
                item = lost[0] if lost else items[core.keys[0]]
        except (BudgetSpent, OutcomeUnknown, DynamoDBError):
            return False
        if core.state is not State.HELD:
            return False
        stamp = core.ours(item)
        if stamp is not None:
            core.confirm(item[p.VERSION_ATTR]["S"] if item else "", stamp)
            core.tally.renewals += 1
            return True
        if core.owns(item) and item.get(p.VERSION_ATTR) == {"S": current}:
            return False  # not applied; retry
        holder = "the row is gone" if item is None else "another owner took it over"
        core.lose(f"{holder} (renewal rejected)")
        return False
