"""OpenTelemetry spans of lock cycles, against the moto server, with the SDK's in-memory exporter.

Each test installs a tracer provider for its own duration (and removes it after),
so the rest of the suite runs untraced, as an application without a provider does.
"""

from __future__ import annotations

import asyncio
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode
from support.tables import fresh_lock_table
from support.tracing import recording_spans

from dynalease import DynamoDBClient
from dynalease._engine import journal
from dynalease._engine.journal import Journal
from dynalease._engine.protocol import new_token
from dynalease._extension import recovery
from dynalease._redact import logged_key
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import DistributedLock, SyncDistributedLock
from dynalease.semaphore import SyncDistributedSemaphore

PATHS = pytest.mark.parametrize("transport", ["lean", "boto"])


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from recording_spans(monkeypatch)


@pytest.fixture
def client(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> DynamoDBClient:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport="lean")


def _named(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def _is_request_span(span: Any, operation: str, table: str) -> None:
    assert span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes)
    assert attributes["rpc.system"] == "aws-api"
    assert attributes["rpc.service"] == "DynamoDB"
    assert attributes["rpc.method"] == operation
    assert list(attributes["aws.dynamodb.table_names"]) == [table]
    assert attributes["cloud.region"] == "us-east-1"
    assert attributes["http.status_code"] == 200
    assert attributes["aws.request_id"]


def test_a_sync_lock_cycle_is_an_acquire_and_a_release_span_with_their_requests(
    client: DynamoDBClient, spans: InMemorySpanExporter
) -> None:
    table = fresh_lock_table(client, "traced")
    spans.clear()
    with trace.get_tracer("test").start_as_current_span("handler"):  # the function's span
        with SyncDistributedLock(client, table=table, key="customer:1"):
            pass
    (acquire,) = _named(spans, "dynalease.acquire")
    (release,) = _named(spans, "dynalease.release")
    (put,) = _named(spans, "DynamoDB.PutItem")
    (delete,) = _named(spans, "DynamoDB.DeleteItem")
    _is_request_span(put, "PutItem", table)
    _is_request_span(delete, "DeleteItem", table)
    assert put.parent.span_id == acquire.context.span_id
    assert delete.parent.span_id == release.context.span_id
    (handler,) = _named(spans, "handler")
    assert acquire.parent.span_id == release.parent.span_id == handler.context.span_id
    assert put.context.trace_id == delete.context.trace_id == handler.context.trace_id
    assert acquire.kind is SpanKind.INTERNAL
    attributes = dict(acquire.attributes)
    assert attributes["dynalease.outcome"] == "acquired"
    assert attributes["dynalease.table"] == table
    assert attributes["dynalease.key"] == logged_key("customer:1")  # hashed, as in logs
    assert attributes["dynalease.attempts"] == 1
    assert attributes["dynalease.takeover"] is False
    assert "dynalease.wait_ms" in attributes


def test_an_async_lock_cycles_requests_sent_from_the_runtime_are_children(
    client: DynamoDBClient, spans: InMemorySpanExporter
) -> None:
    table = fresh_lock_table(client, "traced")
    spans.clear()

    async def cycle() -> None:
        async with DistributedLock(client, table=table, key="k", fencing=True) as lease:
            assert lease.fencing_token

    asyncio.run(cycle())
    (acquire,) = _named(spans, "dynalease.acquire")
    (release,) = _named(spans, "dynalease.release")
    (update,) = _named(spans, "DynamoDB.UpdateItem")[:1]  # the fenced create is an update
    assert update.parent.span_id == acquire.context.span_id
    assert dict(acquire.attributes)["dynalease.fencing_token"] >= 1
    for request in _named(spans, "DynamoDB.UpdateItem")[1:]:  # the fenced release
        assert request.parent.span_id == release.context.span_id


def test_a_contended_zero_wait_attempt_says_so(
    client: DynamoDBClient, spans: InMemorySpanExporter
) -> None:
    table = fresh_lock_table(client, "traced")
    with SyncDistributedLock(client, table=table, key="busy"):
        spans.clear()
        with pytest.raises(LockNotAcquired):
            with SyncDistributedLock(client, table=table, key="busy", wait_timeout=0):
                pass
        (acquire,) = _named(spans, "dynalease.acquire")
    assert dict(acquire.attributes)["dynalease.outcome"] == "contended"
    assert acquire.status.status_code is not StatusCode.ERROR  # contention is an answer
    (put,) = _named(spans, "DynamoDB.PutItem")
    assert put.status.status_code is StatusCode.ERROR  # the failed condition
    assert dict(put.attributes)["aws.error_code"] == "ConditionalCheckFailedException"
    assert put.parent.span_id == acquire.context.span_id


@PATHS
def test_with_botocore_instrumented_each_request_has_one_span_under_the_lock_spans(
    endpoint: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    """Lean: dynalease's spans only; boto: botocore's, parented by dynalease's lock spans."""
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.botocore")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport=transport)
    table = fresh_lock_table(client, "traced")
    instrumentor = instrumentation.BotocoreInstrumentor()
    instrumentor.instrument(tracer_provider=trace.get_tracer_provider())
    try:
        spans.clear()
        with SyncDistributedLock(client, table=table, key=f"k-{uuid.uuid4().hex[:6]}"):
            pass
    finally:
        instrumentor.uninstrument()
    (acquire,) = _named(spans, "dynalease.acquire")
    (release,) = _named(spans, "dynalease.release")
    (put,) = _named(spans, "DynamoDB.PutItem")
    (delete,) = _named(spans, "DynamoDB.DeleteItem")
    assert put.parent.span_id == acquire.context.span_id
    assert delete.parent.span_id == release.context.span_id
    for request in (put, delete):
        assert dict(request.attributes)["rpc.system"] == "aws-api"
        assert dict(request.attributes)["aws.request_id"]


@PATHS
def test_no_request_span_is_made_for_requests_botocore_sends(
    endpoint: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    """botocore's own instrumentation makes those: a second span would duplicate it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    boto = DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport=transport)
    table = fresh_lock_table(boto, "traced")
    spans.clear()
    with SyncDistributedLock(boto, table=table, key=f"k-{uuid.uuid4().hex[:6]}"):
        pass
    requests = [span for span in spans.get_finished_spans() if span.name.startswith("DynamoDB.")]
    assert len(requests) == (2 if transport == "lean" else 0)
    assert len(_named(spans, "dynalease.acquire")) == 1


def test_the_recovery_extensions_release_is_a_span_with_its_request(
    client: DynamoDBClient,
    endpoint: str,
    spans: InMemorySpanExporter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = fresh_lock_table(client, "traced")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    Journal(str(tmp_path)).record(table, "left-behind", new_token())
    monkeypatch.setattr(journal, "writer_alive", lambda pid, started: False)  # it died
    spans.clear()
    outcome = recovery.recover(str(tmp_path), deadline=time.time() + 5, tables={table})
    assert len(outcome.not_ours) == 1  # no such row any more: nothing to release
    (release,) = _named(spans, "dynalease.release")
    assert dict(release.attributes)["dynalease.recovery"] is True
    assert dict(release.attributes)["dynalease.key"] == logged_key("left-behind")
    (delete,) = _named(spans, "DynamoDB.DeleteItem")
    assert delete.parent.span_id == release.context.span_id
    assert dict(delete.attributes)["aws.error_code"] == "ConditionalCheckFailedException"


def test_renewals_are_request_spans_of_their_own_linked_to_the_acquisition(
    client: DynamoDBClient, spans: InMemorySpanExporter
) -> None:
    table = fresh_lock_table(client, "traced")
    spans.clear()
    with SyncDistributedLock(client, table=table, key="long", lease_duration=1.0) as lease:
        deadline = time.monotonic() + 10
        while lease.metrics.renewals < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert lease.metrics.renewals >= 1
    (acquire,) = _named(spans, "dynalease.acquire")
    renewals = [span for span in spans.get_finished_spans() if span.links]
    assert renewals, "no linked renewal span"
    for renewal in renewals:
        assert renewal.name == "DynamoDB.UpdateItem"
        assert renewal.parent is None  # a trace of its own
        assert renewal.links[0].context.span_id == acquire.context.span_id


def test_a_semaphore_permit_and_the_item_helpers_are_traced_too(
    client: DynamoDBClient, spans: InMemorySpanExporter
) -> None:
    table = fresh_lock_table(client, "traced")
    spans.clear()
    with SyncDistributedSemaphore(client, table=table, key="pool", permits=2):
        pass
    client.sync_put_item(table, {"key": "item", "value": 1})
    (acquire,) = _named(spans, "dynalease.acquire")
    assert dict(acquire.attributes)["dynalease.outcome"] == "acquired"
    assert len(_named(spans, "dynalease.release")) == 1
    puts = _named(spans, "DynamoDB.PutItem")
    assert any(span.parent is None for span in puts)  # the helper's own request
    _is_request_span(next(span for span in puts if span.parent is None), "PutItem", table)


@PATHS
def test_a_password_in_the_endpoint_url_shows_nowhere(
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
    refusing_url: str,
) -> None:
    # The review's N7: a port nothing listens on, behind user info with a password.
    port = refusing_url.rsplit(":", 1)[1]
    endpoint = f"http://user:pa55word@127.0.0.1:{port}/"
    client = DynamoDBClient(
        region="us-east-1",
        endpoint_url=endpoint,
        access_key="testing",
        secret_key="testing",
        transport=transport,
    )
    assert repr(client) == (
        f"DynamoDBClient(region='us-east-1', endpoint_url='http://127.0.0.1:{port} "
        "(its user info, path or query not shown)')"
    )
    with pytest.raises(LockNotAcquired) as raised:
        with SyncDistributedLock(client, table="locks", key="k", wait_timeout=0):
            pass
    shown = [
        "".join(traceback.format_exception(raised.value)),  # the causes too, as Lambda logs
        *(
            f"{span.status.description} {[dict(event.attributes or {}) for event in span.events]}"
            for span in spans.get_finished_spans()
        ),
    ]
    assert any("exception.stacktrace" in text for text in shown[1:])
    assert f"127.0.0.1:{port}" in shown[0]
    assert not [text for text in shown if "pa55word" in text], shown
