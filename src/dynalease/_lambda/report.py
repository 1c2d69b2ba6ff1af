"""The middleware's log line (one per lock, when its story ends) and EMF metrics.

Keys often carry customer identifiers, so the line names a key as the engine's lines do
(``DYNALEASE_LOG_KEYS``, hashed by default) unless ``log_key`` says otherwise.
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

# Outcome -> (user's logger method, library logger level): a user who passes a logger wants
# the routine lines; the library's own stays quiet unless something needs attention.
_LEVELS = {
    "released": ("info", logging.DEBUG),
    "contention": ("info", logging.INFO),
    "unavailable": ("warning", logging.WARNING),
    "no_time": ("warning", logging.INFO),
    "lost": ("warning", logging.WARNING),
    "release_failed": ("warning", logging.WARNING),
}


class Reporter:
    """Each lock's log line and metrics; the options are checked when the handler is decorated."""

    __slots__ = ("_log_key", "_logger", "_metrics", "_template")

    def __init__(self, *, template: str, logger: Any, metrics: Any, log_key: str | None) -> None:
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

    def acquired(self, stats: LockMetrics, *, took_over: bool = False) -> None:
        self._metric("LockAcquired", "Count", 1)
        self._metric("LockWaitMs", "Milliseconds", stats.wait_ms)
        if stats.read_requests or stats.conditional_failures:  # it found the row held first
            self._metric("LockContended", "Count", 1)
        if took_over:
            self._metric("LockTakeover", "Count", 1)

    def not_acquired(
        self,
        table: str,
        key: str,
        stats: LockMetrics,
        remaining_s: float | None,
        error: LockNotAcquired | None = None,
    ) -> None:
        """Contention, or an outage (a :class:`LockUnavailable`): not a busy key."""
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
        if stats.lost:
            outcome = "lost"
        elif stats.cleanup_failures:
            outcome = "release_failed"
        else:
            outcome = "released"
        self._metric("LockRenewals", "Count", stats.renewals)
        self._metric("LockHeldMs", "Milliseconds", held_ms)
        if stats.lost:
            self._metric("LockLost", "Count", 1)
        if stats.throttled_requests:
            self._metric("LockThrottled", "Count", stats.throttled_requests)
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
        if self._logger is not None:
            # The level's own method, not log(): Powertools' Logger wraps info/warning
            # (stack level, extra keys) and only proxies log() to the stdlib logger.
            log_method = getattr(self._logger, user_method)
            log_method(f"dynalease lock {outcome}", extra=fields)
        elif _library_log.isEnabledFor(library_level):
            text = " ".join(
                f"{name}={_value(value)}" for name, value in fields.items() if name != "outcome"
            )
            _library_log.log(library_level, "dynalease lock %s: %s", outcome, text)


def _value(value: object) -> str:
    """A text line's value, control characters escaped and quoted (logfmt) when it holds a
    space, '=' or '"': a key such as 'customer:42 wait_ms=0.0' must not add a field."""
    text = escaped(str(value))
    if text and not any(character in text for character in ' ="'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
