"""Single flight's checks, its result item and its counts, on MemoryBackend (no server).

Concurrency, processes and lost holders are tests/integration/test_single_flight.py
and tests/lambda/test_single_flight_lambda.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dynalease._results import EXPIRES_ATTRIBUTE, Outcome, item_size, result_key
from dynalease.client import DynamoDBClient
from dynalease.exceptions import SharedCallFailed, SharedResultTooLarge
from dynalease.keys import validate_key
from dynalease.single_flight import JSONSerializer, SingleFlight, single_flight
from dynalease.testing import MemoryBackend


@pytest.fixture
def client() -> Iterator[DynamoDBClient]:
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks", partition_key=("key", "S"))
        yield backend.client


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"result_ttl": -1}, ValueError, "result_ttl must be 0 or more"),
        ({"result_ttl": "60"}, TypeError, "result_ttl must be seconds"),
        ({"result_ttl": True}, TypeError, "result_ttl must be seconds"),
        ({"on_failure": "retry"}, ValueError, "on_failure must be 'raise'"),
        ({"serializer": object()}, TypeError, "serializer must have dumps"),
        ({"metrics": object()}, TypeError, "metrics must be a Powertools Metrics"),
    ],
)
def test_bad_options_are_refused_at_construction(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        SingleFlight(**options)


def test_bad_decorator_arguments_are_refused_before_any_request(client: DynamoDBClient) -> None:
    with pytest.raises(TypeError, match="flight must be a SingleFlight"):
        single_flight(client, table="locks", key="k", flight=60)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unmatched"):
        single_flight(client, table="locks", key="{")

    def generator() -> Iterator[int]:
        yield 1

    with pytest.raises(TypeError, match="generator"):
        single_flight(client, table="locks", key="k")(generator)


def test_lock_keys_may_not_take_the_result_items_prefix() -> None:
    with pytest.raises(ValueError, match="reserved for single-flight result items"):
        validate_key("dynalease-result:x")
    with pytest.raises(ValueError, match="too long for single flight"):
        result_key("k" * 2040)


def test_a_run_stores_its_json_result_beside_the_lock_row_with_a_ttl_attribute(
    client: DynamoDBClient,
) -> None:
    @single_flight(client, table="locks", key="report:{day}", flight=SingleFlight(result_ttl=60))
    def report(day: str) -> dict[str, Any]:
        return {"day": day, "rows": [1, 2]}

    assert report("d1") == {"day": "d1", "rows": [1, 2]}
    item = client.sync_get_item("locks", {"key": "dynalease-result:report:d1"})
    assert item is not None
    assert json.loads(item["data"]) == {"day": "d1", "rows": [1, 2]}
    assert item[EXPIRES_ATTRIBUTE] >= item["stored_at"] + 60
    assert client.sync_get_item("locks", {"key": "report:d1"}) is None  # the lock is released


def test_a_failure_is_stored_for_the_waiters_and_never_returned_to_a_later_caller(
    client: DynamoDBClient,
) -> None:
    calls: list[int] = []

    @single_flight(client, table="locks", key="k", flight=SingleFlight(result_ttl=60))
    def fails() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fails()
    item = client.sync_get_item("locks", {"key": "dynalease-result:k"})
    assert item is not None and (item["error_type"], item["error_message"]) == (
        "RuntimeError",
        "boom",
    )
    with pytest.raises(RuntimeError):  # a later caller runs it again rather than share
        fails()
    assert len(calls) == 2


def test_a_value_json_cannot_hold_is_raised_with_a_note_naming_the_serializer(
    client: DynamoDBClient,
) -> None:
    @single_flight(client, table="locks", key="k")
    def odd() -> object:
        return object()

    with pytest.raises(TypeError) as caught:
        odd()
    assert any("serializer=" in note for note in caught.value.__notes__)


def test_the_item_size_rule_counts_names_and_values() -> None:
    outcome = Outcome(1_700_000_000.5, data="é" * 10)
    item = outcome.item("k", 0)
    expected = len("key") + len("dynalease-result:k") + len("data") + 20
    expected += len("stored_at") + 21 + len(EXPIRES_ATTRIBUTE) + 21
    assert item_size(item) == expected
    assert Outcome.of_item(item) == outcome


def test_the_error_classes_carry_what_the_caller_needs() -> None:
    failed = SharedCallFailed("m", error_type="KeyError", error_message="'x'", table="t", key="k")
    assert (failed.error_type, failed.error_message, failed.table, failed.key) == (
        "KeyError",
        "'x'",
        "t",
        "k",
    )
    large = SharedResultTooLarge("m", result=[1], size=500_000, table="t", key="k")
    assert isinstance(large, ValueError) and large.result == [1] and large.size == 500_000


class _Recorder:
    def __init__(self) -> None:
        self.added: list[tuple[str, str, float]] = []

    def add_metric(self, *, name: str, unit: str, value: float) -> None:
        self.added.append((name, unit, value))


def test_counts_go_to_a_powertools_metrics_when_given(client: DynamoDBClient) -> None:
    recorder = _Recorder()
    flight = SingleFlight(result_ttl=60, metrics=recorder)

    @single_flight(client, table="locks", key="k", flight=flight)
    def value() -> int:
        return 7

    assert value() == 7
    assert value() == 7
    assert flight.metrics.calls == 2 and flight.metrics.runs == 1 and flight.metrics.shared == 1
    assert sorted({name for name, _, _ in recorder.added}) == [
        "SingleFlightCalls",
        "SingleFlightRuns",
        "SingleFlightShared",
    ]
    assert all(unit == "Count" and v == 1 for _, unit, v in recorder.added)


def test_the_json_serializer_is_compact() -> None:
    assert JSONSerializer().dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'


def test_a_holder_whose_error_cannot_be_stored_raises_its_own_error_with_a_note(
    client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    @single_flight(client, table="locks", key="k")
    def fails() -> None:
        raise RuntimeError("boom")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("no route to DynamoDB")

    monkeypatch.setattr(client, "sync_put_item", refuse)
    with pytest.raises(RuntimeError, match="boom") as caught:
        fails()
    assert any("could not store this error" in note for note in caught.value.__notes__)
