"""``dynalease doctor --measure``: request latencies of real lock cycles, and the lease they
support: a lock request is bounded by at most ``L/3`` (docs/operations.md), so the shortest
safe lease keeps ``L/3`` a margin above the measured p99. The timing wrapper goes only on
the measuring command's own client.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from .._engine.store import LockStore, Request, Transport
from ..client import DynamoDBClient

LABELS = {
    "PutItem": "acquire (PutItem)",
    "UpdateItem": "renew (UpdateItem)",
    "TransactWriteItems": "check_in (TransactWriteItems)",
    "DeleteItem": "release (DeleteItem)",
    "GetItem": "read (GetItem)",
}
#: A request timeout must cover the p99 this many times over.
MARGIN = 3.0
DEFAULT_LEASE_S = 30.0


class Timings:
    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)

    def add(self, operation: str, seconds: float) -> None:
        self.samples[operation].append(seconds)

    def install(self, client: DynamoDBClient) -> None:
        store: LockStore = client._lock_store
        store.transport = _Timed(store.transport, self)
        client._items = _Timed(client._items, self)  # transactions (check_in) go this way


class _Timed:
    def __init__(self, inner: Transport, timings: Timings) -> None:
        self._inner = inner
        self._timings = timings

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # what is not timed: blocking, prepare, close

    def handle(self, request: Request) -> dict[str, Any]:
        with self._timed(request.operation):
            return self._inner.handle(request)

    async def handle_async(self, request: Request) -> dict[str, Any]:
        with self._timed(request.operation):
            return await self._inner.handle_async(request)

    @contextlib.contextmanager
    def _timed(self, operation: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._timings.add(operation, time.perf_counter() - start)


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank; ``share`` in 0..1, ``values`` not empty."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def shortest_lease(p99_s: float) -> float:
    """The shortest lease whose request bound (``L/3``) is ``MARGIN`` times the p99."""
    return max(1.0, math.ceil(3 * MARGIN * p99_s))


def render(timings: Timings, tries: int) -> str:
    lines = [f"{'request':32} {'n':>4} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"]
    worst = 0.0
    for operation in sorted(timings.samples, key=lambda o: [*LABELS, o].index(o)):
        values = timings.samples[operation]
        p99 = percentile(values, 0.99)
        worst = max(worst, p99)
        lines.append(
            f"{LABELS.get(operation, operation):32} {len(values):>4} "
            f"{percentile(values, 0.5) * 1000:>8.1f} {p99 * 1000:>8.1f} {max(values) * 1000:>8.1f}"
        )
    lease = shortest_lease(worst)
    lines += [
        "",
        f"{tries} lock cycles; the slowest request type's p99 is {worst * 1000:.1f} ms.",
        f"- lease_duration: at least {lease:g} s here; each request's bound (L/3) is then "
        f"{lease / 3 / max(worst, 1e-6):.0f}x that p99 (the aim: at least {MARGIN:g}x), and the "
        f"default {DEFAULT_LEASE_S:g} s leaves {DEFAULT_LEASE_S / 3 / max(worst, 1e-6):.0f}x.",
        f"- renewals come every L/3 ({DEFAULT_LEASE_S / 3:g} s at the default); a holder cut "
        "off stops being valid at 0.9 L.",
        "- wait_timeout: about as long as the work holding the key usually takes, plus one "
        "lease when a crashed holder must be taken over.",
    ]
    return "\n".join(lines)
