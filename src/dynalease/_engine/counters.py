"""A lease's running request counts, and the :class:`~dynalease.metrics.LockMetrics` they make."""

from __future__ import annotations

from ..metrics import LockMetrics


class Tally:
    """The counts one lease keeps while it runs; only the runtime loop writes most of them.

    Each count starts at its class-level default; the first ``+=`` gives the instance its
    own. The release's delete sent from a sync caller's thread may overlap a renewal
    counting on the runtime thread; ``+=`` on one attribute from both could lose
    a count, so that thread counts in ``caller_writes`` and ``caller_wcu``.
    """

    # Requests and what they cost; the runtime loop counts them (and a sync
    # caller's thread, for its first create, before the loop sees the lease).
    read_requests: int = 0
    write_requests: int = 0
    conditional_failures: int = 0
    request_failures: int = 0
    consumed_rcu: float = 0.0
    consumed_wcu: float = 0.0
    # How the guard's life went.
    renewals: int = 0
    wait_ms: float = 0.0
    wait_timeouts: int = 0
    cleanup_failures: int = 0
    # Throttled requests and DynamoDB's reasons for them, each reason once.
    throttled_requests: int = 0
    throttling_reasons: tuple[str, ...] = ()
    # A sync caller's release, counted by that caller's thread alone.
    caller_writes: int = 0
    caller_wcu: float = 0.0

    def snapshot(self, *, lost: bool) -> LockMetrics:
        """A consistent-enough snapshot; each count is read once."""
        return LockMetrics(
            read_requests=self.read_requests,
            write_requests=self.write_requests + self.caller_writes,
            renewals=self.renewals,
            wait_ms=self.wait_ms,
            conditional_failures=self.conditional_failures,
            request_failures=self.request_failures,
            wait_timeouts=self.wait_timeouts,
            cleanup_failures=self.cleanup_failures,
            lost=lost,
            consumed_rcu=self.consumed_rcu,
            consumed_wcu=self.consumed_wcu + self.caller_wcu,
            throttled_requests=self.throttled_requests,
            throttling_reasons=self.throttling_reasons,
        )

    def throttled(self, reasons: list[dict[str, str]]) -> None:
        """Count a throttled request and remember its reasons."""
        self.throttled_requests += 1
        for reason in reasons:
            if reason["reason"] not in self.throttling_reasons:
                self.throttling_reasons += (reason["reason"],)
