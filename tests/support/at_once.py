"""Calls released at once from many threads (the single-flight tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["together"]


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
