"""OpenTelemetry spans for lock requests, acquisitions and releases (docs/lambda.md, "Traces").

Never imports OpenTelemetry: until ``opentelemetry.trace`` is loaded, or while its
provider is the API's default (proxy or no-op), :func:`tracer` is None and nothing is
traced. Requests botocore sends get botocore's own span, never a second one here. The
spans themselves are made in :mod:`._spans`, loaded (with OpenTelemetry) once someone traces.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = [
    "acquiring",
    "answered",
    "carried",
    "failed",
    "no_time",
    "recovering",
    "releasing",
    "renewing",
    "request_span",
    "traced",
    "tracer",
]

T = TypeVar("T")


class PerProvider(Generic[T]):
    """What dynalease made of OpenTelemetry's configured provider (a tracer, instruments),
    made again only when another provider is configured; None while none is.

    ``api`` names the OpenTelemetry API module: until something imported it no provider
    can be configured, and it is never imported here. ``configured(module)`` is the
    module's provider, or None while the API's default (proxy or no-op) stands in.
    """

    def __init__(
        self, api: str, configured: Callable[[Any], Any], make: Callable[[Any], T]
    ) -> None:
        self._api, self._configured, self._make = api, configured, make
        #: The last provider seen and what was made of it (kept, so it is the same object).
        self._cached: tuple[Any, T] | None = None

    def __call__(self) -> T | None:
        module = sys.modules.get(self._api)
        provider = None if module is None else self._configured(module)
        if provider is None:
            return None
        cached = self._cached
        if cached is not None and cached[0] is provider:
            return cached[1]
        made = self._make(provider)
        self._cached = (provider, made)
        return made


def _tracer_provider(trace: Any) -> Any:
    provider = trace.get_tracer_provider()
    defaults = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    return None if isinstance(provider, defaults) else provider


_tracer = PerProvider(
    "opentelemetry.trace", _tracer_provider, lambda provider: provider.get_tracer("dynalease")
)


def tracer() -> Any:
    """The ``dynalease`` tracer of the configured provider, or None when nobody traces."""
    return _tracer()


def carried(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` in a copy of this context when someone traces: ``run_in_executor`` drops it."""
    if tracer() is None:
        return call
    return functools.partial(contextvars.copy_context().run, call)


def _spans() -> Any:
    """:mod:`._spans`, which imports OpenTelemetry: only ever asked for once :func:`tracer`
    found a provider (or a span exists), so an untraced process loads neither."""
    from . import _spans

    return _spans


def request_span(operation: str, params: dict[str, Any], region: str) -> Any:
    """A started CLIENT span for one DynamoDB request, or None when nobody traces."""
    traced = tracer()
    return None if traced is None else _spans().request_span(traced, operation, params, region)


def traced(span: Any, send: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``send(*args)`` within the request span ``span``: its answer or its error, then its end."""
    result: dict[str, Any] = _spans().traced(span, send, *args)
    return result


def answered(span: Any, status: int, request_id: str | None) -> None:
    """Record the HTTP answer of a request span."""
    _spans().answered(span, status, request_id)


def failed(span: Any, error: BaseException) -> None:
    """Mark a request or lock span as failed by ``error``."""
    _spans().failed(span, error)


#: The context manager used when nobody traces (reusable: it does nothing).
_UNTRACED = contextlib.nullcontext()


def acquiring(lease: Any) -> Any:
    """A context manager that traces ``lease``'s acquisition (nothing when nobody traces).

    Entered, it gives the span link its renewals carry (:func:`renewing`; None untraced).
    """
    traced = tracer()
    return _UNTRACED if traced is None else _spans().AcquireSpan(traced, lease)


def no_time(table: str, key: str, remaining_s: float | None) -> None:
    """An acquisition the Lambda middleware did not start: too little of the invocation left."""
    traced = tracer()
    if traced is not None:
        _spans().no_time(traced, table, key, remaining_s)


def releasing(lease: Any) -> Any:
    """A context manager that traces ``lease``'s release (nothing when nobody traces)."""
    traced = tracer()
    if traced is None or lease.state.value == "new":
        return _UNTRACED
    return _spans().LockSpan(traced, "dynalease.release", lease.table, lease.key)


def recovering(table: str, key: str) -> Any:
    """A context manager that traces the recovery extension's release of a dead writer's row."""
    traced = tracer()
    if traced is None:
        return _UNTRACED
    span = _spans().LockSpan(traced, "dynalease.release", table, key)
    span.span.set_attribute("dynalease.recovery", True)
    return span


def renewing(link: Any) -> None:
    """In a renewal task: its requests start traces of their own, linked to ``link``.

    A child of the acquisition's span would stretch it over the whole hold.
    """
    if link is not None:  # else the acquisition was not traced
        _spans().renewing(link)
