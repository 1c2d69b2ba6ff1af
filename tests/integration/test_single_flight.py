"""Single flight against the moto server: threads of one process share one run per key.

The function a runner runs returns only once every caller has begun (``all_called``:
the flight counted them), so each one began before the result was stored and shares it
however the machine schedules them; leases are 10 s and waits 60 s so that no lease runs
out under load (these tests are about who runs, not about time).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from support.at_once import all_called, together
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.exceptions import SharedCallFailed, SharedResultTooLarge
from dynalease.single_flight import SingleFlight, single_flight

LEASE_S = 10.0
WAIT_S = 60.0


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "flights")


def test_twenty_concurrent_calls_for_one_key_run_the_function_once(
    client: DynamoDBClient, table: str
) -> None:
    runs: list[str] = []
    flight = SingleFlight()

    @single_flight(
        client,
        table=table,
        key="report:{day}",
        lease_duration=LEASE_S,
        wait_timeout=WAIT_S,
        flight=flight,
    )
    def report(day: str) -> dict[str, Any]:
        runs.append(day)
        all_called(flight, 20)
        return {"day": day, "total": 42}

    results = together(20, lambda _: report("2026-12-07"))

    assert runs == ["2026-12-07"]
    assert results == [{"day": "2026-12-07", "total": 42}] * 20
    metrics = flight.metrics
    assert (metrics.calls, metrics.runs, metrics.shared) == (20, 1, 19)
    assert metrics.waits >= 1


def test_twenty_calls_over_five_keys_run_five_times(client: DynamoDBClient, table: str) -> None:
    runs: Counter[str] = Counter()
    flight = SingleFlight()

    @single_flight(
        client,
        table=table,
        key="k:{name}",
        lease_duration=LEASE_S,
        wait_timeout=WAIT_S,
        flight=flight,
    )
    def work(name: str) -> str:
        runs[name] += 1
        all_called(flight, 20)
        return name.upper()

    results = together(20, lambda i: work(f"key{i % 5}"))

    assert runs == {f"key{i}": 1 for i in range(5)}
    assert results == [f"KEY{i % 5}" for i in range(20)]


def test_waiters_get_shared_call_failed_with_the_holders_error(
    client: DynamoDBClient, table: str
) -> None:
    runs: list[int] = []
    flight = SingleFlight()

    @single_flight(
        client, table=table, key="fails", lease_duration=LEASE_S, wait_timeout=WAIT_S, flight=flight
    )
    def fails() -> None:
        runs.append(1)
        all_called(flight, 5)
        raise TimeoutError("the provider did not answer")

    results = together(5, lambda _: fails())

    assert len(runs) == 1
    assert sum(isinstance(r, TimeoutError) for r in results) == 1
    shared = [r for r in results if isinstance(r, SharedCallFailed)]
    assert len(shared) == 4
    assert shared[0].error_type == "TimeoutError"
    assert shared[0].error_message == "the provider did not answer"
    assert "TimeoutError: the provider did not answer" in str(shared[0])
    assert "on_failure='run'" in str(shared[0])


def test_with_on_failure_run_the_next_waiter_runs_the_function_itself(
    client: DynamoDBClient, table: str
) -> None:
    runs: list[int] = []
    flight = SingleFlight(on_failure="run")

    @single_flight(
        client, table=table, key="flaky", lease_duration=LEASE_S, wait_timeout=WAIT_S, flight=flight
    )
    def flaky() -> str:
        runs.append(1)
        all_called(flight, 5)
        if len(runs) == 1:
            raise ConnectionError("first try fails")
        return "second try"

    results = together(5, lambda _: flaky())

    assert len(runs) == 2  # the holder, then one waiter; the rest share the waiter's result
    assert sum(isinstance(r, ConnectionError) for r in results) == 1
    assert results.count("second try") == 4


def test_a_later_call_gets_the_fresh_result_with_one_read_then_runs_once_it_is_stale(
    client: DynamoDBClient, table: str
) -> None:
    runs: list[int] = []

    @single_flight(client, table=table, key="token", flight=SingleFlight(result_ttl=3.0))
    def token() -> int:
        runs.append(1)
        return len(runs)

    assert token() == 1
    assert token() == 1  # fresh: shared
    time.sleep(3.1)  # past result_ttl (3 s: a loaded machine's two calls are well within)
    assert token() == 2
    assert len(runs) == 2


def test_without_result_ttl_a_later_call_runs_again(client: DynamoDBClient, table: str) -> None:
    runs: list[int] = []

    @single_flight(client, table=table, key="once")
    def once() -> int:
        runs.append(1)
        return len(runs)

    assert once() == 1
    assert once() == 2  # found the lock free: a result stored before it began is not its


def test_a_result_over_the_item_limit_is_raised_to_the_runner_with_the_value(
    client: DynamoDBClient, table: str
) -> None:
    big = "x" * 500_000

    @single_flight(client, table=table, key="big")
    def large() -> str:
        return big

    with pytest.raises(
        SharedResultTooLarge, match="over DynamoDB's 409600-byte item limit"
    ) as info:
        large()
    assert info.value.result is big
    assert info.value.size > 500_000
    assert "S3" in str(info.value)


def test_bytes_serializers_such_as_pickle_are_stored_as_binary(
    client: DynamoDBClient, table: str
) -> None:
    import pickle

    @single_flight(
        client, table=table, key="pickled", flight=SingleFlight(result_ttl=60, serializer=pickle)
    )
    def pickled() -> set[int]:
        return {1, 2, 3}

    assert pickled() == {1, 2, 3}
    assert pickled() == {1, 2, 3}


def test_an_async_function_shares_its_result_between_tasks(
    client: DynamoDBClient, table: str
) -> None:
    runs: list[int] = []
    flight = SingleFlight()

    @single_flight(
        client,
        table=table,
        key="async",
        lease_duration=LEASE_S,
        wait_timeout=WAIT_S,
        flight=flight,
    )
    async def fetch() -> list[int]:
        runs.append(1)
        while flight.metrics.calls < 5:  # every task began before the result is stored
            await asyncio.sleep(0.01)
        return [1, 2]

    async def main() -> list[Any]:
        return await asyncio.gather(*(fetch() for _ in range(5)))

    assert asyncio.run(main()) == [[1, 2]] * 5
    assert len(runs) == 1
    assert flight.metrics.shared == 4
