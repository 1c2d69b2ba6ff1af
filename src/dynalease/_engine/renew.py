"""Renewal: keep a held lease valid, and notice when it is not.

Every lease/3 the renewer sends ``UpdateItem SET version = new`` conditioned on
our owner and current version; a failed attempt is retried every
min(lease/12, 1 s). Validity is only ever extended by a confirmed renewal,
stamped with the time it was sent. An attempt with an unknown outcome is
reconciled with a strong read; a row that shows another owner (or none) means
the lease is lost.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from .. import _tracing
from ..exceptions import DynamoDBError
from . import protocol as p
from .base import logged_key
from .clock import Stamp
from .requests import EPSILON_S, BudgetSpent, OutcomeUnknown, Requests
from .scheduling import ValidityWatch
from .states import State

log = logging.getLogger("dynalease")


class Renewing(Requests):
    """The renewal task of a held lease and the validity checks around it."""

    def start_renewing(self) -> None:
        """Start the renewal task (on the runtime loop) unless released meanwhile."""
        if self.state is State.HELD and self._renewer is None:
            self._renewer = asyncio.ensure_future(self._renew_loop())

    def renewal_due(self) -> float:
        """The monotonic time of the first renewal after acquiring, or the deadline if sooner."""
        validity = self._validity
        if validity is None:
            return math.inf
        due = validity.monotonic + p.renew_interval(self.lease_s)
        deadline = self.deadline
        return due if deadline is None or due < deadline else deadline

    def check_validity(self, monotonic: float, wall: float) -> None:
        """Mark the guard lost if its validity ran out by the given readings of its clock.

        Called by the shared watches, which read the clock once per sweep.
        """
        validity = self._validity
        if (
            self.state is State.HELD
            and validity is not None
            and validity.remaining_at(monotonic, wall, self._span) <= EPSILON_S
        ):
            self._lose("its lease expired before a renewal was confirmed")

    async def _renew_loop(self) -> None:
        if self._trace_link is not None:  # renewals: traces of their own, linked
            _tracing.renewing(self._trace_link)
        watch = ValidityWatch.of(self.clock)
        watch.add(self)
        try:
            await self._renew_until_done()
        finally:
            watch.discard(self)

    async def _renew_until_done(self) -> None:
        interval = p.renew_interval(self.lease_s)
        retry = p.renew_retry_interval(self.lease_s)
        assert self._validity is not None
        next_attempt = self._validity.monotonic + interval
        while self.state is State.HELD:
            validity = self._validity
            assert validity is not None
            left = validity.remaining(self.clock, self._span)
            if left <= EPSILON_S:  # a sub-microsecond remainder cannot be renewed in time
                self._lose("its lease expired before a renewal was confirmed")
                return
            now = self.clock.monotonic()
            deadline = self.deadline
            if deadline is not None:
                if now >= deadline:
                    self.end_at_deadline()
                    return
                wait = min(next_attempt, deadline) - now
            else:
                wait = next_attempt - now
            if wait > 0:
                await self.clock.sleep(min(wait, left))  # the watch covers clock jumps
                continue
            confirmed = await self._renew_once()
            if confirmed:
                assert self._validity is not None
                next_attempt = self._validity.monotonic + interval
            else:
                next_attempt = self.clock.monotonic() + retry

    async def _renew_once(self) -> bool:
        """One renewal attempt; True when confirmed, False to retry soon."""
        assert self._validity is not None and self._version is not None
        deadline = self.clock.monotonic() + self._validity.remaining(self.clock, self._span)
        current = self._version
        version = p.new_token()
        stamp = Stamp.now(self.clock)
        self._pending[version] = stamp
        try:
            reply = await self._request(
                "write",
                lambda limit: self.store.renew(
                    self.table, self.key, self.owner, current, version, limit
                ),
                deadline,
            )
        except BudgetSpent:
            return False
        except OutcomeUnknown:
            try:
                item = await self._read_row(deadline)
            except (BudgetSpent, OutcomeUnknown, DynamoDBError):
                return False
            return self._reconcile_renewal(item, current)
        except DynamoDBError as error:
            log.debug(
                "dynalease: renewal of %s failed: %s", logged_key(self.key), self._log_text(error)
            )
            return False
        if reply is None:
            item = self._conflict_item
            if item is None:
                try:
                    item = await self._read_row(deadline)
                except (BudgetSpent, OutcomeUnknown, DynamoDBError):
                    return False
            return self._reconcile_renewal(item, current)
        if self.state is State.HELD:
            self._confirm(version, stamp)
            self.tally.renewals += 1
        return True

    def _reconcile_renewal(self, item: dict[str, Any] | None, current: str) -> bool:
        if self.state is not State.HELD:
            return False
        stamp = self._ours(item)
        if stamp is not None:
            version = item[p.VERSION_ATTR]["S"] if item else ""
            self._confirm(version, stamp)
            self.tally.renewals += 1
            return True
        if (
            item is not None
            and item.get(p.OWNER_ATTR) == {"S": self.owner}
            and item.get(p.VERSION_ATTR) == {"S": current}
        ):
            return False  # not applied; retry
        holder = "the row is gone" if item is None else "another owner took it over"
        self._lose(f"{holder} (renewal rejected)")
        return False
