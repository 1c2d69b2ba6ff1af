"""LockMetrics: what one guard's acquisition cost."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LockMetrics"]


@dataclass(frozen=True, slots=True)
class LockMetrics:
    """A snapshot of one guard's requests, renewals and capacity.

    ``read_requests`` counts contention polls and reconciliation reads;
    ``write_requests`` counts acquisition, takeover, renewal and release
    attempts. An uncontended guard released before its first renewal makes two
    writes; each confirmed renewal adds one. Capacity totals include only
    successful responses that report capacity: failed conditions and lost
    responses may consume capacity too, so these totals are not the bill.
    ``dynalease.testing.MemoryBackend`` reports the capacity moto computes.
    ``throttled_requests`` counts the requests DynamoDB throttled, and
    ``throttling_reasons`` names why (DynamoDB's ``ThrottlingReasons``, each once,
    such as ``TableWriteKeyRangeThroughputExceeded``: a hot lock key).
    """

    read_requests: int = 0
    write_requests: int = 0
    renewals: int = 0
    wait_ms: float = 0.0
    conditional_failures: int = 0
    request_failures: int = 0
    wait_timeouts: int = 0
    cleanup_failures: int = 0
    lost: bool = False
    consumed_rcu: float = 0.0
    consumed_wcu: float = 0.0
    throttled_requests: int = 0
    throttling_reasons: tuple[str, ...] = ()
