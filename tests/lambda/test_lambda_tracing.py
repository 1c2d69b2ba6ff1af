"""The Lambda middleware's locks in a trace: an acquisition, and one with too little time left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.tracing import recording_spans

from dynalease._redact import logged_key
from dynalease.middleware import lock_handler


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from recording_spans(monkeypatch)


def _named(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def test_a_locked_invocation_is_an_acquire_and_a_release_span(
    lock_table: str, spans: InMemorySpanExporter
) -> None:
    @lock_handler(key="order:{id}")
    def handler(event: Any, context: Any) -> str:
        return "done"

    assert handler({"id": "7"}, CountdownContext(60)) == "done"
    (acquire,) = _named(spans, "dynalease.acquire")
    assert dict(acquire.attributes)["dynalease.outcome"] == "acquired"
    assert dict(acquire.attributes)["dynalease.key"] == logged_key("order:7")
    assert len(_named(spans, "dynalease.release")) == 1


def test_an_invocation_without_time_to_try_says_insufficient_time(
    lock_table: str, spans: InMemorySpanExporter
) -> None:
    @lock_handler(
        key="order:{id}", reserve_time=25, on_contention=lambda e, c, error: {"statusCode": 503}
    )
    def handler(event: Any, context: Any) -> None:
        raise AssertionError("must not run")

    assert handler({"id": "8"}, CountdownContext(29)) == {"statusCode": 503}
    (acquire,) = _named(spans, "dynalease.acquire")
    attributes = dict(acquire.attributes)
    assert attributes["dynalease.outcome"] == "insufficient time"
    assert attributes["dynalease.attempts"] == 0
    assert _named(spans, "DynamoDB.PutItem") == []  # nothing was sent
