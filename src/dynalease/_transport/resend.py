"""The lean path's one resend loop, in the engine driver's shape: a rule decides from a
value (the failure, the attempt it ended, the time left) whether and after what pause to
send again; :func:`resend` only sends, sleeps and asks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["PauseRule", "resend"]

T = TypeVar("T")

#: ``(failure, attempt, seconds left)`` -> the pause before the next attempt, or None to
#: give up (the failure is raised). Attempts count from 1.
PauseRule = Callable[[Exception, int, float], float | None]


def resend(send: Callable[[float], T], rule: PauseRule, within: float) -> T:
    """``send(seconds left)`` until it answers or ``rule`` gives up, all within ``within``
    seconds (``math.inf``: no bound of our own)."""
    end = time.monotonic() + within
    attempt = 1
    while True:
        try:
            return send(end - time.monotonic())
        except Exception as failure:
            pause = rule(failure, attempt, end - time.monotonic())
            if pause is None:
                raise
        time.sleep(pause)
        attempt += 1
