"""A lease's request counters: the running tally and the snapshot handed to users."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Counters:
    """A snapshot of a lease's request counters (see ``dynalease.metrics``)."""

    read_requests: int
    write_requests: int
    renewals: int
    wait_ms: float
    conditional_failures: int
    request_failures: int
    wait_timeouts: int
    cleanup_failures: int
    lost: bool
    consumed_rcu: float
    consumed_wcu: float


class Tally:
    """The counts one lease keeps while it runs; only the runtime loop writes most of them."""

    __slots__ = (
        "caller_wcu",
        "caller_writes",
        "cleanup_failures",
        "conditional_failures",
        "rcu",
        "reads",
        "renewals",
        "request_failures",
        "wait_ms",
        "wait_timeouts",
        "wcu",
        "writes",
    )

    def __init__(self) -> None:
        self.reads = 0
        self.writes = 0
        self.renewals = 0
        self.wait_ms = 0.0
        self.conditional_failures = 0
        self.request_failures = 0
        self.wait_timeouts = 0
        self.cleanup_failures = 0
        self.rcu = 0.0
        self.wcu = 0.0
        # The release's delete sent from a sync caller's thread may overlap a renewal
        # counting on the runtime thread; ``+=`` on one attribute from both could
        # lose a count, so that thread counts its own.
        self.caller_writes = 0
        self.caller_wcu = 0.0

    def snapshot(self, *, lost: bool) -> Counters:
        """A consistent-enough snapshot; each field is read once."""
        return Counters(
            read_requests=self.reads,
            write_requests=self.writes + self.caller_writes,
            renewals=self.renewals,
            wait_ms=self.wait_ms,
            conditional_failures=self.conditional_failures,
            request_failures=self.request_failures,
            wait_timeouts=self.wait_timeouts,
            cleanup_failures=self.cleanup_failures,
            lost=lost,
            consumed_rcu=self.rcu,
            consumed_wcu=self.wcu + self.caller_wcu,
        )
