"""lock_record: one lock per batch record, failures in batchItemFailures, never acknowledged."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from dynalease_dev.invoke import CountdownContext

from dynalease import DynamoDBClient
from dynalease.exceptions import LockUnavailable
from dynalease.lock import SyncDistributedLock
from dynalease.middleware import current_lock, lock_record

Loader = Callable[[str], Any]
BODY_CUSTOMER = {"customer_id": "powertools_json(body).customer_id"}


def _customers(event: dict[str, Any]) -> dict[str, str]:
    """messageId -> customer_id, from the SQS sample event."""
    return {r["messageId"]: json.loads(r["body"])["customer_id"] for r in event["Records"]}


def _failed(result: dict[str, Any]) -> set[str]:
    return {item["itemIdentifier"] for item in result["batchItemFailures"]}


def test_records_whose_key_is_held_elsewhere_are_exactly_the_reported_failures(
    lock_table: str, other_client: DynamoDBClient, load_event: Loader
) -> None:
    processed: list[str] = []

    @lock_record(key="customer:{customer_id}", fields=BODY_CUSTOMER, wait_timeout=0.2)
    def record_handler(record: Any) -> None:
        processed.append(current_lock().key)

    event = load_event("sqs")
    customers = _customers(event)
    with SyncDistributedLock(other_client, table=lock_table, key="customer:c-1001"):
        result = process_partial_response(
            event=event,
            record_handler=record_handler,
            processor=BatchProcessor(event_type=EventType.SQS),
            context=CountdownContext(60),
        )
    assert _failed(result) == {mid for mid, c in customers.items() if c == "c-1001"}
    assert len(_failed(result)) == 2
    assert processed == ["customer:c-2002"]


def test_records_are_reported_in_batch_item_failures_while_dynamodb_is_unreachable(
    lock_table: str, load_event: Loader, caplog: pytest.LogCaptureFixture, refusing_url: str
) -> None:
    down = DynamoDBClient(
        region="us-east-1", endpoint_url=refusing_url, access_key="testing", secret_key="testing"
    )
    raised: list[BaseException] = []

    @lock_record(
        down, table=lock_table, key="customer:{customer_id}", fields=BODY_CUSTOMER, wait_timeout=0.2
    )
    def record_handler(record: Any) -> str:
        raise AssertionError("must not run")

    def recording(record: Any, lambda_context: Any = None) -> str:
        try:
            return record_handler(record, lambda_context)
        except LockUnavailable as error:
            raised.append(error)
            raise

    event = load_event("sqs")
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with caplog.at_level(logging.WARNING, logger="dynalease.middleware"):
        result = process_partial_response(
            event=event,
            record_handler=recording,
            processor=processor,
            context=CountdownContext(60),
        )
    assert _failed(result) == set(_customers(event))
    assert len(raised) == len(event["Records"])
    lines = [r.getMessage() for r in caplog.records if r.name == "dynalease.middleware"]
    assert len(lines) == len(raised) and all("lock unavailable" in line for line in lines)


def test_a_failing_record_is_reported_and_its_lock_released_while_the_rest_go_on(
    lock_table: str, other_client: DynamoDBClient, load_event: Loader
) -> None:
    processed: list[str] = []

    @lock_record(key="customer:{customer_id}", fields=BODY_CUSTOMER)
    def record_handler(record: Any) -> None:
        customer = json.loads(record.body)["customer_id"]
        if customer == "c-2002":
            raise RuntimeError("downstream refused")
        processed.append(customer)

    event = load_event("sqs")
    result = process_partial_response(
        event=event,
        record_handler=record_handler,
        processor=BatchProcessor(event_type=EventType.SQS),
        context=CountdownContext(60),
    )
    assert _failed(result) == {m for m, c in _customers(event).items() if c == "c-2002"}
    assert processed == ["c-1001", "c-1001"]
    assert (
        other_client.sync_get_item(lock_table, {"key": "customer:c-2002"}, consistent_read=True)
        is None
    )


def test_each_record_gets_its_wait_from_the_time_left_and_stops_trying_when_none_is_left(
    lock_table: str,
    other_client: DynamoDBClient,
    counted_client: DynamoDBClient,
    counting_proxy: Any,
    load_event: Loader,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 1 s lease: 0.6 s cleanup budget. With 1.8 s left the first record (held
    # elsewhere) may wait what is left beyond those 0.6 s (about 1.2 s, less what
    # building the cold client took); after that no record can finish in time, so
    # the others fail at once, without a request.
    log = logging.getLogger(f"tests.batch.{uuid.uuid4().hex}")
    caplog.set_level(logging.INFO, logger=log.name)

    @lock_record(
        counted_client,
        key="customer:{customer_id}",
        fields=BODY_CUSTOMER,
        lease_duration=1.0,
        logger=log,
    )
    def record_handler(record: Any, lambda_context: Any) -> None:
        raise AssertionError("no record should run")

    event = load_event("sqs")
    # Every record fails here; by default Powertools then raises so Lambda retries
    # the whole batch. Asking for the report instead shows which failed and why.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with SyncDistributedLock(
        other_client, table=lock_table, key="customer:c-1001", lease_duration=30
    ):
        result = process_partial_response(
            event=event,
            record_handler=record_handler,
            processor=processor,
            context=CountdownContext(1.8),
        )
    assert _failed(result) == set(_customers(event))
    fields = ("outcome", "requests", "wait_ms")
    lines = [
        {name: getattr(record, name) for name in fields}
        for record in caplog.records
        if record.name == log.name
    ]
    assert [line["outcome"] for line in lines] == ["contention", "no_time", "no_time"]
    assert lines[0]["requests"] >= 1
    assert lines[0]["wait_ms"] >= 200
    assert lines[1]["requests"] == lines[2]["requests"] == 0
    # The proxy counts a request when it has forwarded it: give the last one a moment.
    settle = time.monotonic() + 30  # generous: only a request never forwarded fails
    while counting_proxy.total() < lines[0]["requests"] and time.monotonic() < settle:
        time.sleep(0.02)
    assert counting_proxy.total() == lines[0]["requests"]


def test_a_record_handler_that_asks_for_lambda_context_gets_it(
    lock_table: str, load_event: Loader
) -> None:
    seen: list[Any] = []

    @lock_record(key="customer:{customer_id}", fields=BODY_CUSTOMER)
    def record_handler(record: Any, lambda_context: Any) -> None:
        seen.append(lambda_context)

    context = CountdownContext(60)
    result = process_partial_response(
        event=load_event("sqs"),
        record_handler=record_handler,
        processor=BatchProcessor(event_type=EventType.SQS),
        context=context,
    )
    assert result == {"batchItemFailures": []}
    assert seen == [context, context, context]


def test_without_a_context_the_batch_still_runs_and_a_warning_says_how_to_pass_it(
    lock_table: str, load_event: Loader, caplog: pytest.LogCaptureFixture
) -> None:
    @lock_record(key="customer:{customer_id}", fields=BODY_CUSTOMER, wait_timeout=1)
    def record_handler(record: Any) -> str:
        return current_lock().key

    result = process_partial_response(
        event=load_event("sqs"),
        record_handler=record_handler,
        processor=BatchProcessor(event_type=EventType.SQS),
    )
    assert result == {"batchItemFailures": []}
    warnings = [r for r in caplog.records if r.name == "dynalease.middleware"]
    assert len(warnings) == 1  # once, not per record
    assert "pass context=context to process_partial_response" in warnings[0].getMessage()


def test_the_fifo_processor_stops_at_a_locked_record_and_fails_everything_after_it(
    lock_table: str, other_client: DynamoDBClient, load_event: Loader
) -> None:
    attempted: list[str] = []

    @lock_record(key="customer:{customer_id}", fields=BODY_CUSTOMER, wait_timeout=0)
    def record_handler(record: Any) -> None:
        attempted.append(record.message_id)

    event = load_event("sqs-fifo")
    first, second, third = (r["messageId"] for r in event["Records"])
    with SyncDistributedLock(other_client, table=lock_table, key="customer:c-2002"):
        result = process_partial_response(
            event=event,
            record_handler=record_handler,
            processor=SqsFifoPartialProcessor(),
            context=CountdownContext(60),
        )
    # Without skip_group_on_error the first failure (c-2002's lock) fails the rest
    # of the batch without trying it, so nothing is processed out of order.
    assert _failed(result) == {second, third}
    assert attempted == [first]


def _kinesis_event(customer: str) -> dict[str, Any]:
    data = base64.b64encode(json.dumps({"customer_id": customer}).encode()).decode()
    return {
        "Records": [
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": customer,
                    "sequenceNumber": "49590338271490256608559692538361571095921575989136588898",
                    "data": data,
                    "approximateArrivalTimestamp": 1764745200.123,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": "shardId-000000000006:4959033827149025660855969253836157109592157",
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda-role",
                "awsRegion": "us-east-1",
                "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/customers",
            }
        ]
    }


def _dynamodb_stream_event(customer: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventID": "c4ca4238a0b923820dcc509a6f75849b",
                "eventName": "MODIFY",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": 1764745200,
                    "Keys": {"customer_id": {"S": customer}},
                    "NewImage": {"customer_id": {"S": customer}, "tier": {"S": "gold"}},
                    "SequenceNumber": "4421584500000000017450439091",
                    "SizeBytes": 26,
                    "StreamViewType": "NEW_IMAGE",
                },
                "eventSourceARN": (
                    "arn:aws:dynamodb:us-east-1:123456789012:table/customers/stream/"
                    "2026-12-03T00:00:00.000"
                ),
            }
        ]
    }


@pytest.mark.parametrize(
    ("event_type", "make_event", "expression"),
    [
        (
            EventType.KinesisDataStreams,
            _kinesis_event,
            "powertools_json(powertools_base64(kinesis.data)).customer_id",
        ),
        (EventType.DynamoDBStreams, _dynamodb_stream_event, "dynamodb.Keys.customer_id.S"),
    ],
)
def test_kinesis_and_dynamodb_stream_records_are_locked_by_fields_on_the_record(
    event_type: EventType, make_event: Callable[[str], Any], expression: str, lock_table: str
) -> None:
    keys: list[str] = []

    @lock_record(key="customer:{customer_id}", fields={"customer_id": expression})
    def record_handler(record: Any) -> None:
        keys.append(current_lock().key)

    result = process_partial_response(
        event=make_event("c-77"),
        record_handler=record_handler,
        processor=BatchProcessor(event_type=event_type),
        context=CountdownContext(60),
    )
    assert result == {"batchItemFailures": []}
    assert keys == ["customer:c-77"]


def test_lock_record_rejects_an_async_record_handler() -> None:
    with pytest.raises(TypeError, match="sync record handlers"):

        @lock_record(key="c:{id}", table="locks")
        async def record_handler(record: Any) -> None: ...
