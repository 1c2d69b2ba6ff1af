"""DynamoDB's answers that say *why* a request failed: throttling reasons and Region conflicts.

The fault proxy answers them as DynamoDB does, in front of the moto server:

- a throttling error with ``ThrottlingReasons`` (a hot key first): the reason
  reaches the error, the guard's metrics and the log;
- ``ReplicatedWriteConflictException`` (a multi-Region strongly consistent global
  table, another Region's write to the same item won): the lock request is
  resent within its own budget and the lock is acquired, with no contention
  and no outage reported.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from support.fault_proxy import FaultProxy

from dynalease import DynamoDBClient
from dynalease._redact import logged_key
from dynalease.exceptions import LockNotAcquired, ThrottledError
from dynalease.lock import SyncDistributedLock

HOT_KEY = {
    "ThrottlingReasons": [
        {
            "reason": "TableWriteKeyRangeThroughputExceeded",
            "resource": "arn:aws:dynamodb:us-east-1:123456789012:table/locks",
        }
    ]
}


@pytest.fixture
def through_proxy(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> DynamoDBClient:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return DynamoDBClient(region="us-east-1", endpoint_url=proxy.url, transport="lean")


def _throttled_cause(error: BaseException) -> ThrottledError:
    cause: Any = error.__cause__
    assert isinstance(cause, ThrottledError), f"not throttled: {cause!r}"
    return cause


def test_a_hot_key_throttle_reaches_the_error_the_metrics_and_the_log(
    proxy: FaultProxy,
    through_proxy: DynamoDBClient,
    table: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rule = proxy.answer(
        "PutItem", 400, "ThrottlingException", "Throughput exceeds the limit", extra=HOT_KEY
    )
    guard = SyncDistributedLock(through_proxy, table=table, key="hot", wait_timeout=0)
    with caplog.at_level(logging.WARNING, logger="dynalease"):
        with pytest.raises(LockNotAcquired) as raised:
            with guard:
                pass
    assert rule.fired >= 1
    throttled = _throttled_cause(raised.value)
    assert throttled.reasons == HOT_KEY["ThrottlingReasons"]
    assert "TableWriteKeyRangeThroughputExceeded" in str(throttled)
    assert "hot lock key" in str(throttled)  # the first thing to learn
    assert throttled.advice.startswith("DynamoDB says one key (a hot lock key")
    assert f"; it was not applied. {throttled.advice} (AWS request id " in str(throttled)
    assert guard.metrics.throttled_requests >= 1
    assert guard.metrics.throttling_reasons == ("TableWriteKeyRangeThroughputExceeded",)
    lines = [r.getMessage() for r in caplog.records if "throttled" in r.getMessage()]
    assert lines and "TableWriteKeyRangeThroughputExceeded" in lines[0]
    assert logged_key("hot") in lines[0]


def test_a_throttle_without_reasons_still_says_what_to_do(
    proxy: FaultProxy, through_proxy: DynamoDBClient, table: str
) -> None:
    proxy.throttle("PutItem")
    guard = SyncDistributedLock(through_proxy, table=table, key="plain", wait_timeout=0)
    with pytest.raises(LockNotAcquired) as raised:
        with guard:
            pass
    throttled = _throttled_cause(raised.value)
    assert throttled.reasons == []
    assert throttled.advice == "Retry later or raise the table's capacity"
    assert f"; it was not applied. {throttled.advice} (AWS request id " in str(throttled)
    assert guard.metrics.throttled_requests >= 1
    assert guard.metrics.throttling_reasons == ()


@pytest.mark.parametrize("operation", ["PutItem", "DeleteItem"])
def test_a_replicated_write_conflict_is_resent_within_the_requests_budget(
    proxy: FaultProxy, through_proxy: DynamoDBClient, table: str, operation: str
) -> None:
    rule = proxy.answer(
        operation,
        400,
        "ReplicatedWriteConflictException",
        "a concurrent write from another Region",
        times=2,
    )
    # A single attempt (wait_timeout=0): only the request's own budget can retry it.
    with SyncDistributedLock(through_proxy, table=table, key=operation, wait_timeout=0) as guard:
        pass
    assert rule.fired == 2
    metrics = guard.metrics
    assert metrics.request_failures == 0  # one request, answered after its resends
    assert metrics.write_requests == 2
    assert not guard.lost


def test_a_throttled_requests_span_is_an_error_with_its_reasons(
    proxy: FaultProxy, through_proxy: DynamoDBClient, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    proxy.answer("PutItem", 400, "ThrottlingException", "slow down", extra=HOT_KEY, times=1)
    with SyncDistributedLock(through_proxy, table=table, key="traced-hot", wait_timeout=5):
        pass
    throttled, won = [s for s in exporter.get_finished_spans() if s.name == "DynamoDB.PutItem"]
    assert throttled.status.status_code is StatusCode.ERROR
    attributes = dict(throttled.attributes)
    assert attributes["http.status_code"] == 400
    assert attributes["aws.error_code"] == "ThrottlingException"
    assert list(attributes["dynalease.throttling_reasons"]) == [
        "TableWriteKeyRangeThroughputExceeded"
    ]
    assert won.status.status_code is not StatusCode.ERROR
    (acquire,) = [s for s in exporter.get_finished_spans() if s.name == "dynalease.acquire"]
    assert dict(acquire.attributes)["dynalease.outcome"] == "acquired"
    assert dict(acquire.attributes)["dynalease.attempts"] == 2
