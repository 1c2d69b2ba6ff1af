"""The deadline that bounds every guard acquired under it: no hold outlives its caller's time.

A caller with a hard end (the Lambda middleware, for the invocation it runs) sets
:data:`TIME_LEFT` for the code it runs. Every lease whose acquisition starts in
that context (the same thread, or a task or future made from it) reads it once and
keeps the deadline as a monotonic time of its own clock. Renewal then ends there:
at the deadline the lease is marked lost and its row deleted owner-conditionally
at once, although nothing stops the caller's code (on Lambda Managed Instances an
invocation past its timeout keeps running). The deadline is checked where
renewals are scheduled, so a hold that ends in time costs nothing more.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable

from .base import LeaseCore, logged_key
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
    """Warn when a durable function suspends (``SuspendExecution``) inside a held guard.

    The invocation ends at a durable wait, so the guard's block is left and the lock
    released: it cannot be held across the wait. Any other ``BaseException``
    (``KeyboardInterrupt``, ``SystemExit``) is not a suspension and says nothing.
    """
    if any(kind.__name__ == "SuspendExecution" for kind in type(exc).__mro__):
        log.warning(
            "dynalease: lock %s in table %r released: the durable function suspended "
            "(%s) inside its block, and a lock cannot be held across a durable wait; "
            "take and release it within one step (context.step) instead",
            logged_key(lease.key),
            lease.table,
            type(exc).__name__,
        )
