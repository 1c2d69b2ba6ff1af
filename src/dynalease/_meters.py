"""OpenTelemetry metrics of every guard: the wait to acquire, contended acquisitions,
takeovers, losses, hold time and throttled requests (docs/operations.md, "Metrics").

Never imports OpenTelemetry: until ``opentelemetry.metrics`` is loaded, or while its
meter provider is the API's default (proxy or no-op), :func:`acquiring` and
:func:`releasing` are a do-nothing context manager. The instruments carry the table
only: keys often hold customer identifiers, and one series per key would not scale.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

from ._tracing import PerProvider
from .exceptions import LockNotAcquired, LockUnavailable

__all__ = ["acquiring", "releasing"]

#: The API's stand-ins for "no provider configured" (the proxy's class is private).
_DEFAULT_PROVIDERS = ("_ProxyMeterProvider", "NoOpMeterProvider")
_UNMETERED = contextlib.nullcontext()
#: When each metered guard's acquisition was won, for its hold time (weak: a dropped guard
#: takes its entry with it).
_held_since: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def _meter_provider(metrics: Any) -> Any:
    provider = metrics.get_meter_provider()
    return None if type(provider).__name__ in _DEFAULT_PROVIDERS else provider


def _make_instruments(provider: Any) -> dict[str, Any]:
    """The instruments, made once per provider."""
    meter = provider.get_meter("dynalease")
    return {
        "wait": meter.create_histogram(
            "dynalease.lock.wait", unit="s", description="time from asking for a lock to the answer"
        ),
        "acquired": meter.create_counter(
            "dynalease.lock.acquisitions", description="acquisitions, by outcome"
        ),
        "contended": meter.create_counter(
            "dynalease.lock.contended", description="acquisitions that found the lock held"
        ),
        "takeovers": meter.create_counter(
            "dynalease.lock.takeovers", description="acquisitions that took an abandoned row over"
        ),
        "losses": meter.create_counter(
            "dynalease.lock.losses", description="guards that lost their lock while holding it"
        ),
        "hold": meter.create_histogram(
            "dynalease.lock.hold", unit="s", description="time from acquisition to release"
        ),
        "throttled": meter.create_counter(
            "dynalease.requests.throttled", description="lock requests DynamoDB throttled"
        ),
    }


_instruments = PerProvider("opentelemetry.metrics", _meter_provider, _make_instruments)


def acquiring(lease: Any) -> Any:
    """Around an acquisition: its outcome, wait, contention and takeover, when metered."""
    instruments = _instruments()
    return _UNMETERED if instruments is None else _acquisition(instruments, lease)


def releasing(lease: Any) -> Any:
    """Around a release: the hold time, a loss and the guard's throttled requests."""
    instruments = _instruments()
    if instruments is None or lease not in _held_since:
        return _UNMETERED
    return _release(instruments, lease)


@contextlib.contextmanager
def _acquisition(instruments: dict[str, Any], lease: Any) -> Iterator[None]:
    table = {"dynalease.table": lease.table}
    try:
        yield
    except LockNotAcquired as error:
        outcome = "unavailable" if isinstance(error, LockUnavailable) else "contention"
        _acquired(instruments, lease, {**table, "dynalease.outcome": outcome})
        _throttled(instruments, lease, table)
        raise
    _held_since[lease] = lease.clock.monotonic()
    _acquired(instruments, lease, {**table, "dynalease.outcome": "acquired"})
    stats = lease.counters()
    if stats.read_requests or stats.conditional_failures:  # it found the row held first
        instruments["contended"].add(1, table)
    if lease.took_over:
        instruments["takeovers"].add(1, table)


def _acquired(instruments: dict[str, Any], lease: Any, attributes: dict[str, str]) -> None:
    instruments["acquired"].add(1, attributes)
    instruments["wait"].record(lease.counters().wait_ms / 1000, attributes)


@contextlib.contextmanager
def _release(instruments: dict[str, Any], lease: Any) -> Iterator[None]:
    table = {"dynalease.table": lease.table}
    try:
        yield
    finally:
        held = lease.clock.monotonic() - _held_since.pop(lease, lease.clock.monotonic())
        instruments["hold"].record(max(0.0, held), table)
        if lease.loss is not None:
            instruments["losses"].add(1, table)
        _throttled(instruments, lease, table)


def _throttled(instruments: dict[str, Any], lease: Any, table: dict[str, str]) -> None:
    throttled = lease.counters().throttled_requests
    if throttled:
        instruments["throttled"].add(throttled, table)
