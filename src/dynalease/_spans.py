"""The spans themselves (:mod:`._tracing` decides whether anyone traces).

Imports OpenTelemetry at the top: :mod:`._tracing` loads this module only once a
tracer provider is configured, so an untraced process never imports either.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from opentelemetry import context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, use_span

from ._redact import logged_key
from .exceptions import LockNotAcquired, LockUnavailable

SERVICE = "DynamoDB"
#: The AWS SDK semantic conventions' attribute for the answer's request id.
REQUEST_ID = "aws.request_id"
#: Set in a renewal task: the acquisition its request spans link to.
_renewal_of: contextvars.ContextVar[Any] = contextvars.ContextVar("dynalease_renewal_of")


def request_span(traced: Any, operation: str, params: dict[str, Any], region: str) -> Any:
    """A started CLIENT span of ``traced`` for one DynamoDB request."""
    attributes: dict[str, Any] = {
        "rpc.system": "aws-api",
        "rpc.service": SERVICE,
        "rpc.method": operation,
        "db.system": "dynamodb",
        "cloud.region": region,
    }
    tables = _table_names(params)
    if tables:
        attributes["aws.dynamodb.table_names"] = tables
    renewal = _renewal_of.get(None)
    links = [Link(renewal)] if renewal is not None else None
    return traced.start_span(
        f"{SERVICE}.{operation}", kind=SpanKind.CLIENT, attributes=attributes, links=links
    )


def _table_names(params: dict[str, Any]) -> list[str]:
    if "TableName" in params:
        return [str(params["TableName"])]
    if "RequestItems" in params:  # BatchGetItem
        return sorted(params["RequestItems"])
    names = set()
    for item in params.get("TransactItems") or ():
        for action in item.values():
            if isinstance(action, dict) and "TableName" in action:
                names.add(str(action["TableName"]))
    return sorted(names)


def traced(span: Any, send: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``send(*args)`` within the request span ``span``: its answer or its error, then its end."""
    try:
        response = send(*args)
        metadata = response.get("ResponseMetadata") or {}
        if "HTTPStatusCode" in metadata:
            answered(span, metadata["HTTPStatusCode"], metadata.get("RequestId"))
        return response
    except BaseException as error:
        failed(span, error)
        raise
    finally:
        span.end()


def answered(span: Any, status: int, request_id: str | None) -> None:
    """Record the HTTP answer of a request span."""
    span.set_attribute("http.status_code", status)
    if request_id is not None:
        span.set_attribute(REQUEST_ID, request_id)


def failed(span: Any, error: BaseException) -> None:
    """Mark a request or lock span as failed by ``error``."""
    request_id = getattr(error, "request_id", None)
    if request_id is not None:
        span.set_attribute(REQUEST_ID, request_id)
    code = getattr(error, "code", None)
    if type(error).__name__ == "ConditionFailed":  # the engine's: a lock's failed condition
        code = "ConditionalCheckFailedException"
    if code:
        span.set_attribute("aws.error_code", code)
    reasons = getattr(error, "reasons", None)  # a ThrottledError's
    if reasons and all(isinstance(reason, dict) for reason in reasons):
        names = [str(reason.get("reason", "")) for reason in reasons]
        span.set_attribute("dynalease.throttling_reasons", names)
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class LockSpan:
    """An INTERNAL span around an acquisition or a release, current while it runs."""

    def __init__(self, traced: Any, name: str, table: str, key: str) -> None:
        self.span = traced.start_span(
            name,
            kind=SpanKind.INTERNAL,
            attributes={"dynalease.table": table, "dynalease.key": logged_key(key)},
        )
        self._current = use_span(self.span, end_on_exit=False)

    def __enter__(self) -> None:
        self._current.__enter__()

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        try:
            self._finish(error)
        finally:
            self._current.__exit__(None, None, None)
            self.span.end()

    def _finish(self, error: BaseException | None) -> None:
        if error is not None:
            failed(self.span, error)


class AcquireSpan(LockSpan):
    def __init__(self, traced: Any, lease: Any) -> None:
        super().__init__(traced, "dynalease.acquire", lease.table, lease.key)
        self.lease = lease
        self.span.set_attribute("dynalease.lease_seconds", lease.lease_s)
        self.span.set_attribute("dynalease.wait_timeout_seconds", lease.wait_s)

    def __enter__(self) -> Any:
        """Current while the acquisition runs; returns the link its renewals carry."""
        super().__enter__()
        return self.span.get_span_context()

    def _finish(self, error: BaseException | None) -> None:
        if error is None:
            outcome = "acquired"
        elif isinstance(error, LockUnavailable):
            outcome = "unavailable"
        elif isinstance(error, LockNotAcquired):
            outcome = "contended"
        else:
            outcome = type(error).__name__
        lease, span = self.lease, self.span
        tally = lease.tally
        span.set_attribute("dynalease.outcome", outcome)
        span.set_attribute("dynalease.wait_ms", round(tally.wait_ms, 3))
        span.set_attribute("dynalease.attempts", tally.write_requests)
        span.set_attribute("dynalease.takeover", bool(lease.took_over))
        if lease.fencing_token is not None:
            span.set_attribute("dynalease.fencing_token", lease.fencing_token)
        if error is not None and outcome != "contended":
            failed(span, error)  # contention is an answer, not an error of the span


def no_time(traced: Any, table: str, key: str, remaining_s: float | None) -> None:
    """An acquisition the Lambda middleware did not start: too little of the invocation left."""
    attributes: dict[str, Any] = {
        "dynalease.table": table,
        "dynalease.key": logged_key(key),
        "dynalease.outcome": "insufficient time",
        "dynalease.attempts": 0,
    }
    if remaining_s is not None:
        attributes["dynalease.remaining_seconds"] = remaining_s
    traced.start_span("dynalease.acquire", kind=SpanKind.INTERNAL, attributes=attributes).end()


def renewing(link: Any) -> None:
    """In a renewal task: its requests start traces of their own, linked to ``link``."""
    context.attach(context.Context())  # this task's own context: no parent
    _renewal_of.set(link)
