"""The deadline that bounds every guard acquired under it: no hold outlives its caller's time.

The Lambda middleware sets :data:`TIME_LEFT`; a lease whose acquisition starts in
that context keeps the deadline on its own clock, and at it the lease is lost and its
row deleted, although the caller's code may run on (docs/lambda.md, "A lock never
outlives its invocation").
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._redact import logged_key

if TYPE_CHECKING:  # the Lambda middleware sets TIME_LEFT without loading the lease
    from .base import LeaseCore
    from .clock import Clock

__all__ = ["TIME_LEFT", "deadline_on", "suspension_warning"]

log = logging.getLogger("dynalease")

#: Seconds left before the caller's deadline (0 or less: passed), read when an
#: acquisition starts. Unset: guards are not bounded.
TIME_LEFT: contextvars.ContextVar[Callable[[], float]] = contextvars.ContextVar(
    "dynalease_time_left"
)


def deadline_on(clock: Clock) -> float | None:
    """The deadline of the current context on ``clock``'s monotonic time, or None."""
    time_left = TIME_LEFT.get(None)
    if time_left is None:
        return None
    return clock.monotonic() + time_left()


def suspension_warning(lease: LeaseCore, exc: BaseException) -> None:
    """Warn when a durable function suspends (``SuspendExecution``) inside a held guard:
    the invocation ends there, so the lock cannot be held across the wait."""
    if any(kind.__name__ == "SuspendExecution" for kind in type(exc).__mro__):
        log.warning(
            "dynalease: lock %s in table %r released: the durable function suspended "
            "(%s) inside its block, and a lock cannot be held across a durable wait; "
            "take and release it within one step (context.step) instead",
            logged_key(lease.key),
            lease.table,
            type(exc).__name__,
        )
