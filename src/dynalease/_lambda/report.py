"""What the Lambda middleware tells logs and metrics about each lock.

One log line per lock, when its story ends (released, lost, release failed,
contention, no time left), so a log search finds one record per invocation or
record. Keys often carry customer or tenant identifiers, so by default the log
shows a short SHA-256 of the key next to the template, which is enough to
follow one key across services without writing identifiers into logs;
``log_key="key"`` logs the key itself. Without ``log_key`` the rule is the
engine's own (``DYNALEASE_LOG_KEYS``, hash by default), so every dynalease log
line names a key the same way.

A lock that was not acquired is reported as ``contention`` (metric
``LockContention``) or, when DynamoDB answered none of its requests, as
``unavailable`` (metric ``LockUnavailable``): an outage is not a busy key.
"""

from __future__ import annotations

import logging
from typing import Any

from .._redact import escaped, key_hash, log_keys
from ..exceptions import LockNotAcquired, LockUnavailable
from ..metrics import LockMetrics

__all__ = ["LOG_KEY_CHOICES", "Reporter", "key_hash"]

_library_log = logging.getLogger("dynalease.middleware")

LOG_KEY_CHOICES = ("hash", "key")

# Outcome -> (log level with a user's logger, with the library logger). A user
# who passes a logger wants the routine lines; the library stays quiet unless
# something needs attention.
_LEVELS = {
    "released": ("info", logging.DEBUG),
    "contention": ("info", logging.INFO),
    "unavailable": ("warning", logging.WARNING),
    "no_time": ("warning", logging.INFO),
    "lost": ("warning", logging.WARNING),
    "release_failed": ("warning", logging.WARNING),
}


class Reporter:
    """Writes the structured log line and EMF metrics of each lock."""

    __slots__ = ("_log_key", "_logger", "_metrics", "_template")

    def __init__(self, *, template: str, logger: Any, metrics: Any, log_key: str | None) -> None:
        """Check the options, at decoration time.

        ``logger`` needs ``info``/``warning`` taking ``extra=`` (stdlib or Powertools
        ``Logger``), ``metrics`` needs ``add_metric(name=, unit=, value=)`` (Powertools
        ``Metrics``); ``log_key=None`` follows ``DYNALEASE_LOG_KEYS`` (hash by default).
        """
        if logger is not None and not all(
            callable(getattr(logger, method, None)) for method in ("info", "warning")
        ):
            raise TypeError(
                "logger must be a Powertools Logger or a logging.Logger, "
                f"got {type(logger).__name__}"
            )
        if metrics is not None and not callable(getattr(metrics, "add_metric", None)):
            raise TypeError(f"metrics must be a Powertools Metrics, got {type(metrics).__name__}")
        if log_key is not None and log_key not in LOG_KEY_CHOICES:
            raise ValueError(
                f"log_key must be 'hash' (log a SHA-256 prefix of the key), 'key' (log the "
                f"key itself) or None (DYNALEASE_LOG_KEYS, else 'hash'), got {log_key!r}"
            )
        self._template = template
        self._logger = logger
        self._metrics = metrics
        self._log_key = log_key

    def acquired(self, stats: LockMetrics) -> None:
        self._metric("LockAcquired", "Count", 1)
        self._metric("LockWaitMs", "Milliseconds", stats.wait_ms)

    def not_acquired(
        self,
        table: str,
        key: str,
        stats: LockMetrics,
        remaining_s: float | None,
        error: LockNotAcquired | None = None,
    ) -> None:
        """Contention, or (``error`` a :class:`LockUnavailable`) DynamoDB unreachable."""
        if isinstance(error, LockUnavailable):
            self._metric("LockUnavailable", "Count", 1)
            outcome = "unavailable"
        else:
            self._metric("LockContention", "Count", 1)
            outcome = "contention"
        self._metric("LockWaitMs", "Milliseconds", stats.wait_ms)
        self._line(outcome, table, key, stats, remaining_s)

    def no_time(self, table: str, key: str, remaining_s: float | None) -> None:
        self._metric("LockInsufficientTime", "Count", 1)
        self._line("no_time", table, key, LockMetrics(), remaining_s)

    def finished(self, table: str, key: str, stats: LockMetrics, held_ms: float) -> None:
        """Report a lock that was held."""
        if stats.lost:
            outcome = "lost"
        elif stats.cleanup_failures:
            outcome = "release_failed"
        else:
            outcome = "released"
        self._metric("LockRenewals", "Count", stats.renewals)
        if stats.lost:
            self._metric("LockLost", "Count", 1)
        self._line(outcome, table, key, stats, None, held_ms)

    def _metric(self, name: str, unit: str, value: float) -> None:
        if self._metrics is not None:
            self._metrics.add_metric(name=name, unit=unit, value=value)

    def _line(
        self,
        outcome: str,
        table: str,
        key: str,
        stats: LockMetrics,
        remaining_s: float | None,
        held_ms: float | None = None,
    ) -> None:
        fields: dict[str, Any] = {"outcome": outcome, "table": table, "template": self._template}
        if (self._log_key or log_keys()) == "key":
            fields["key"] = key
        else:
            fields["key_hash"] = key_hash(key)
        fields["wait_ms"] = round(stats.wait_ms, 1)
        fields["renewals"] = stats.renewals
        if held_ms is not None:
            fields["held_ms"] = round(held_ms, 1)
        if remaining_s is not None:
            fields["remaining_ms"] = round(remaining_s * 1000)
        fields["requests"] = stats.read_requests + stats.write_requests
        user_method, library_level = _LEVELS[outcome]
        text = " ".join(
            f"{name}={escaped(str(value))}" for name, value in fields.items() if name != "outcome"
        )
        if self._logger is not None:
            # The level's own method, not log(): Powertools' Logger wraps info/warning
            # (stack level, extra keys) and only proxies log() to the stdlib logger.
            log_method = getattr(self._logger, user_method)
            log_method(f"dynalease lock {outcome}", extra=fields)
        else:
            _library_log.log(library_level, "dynalease lock %s: %s", outcome, text)
