"""The lease and the wait an invocation can afford: what is left after ``reserve_time`` and
the cleanup budget, or a hard timeout leaves the row behind for a whole lease.
"""

from __future__ import annotations

import math
from typing import Any

from .._engine.protocol import MAX_DURATION_S, MIN_LEASE_S, cleanup_budget
from ..exceptions import LockNotAcquired

__all__ = [
    "DEFAULT_LEASE_S",
    "DEFAULT_WAIT_S",
    "NoTimeLeft",
    "acquisition_wait",
    "invocation_lease",
    "remaining_seconds",
]

DEFAULT_LEASE_S = 30.0  # distributed_lock's default
DEFAULT_WAIT_S = 35.0  # distributed_lock's default


class NoTimeLeft(Exception):
    """The invocation's remaining time cannot cover reserve plus cleanup: do not try."""

    def __init__(self, remaining_s: float, reserve_s: float, lease_s: float) -> None:
        super().__init__("no time left to acquire")
        self.remaining_s = remaining_s
        self.reserve_s = reserve_s
        self.lease_s = lease_s
        self.cleanup_s = cleanup_budget(lease_s)

    def to_lock_error(self, table: str, key: str) -> LockNotAcquired:
        return LockNotAcquired(
            f"lock {key!r} in table {table!r} was not acquired, and no request was made: "
            f"the invocation had {self.remaining_s:.3f} s left, and reserve_time "
            f"({self.reserve_s:g} s) plus the cleanup budget of the {self.lease_s:g} s lease "
            f"({self.cleanup_s:g} s) leave no time to try. Raise the function timeout, or "
            "lower reserve_time (or lease_duration, if you set it)",
            table=table,
            key=key,
        )


def remaining_seconds(context: Any) -> float | None:
    """Seconds left (0: time is up), or None when the context has no remaining time."""
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if getter is None:
        return None
    millis = getter()
    if isinstance(millis, bool) or not isinstance(millis, int | float) or math.isnan(millis):
        raise TypeError(
            "context.get_remaining_time_in_millis() must return a number of milliseconds, "
            f"got {type(millis).__name__}; pass the Lambda context the runtime gave the handler"
        )
    return max(0.0, float(millis) / 1000)


def invocation_lease(remaining_s: float | None) -> float:
    """The lease when ``lease_duration`` is not given: the invocation's remaining time, at
    most the lock's 30 s default (and at least the shortest lease).

    No guard outlives its invocation (the deadline bound), so a longer lease buys nothing
    in Lambda; sized to the invocation, its cleanup budget fits a 3 s function, and a row
    left by a crash is taken over within the function's own timeout.
    """
    if remaining_s is None:
        return DEFAULT_LEASE_S
    return min(max(remaining_s, MIN_LEASE_S), DEFAULT_LEASE_S)


def usable_time(remaining_s: float, *, reserve_s: float, lease_s: float) -> float:
    return remaining_s - reserve_s - cleanup_budget(lease_s)


def acquisition_wait(
    remaining_s: float | None,
    *,
    reserve_s: float,
    lease_s: float,
    wait_timeout: float | None,
) -> float:
    """The ``wait_timeout`` for one acquisition; :class:`NoTimeLeft` when nothing is usable."""
    if remaining_s is None:
        return DEFAULT_WAIT_S if wait_timeout is None else wait_timeout
    usable = usable_time(remaining_s, reserve_s=reserve_s, lease_s=lease_s)
    if usable <= 0:
        raise NoTimeLeft(remaining_s, reserve_s, lease_s)
    if wait_timeout is None:
        return min(usable, MAX_DURATION_S)
    return min(wait_timeout, usable)
