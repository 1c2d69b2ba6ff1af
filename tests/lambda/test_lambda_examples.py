"""Every sample event through its example handler, against the moto server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from dynalease_dev.invoke import CountdownContext

from dynalease import DynamoDBClient
from dynalease._redact import key_hash
from dynalease.exceptions import LockNotAcquired, LockUnavailable
from dynalease.lock import SyncDistributedLock

Loader = Callable[[str], Any]

HELD_KEY = "customer:c-1001"


@pytest.fixture
def dynamodb_unreachable(aws_env: str, monkeypatch: pytest.MonkeyPatch, refusing_url: str) -> str:
    """The Lambda environment with DynamoDB's endpoint on a loopback port nobody listens on."""
    url = refusing_url
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", url)  # a new shared client for it
    monkeypatch.setenv("DYNALEASE_TABLE", "customer-locks")
    return url


def _no_lock_rows(other_client: DynamoDBClient, table: str) -> bool:
    return all(
        other_client.sync_get_item(table, {"key": key}, consistent_read=True) is None
        for key in ("customer:c-1001", "customer:c-2002")
    )


def _check_sqs(result: Any) -> None:
    assert result == {"batchItemFailures": []}


def _check_eventbridge(result: Any) -> None:
    assert result == {"customer_id": "c-1001", "refreshed": ["address"]}


def _check_http(result: Any) -> None:
    assert result["statusCode"] == 200
    assert json.loads(result["body"]) == {"customer_id": "c-1001", "status": "synchronized"}


def _check_direct(result: Any) -> None:
    assert result == {
        "customer_id": "c-1001",
        "action": "rebuild-summary",
        "lock_key": "customer:c-1001",
    }


@pytest.mark.parametrize(
    ("event_name", "handler_name", "check"),
    [
        ("sqs", "sqs_handler", _check_sqs),
        ("sqs-fifo", "sqs_fifo_handler", _check_sqs),
        ("eventbridge", "eventbridge_handler", _check_eventbridge),
        ("apigw-rest", "apigw_rest_handler", _check_http),
        ("apigw-http", "apigw_http_handler", _check_http),
        ("direct", "direct_handler", _check_direct),
    ],
)
def test_each_sample_event_runs_through_its_example_handler_and_leaves_no_lock_behind(
    event_name: str,
    handler_name: str,
    check: Callable[[Any], None],
    lock_table: str,
    other_client: DynamoDBClient,
    example: Loader,
    load_event: Loader,
) -> None:
    handler = example(handler_name)
    result = handler(load_event(event_name), CountdownContext(60))
    check(result)
    assert _no_lock_rows(other_client, lock_table)


@pytest.mark.parametrize("kind", ["apigw-rest", "apigw-http"])
def test_api_examples_answer_409_while_the_customer_is_locked_elsewhere(
    kind: str, lock_table: str, other_client: DynamoDBClient, example: Loader, load_event: Loader
) -> None:
    handler = example(kind.replace("-", "_") + "_handler")
    # 9.4 s left - 3 s reserved - 6 s cleanup budget of the 10 s lease: the wait is
    # cut from the example's 1 s to what the invocation can afford.
    with SyncDistributedLock(other_client, table=lock_table, key=HELD_KEY):
        response = handler(load_event(kind), CountdownContext(9.4))
    assert response["statusCode"] == 409
    assert "retry" in json.loads(response["body"])["message"]
    assert {k.lower(): v for k, v in response["headers"].items()}["retry-after"] == "1"


@pytest.mark.parametrize("kind", ["apigw-rest", "apigw-http"])
def test_api_examples_answer_503_with_retry_after_while_dynamodb_is_unreachable(
    kind: str, dynamodb_unreachable: str, example: Loader, load_event: Loader
) -> None:
    handler = example(kind.replace("-", "_") + "_handler")
    start = time.monotonic()
    # 9.4 s left - 3 s reserved - 6 s cleanup: a 0.4 s wait, all of it on refused connections.
    response = handler(load_event(kind), CountdownContext(9.4))
    # Answered before the 3 s it reserves: what the invocation promises. The 0.4 s wait is
    # the budget; the rest is slack for a loaded two-core machine, and still far from the
    # 9.4 s a wait that ignored the invocation's deadline would take.
    assert time.monotonic() - start < 9.4 - 3.0
    assert response["statusCode"] == 503
    assert "unavailable" in json.loads(response["body"])["message"]
    assert {k.lower(): v for k, v in response["headers"].items()}["retry-after"] == "5"


def test_without_on_contention_an_unreachable_dynamodb_raises_lock_unavailable(
    dynamodb_unreachable: str, example: Loader, load_event: Loader
) -> None:
    handler = example("eventbridge_handler")
    with pytest.raises(LockUnavailable, match="not contention"):
        handler(load_event("eventbridge"), CountdownContext(20.4))


def test_the_sqs_example_never_acknowledges_a_record_while_dynamodb_is_unreachable(
    dynamodb_unreachable: str, example: Loader, load_event: Loader
) -> None:
    event = load_event("sqs")
    event["Records"] = event["Records"][:1]  # one 2 s wait is enough to show it
    handler = example("sqs_handler")
    # Every record failed, so Powertools fails the whole batch and Lambda retries it.
    with pytest.raises(BatchProcessingError) as caught:
        handler(event, CountdownContext(60))
    [(_, error, _)] = caught.value.child_exceptions
    assert isinstance(error, LockUnavailable)


def test_the_eventbridge_example_raises_on_contention_so_lambda_retries_the_event(
    lock_table: str, other_client: DynamoDBClient, example: Loader, load_event: Loader
) -> None:
    handler = example("eventbridge_handler")
    # 20.4 s left - 10 s reserved - 10 s cleanup budget: about 0.4 s to wait.
    with SyncDistributedLock(other_client, table=lock_table, key=HELD_KEY):
        with pytest.raises(LockNotAcquired, match=f"key_hash={key_hash(HELD_KEY)}") as caught:
            handler(load_event("eventbridge"), CountdownContext(20.4))
    assert caught.value.key == HELD_KEY  # the message names it by hash, the error keeps it


def test_the_fifo_example_fails_the_locked_group_and_keeps_the_other_groups_going(
    lock_table: str, other_client: DynamoDBClient, example: Loader, load_event: Loader
) -> None:
    event = load_event("sqs-fifo")
    ids = {r["messageId"]: json.loads(r["body"])["customer_id"] for r in event["Records"]}
    handler = example("sqs_fifo_handler")
    with SyncDistributedLock(other_client, table=lock_table, key=HELD_KEY):
        result = handler(event, CountdownContext(60))
    failed = {item["itemIdentifier"] for item in result["batchItemFailures"]}
    # Both c-1001 messages fail (the second one without trying, to keep group order);
    # c-2002's group is processed.
    assert failed == {mid for mid, customer in ids.items() if customer == "c-1001"}
    assert len(failed) == 2
