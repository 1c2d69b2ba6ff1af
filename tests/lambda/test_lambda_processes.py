"""A Lambda handler and a worker process sharing a key template compete for one lock."""

from __future__ import annotations

import multiprocessing
import queue
from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext

from dynalease import DynamoDBClient
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import distributed_lock
from dynalease.middleware import lock_handler

TEMPLATE = "sync:{tenant}:{customer_id}"


def _ecs_worker(
    endpoint: str,
    table: str,
    inside: Any,
    release: Any,
    lambda_holding: Any,
    results: Any,
) -> None:
    """What an ECS task would run: distributed_lock on its own function arguments."""
    client = DynamoDBClient(
        region="us-east-1", endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )

    @distributed_lock(client, table=table, key=TEMPLATE, wait_timeout=10)
    def synchronize(tenant: str, customer_id: str) -> None:
        inside.set()
        release.wait(30)

    synchronize("acme", "c-1001")

    @distributed_lock(client, table=table, key=TEMPLATE, wait_timeout=0)
    def try_once(tenant: str, customer_id: str) -> str:
        return "acquired"

    lambda_holding.wait(30)
    try:
        results.put(try_once(tenant="acme", customer_id="c-1001"))
    except LockNotAcquired as error:
        results.put(f"not acquired: {error.key}")


def test_a_lambda_handler_and_a_worker_process_with_the_same_template_exclude_each_other(
    lock_table: str, aws_env: str
) -> None:
    spawn = multiprocessing.get_context("spawn")
    inside, release, lambda_holding = spawn.Event(), spawn.Event(), spawn.Event()
    results = spawn.Queue()

    @lock_handler(
        key=TEMPLATE, fields={"tenant": "detail.tenant", "customer_id": "detail.customer_id"}
    )
    def handler(event: Any, context: Any) -> str:
        lambda_holding.set()
        answer: str = results.get(timeout=30)  # the worker's attempt, made while we hold
        return answer

    event = {
        "detail-type": "CustomerUpdated",
        "detail": {"tenant": "acme", "customer_id": "c-1001"},
    }
    worker = spawn.Process(
        target=_ecs_worker,
        args=(aws_env, lock_table, inside, release, lambda_holding, results),
    )
    worker.start()
    try:
        assert inside.wait(60), "the worker never got its lock"
        # 10.5 s left - 10 s cleanup budget: half a second of waiting, then give up.
        with pytest.raises(LockNotAcquired) as caught:
            handler(event, CountdownContext(10.5))
        # Both sides framed the two placeholders into the same key.
        assert caught.value.key == "sync:4:acme:6:c-1001"
        release.set()
        assert handler(event, CountdownContext(30)) == "not acquired: sync:4:acme:6:c-1001"
    finally:
        release.set()
        lambda_holding.set()
        worker.join(30)
        if worker.is_alive():
            worker.kill()
    assert worker.exitcode == 0
    with pytest.raises(queue.Empty):
        results.get_nowait()
