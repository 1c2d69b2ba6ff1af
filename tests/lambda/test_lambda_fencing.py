"""The middleware's fenced locks: ``fencing=True`` and ``current_lock().fencing_token``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from dynalease_dev.invoke import CountdownContext

from dynalease.exceptions import FencingUnavailable
from dynalease.middleware import current_lock, lock_handler, lock_record


def test_a_fenced_handler_reads_an_increasing_token(lock_table: str) -> None:
    @lock_handler(key="customer:{customer_id}", fencing=True)
    def handler(event: Any, context: Any) -> int:
        return current_lock().fencing_token

    tokens = [handler({"customer_id": "c-1"}, CountdownContext(60)) for _ in range(3)]
    assert tokens == [1, 2, 3]
    assert handler({"customer_id": "c-2"}, CountdownContext(60)) == 1  # a token per key


def test_an_unfenced_handler_has_no_token(lock_table: str) -> None:
    @lock_handler(key="customer:{customer_id}")
    def handler(event: Any, context: Any) -> int:
        return current_lock().fencing_token

    with pytest.raises(FencingUnavailable, match="fencing=True"):
        handler({"customer_id": "c-1"}, CountdownContext(60))


def test_fenced_records_each_get_their_keys_token(lock_table: str) -> None:
    seen: list[tuple[str, int]] = []

    @lock_record(
        key="customer:{customer_id}",
        fields={"customer_id": "powertools_json(body).id"},
        fencing=True,
    )
    def record_handler(record: Any) -> None:
        seen.append((current_lock().key, current_lock().fencing_token))

    records = [
        {
            "messageId": str(n),
            "body": json.dumps({"id": name}),
            "receiptHandle": "r",
            "attributes": {},
            "eventSource": "aws:sqs",
        }
        for n, name in enumerate(["a", "b", "a"])
    ]
    answer = process_partial_response(
        event={"Records": records},
        record_handler=record_handler,
        processor=BatchProcessor(event_type=EventType.SQS),
        context=CountdownContext(60),
    )
    assert answer == {"batchItemFailures": []}
    assert seen == [("customer:a", 1), ("customer:b", 1), ("customer:a", 2)]


def test_fencing_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="fencing must be True or False"):
        lock_handler(key="k", fencing=1)  # type: ignore[arg-type]
