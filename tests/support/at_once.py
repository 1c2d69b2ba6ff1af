"""Calls released at once from many threads (the single-flight tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["all_called", "together"]


def together(count: int, call: Callable[[int], Any], join_s: float = 120.0) -> list[Any]:
    """``call(i)`` from ``count`` threads released by one barrier; each one's result or error."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def one(index: int) -> None:
        barrier.wait()
        try:
            results[index] = call(index)
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(join_s)
    return results


def all_called(flight: Any, calls: int, within_s: float = 60.0) -> None:
    """Block until ``flight`` (a ``SingleFlight``) counted ``calls`` calls: each of them began
    (its start time taken) before a runner that waits here stores its result."""
    deadline = time.monotonic() + within_s
    while flight.metrics.calls < calls:
        assert time.monotonic() < deadline, f"only {flight.metrics.calls} of {calls} calls began"
        time.sleep(0.01)
