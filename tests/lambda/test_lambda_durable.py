"""Durable functions: lock_handler under the real durable execution SDK and its local runner.

The SDK runs the user function in a worker thread and ends an invocation at a
``context.wait`` by raising ``SuspendExecution`` (a ``BaseException``); the next
invocation replays the function from the top.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("aws_durable_execution_sdk_python_testing")

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration
from aws_durable_execution_sdk_python.execution import InvocationStatus
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock
from dynalease.middleware import current_lock, lock_handler


def _run(handler: Any, payload: str) -> Any:
    with DurableFunctionTestRunner(handler=handler) as runner:
        return runner.run(input=payload, execution_timeout=60)


def test_a_lock_held_at_a_durable_wait_is_released_with_a_warning_and_taken_again_on_resume(
    lock_table: str, other_client: DynamoDBClient, caplog: pytest.LogCaptureFixture
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    key = f"order:{order}"
    held: list[tuple[str, bool]] = []  # (thread name, row present) per invocation

    @durable_execution
    @lock_handler(key="order:{order_id}", lease_duration=5)
    def handler(event: Any, context: DurableContext) -> str:
        row = other_client.sync_get_item(lock_table, {"key": key}, consistent_read=True)
        held.append((threading.current_thread().name, row is not None))
        context.wait(Duration.from_seconds(1))  # suspends the first invocation
        return current_lock().key

    with caplog.at_level(logging.WARNING, logger="dynalease"):
        result = _run(handler, f'{{"order_id": "{order}"}}')
    assert result.status is InvocationStatus.SUCCEEDED, result.error
    assert result.result == f'"{key}"'
    # Two invocations, each holding the lock, from the SDK's worker thread.
    assert len(held) == 2
    assert all(present for _, present in held)
    assert all(name != "MainThread" for name, _ in held)
    warnings = [r.getMessage() for r in caplog.records if "durable wait" in r.getMessage()]
    assert len(warnings) == 1
    assert "SuspendExecution" in warnings[0]
    assert other_client.sync_get_item(lock_table, {"key": key}, consistent_read=True) is None


def test_a_durable_handler_under_lock_handler_gets_its_budget_from_the_lambda_context(
    lock_table: str,
) -> None:
    seen: list[float] = []

    @durable_execution
    @lock_handler(key="job:{job}", lease_duration=5)
    def handler(event: Any, context: DurableContext) -> str:
        deadline = current_lock()._lease.deadline
        assert deadline is not None
        seen.append(deadline - time.monotonic())
        seen.append(context.lambda_context.get_remaining_time_in_millis() / 1000)
        return "done"

    result = _run(handler, f'{{"job": "j-{uuid.uuid4().hex[:8]}"}}')
    assert result.status is InvocationStatus.SUCCEEDED, result.error
    bound, remaining = seen
    assert 0 < bound <= remaining


def test_a_lock_taken_and_released_within_a_step_says_nothing(
    lock_table: str, aws_env: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = DynamoDBClient()
    key = f"step-{uuid.uuid4().hex[:8]}"

    def locked_step(_: Any) -> str:
        with SyncDistributedLock(client, table=lock_table, key=key, lease_duration=5) as guard:
            return guard.key

    @durable_execution
    def handler(event: Any, context: DurableContext) -> str:
        first = context.step(locked_step)
        context.wait(Duration.from_seconds(1))
        return str(first)

    with caplog.at_level(logging.WARNING, logger="dynalease"):
        result = _run(handler, "{}")
    assert result.status is InvocationStatus.SUCCEEDED, result.error
    assert not [r for r in caplog.records if "durable wait" in r.getMessage()]
