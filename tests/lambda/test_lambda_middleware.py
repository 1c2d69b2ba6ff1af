"""lock_handler: keys from events, options checked early, Powertools stacking, 409s and 503s."""

from __future__ import annotations

import base64
import inspect
import io
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools import Logger, Metrics
from dynalease_dev.invoke import CountdownContext

import dynalease.middleware as middleware
from dynalease import DynamoDBClient
from dynalease.constants import ENV_LOG_KEYS, ENV_TABLE
from dynalease.exceptions import LockLost, LockNotAcquired, LockUnavailable
from dynalease.lock import SyncDistributedLock
from dynalease.middleware import current_lock, key_hash, lock_handler


def _id() -> str:
    return f"c-{uuid.uuid4().hex[:8]}"


def _key_of(**options: Any) -> Callable[[Any], str]:
    """A handler that returns the key it ran under."""

    @lock_handler(**options)
    def handler(event: Any, context: Any) -> str:
        return current_lock().key

    return lambda event: handler(event, CountdownContext(60))


def test_the_public_names_are_exactly_these() -> None:
    assert sorted(middleware.__all__) == [
        "bound_locks",
        "current_lock",
        "key_hash",
        "lock_handler",
        "lock_record",
    ]


# --- keys from events --------------------------------------------------------------


def test_placeholders_without_fields_name_top_level_event_keys(lock_table: str) -> None:
    run = _key_of(key="customer:{customer_id}")
    assert run({"customer_id": "c-1", "other": 5}) == "customer:c-1"


def test_keys_resolves_every_template_from_the_event_and_holds_them_all(
    lock_table: str,
) -> None:
    @lock_handler(keys=["account:{source}", "account:{target}"], fields={"target": "detail.to"})
    def handler(event: Any, context: Any) -> tuple[str, ...]:
        guard = current_lock()
        with pytest.raises(LockNotAcquired):  # every key is held, for everyone else
            with SyncDistributedLock(
                guard._client, table=lock_table, key="account:b", wait_timeout=0
            ):
                pass
        return guard.keys

    assert handler({"source": "a", "detail": {"to": "b"}}, CountdownContext(60)) == (
        "account:a",
        "account:b",
    )
    with pytest.raises(ValueError, match=r"keys\[1\] repeats keys\[0\]"):
        handler({"source": "a", "detail": {"to": "a"}}, CountdownContext(60))
    with pytest.raises(ValueError, match="not both"):
        lock_handler(key="a", keys=["b"])
    with pytest.raises(ValueError, match="cannot be a semaphore"):
        lock_handler(keys=["a", "b"], permits=2)
    with pytest.raises(ValueError, match="fields names"):
        lock_handler(keys=["a:{x}", "b:{y}"], fields={"z": "detail.z"})


def test_fields_are_jmespath_with_powertools_functions(lock_table: str) -> None:
    run = _key_of(
        key="{tenant}:{customer_id}",
        fields={
            "tenant": "requestContext.accountId",
            "customer_id": "powertools_json(body).customer.id",
        },
    )
    event = {"requestContext": {"accountId": "acme"}, "body": '{"customer": {"id": "123"}}'}
    # Two placeholders are framed exactly as distributed_lock frames them.
    assert run(event) == "4:acme:3:123"


def test_powertools_base64_and_to_string_turn_encoded_and_numeric_values_into_keys(
    lock_table: str,
) -> None:
    payload = base64.b64encode(json.dumps({"order": 42}).encode()).decode()
    run = _key_of(
        key="order:{order}",
        fields={"order": "to_string(powertools_json(powertools_base64(data)).order)"},
    )
    assert run({"data": payload}) == "order:42"


@pytest.mark.parametrize(
    ("options", "event", "error", "pattern"),
    [
        (
            {"key": "customer:{customer_id}"},
            {"customerId": "c-1"},
            ValueError,
            r"placeholder \{customer_id\}: the top-level event key 'customer_id' found nothing",
        ),
        (
            {"key": "customer:{customer_id}"},
            {"customer_id": 1001},
            TypeError,
            r"gave int, not a str; map it with fields=\{'customer_id': "
            r"'to_string\(customer_id\)'\}",
        ),
        (
            {"key": "customer:{customer_id}", "fields": {"customer_id": "detail.customer_id"}},
            {"detail": {}},
            ValueError,
            r"fields\['customer_id'\] = 'detail.customer_id' found nothing in the event",
        ),
        (
            {"key": "c:{customer_id}", "fields": {"customer_id": "powertools_json(body).id"}},
            {"body": "{not json"},
            ValueError,
            r"fields\['customer_id'\] = 'powertools_json\(body\).id' failed on the event",
        ),
        (
            {"key": "c:{customer_id}", "fields": {"customer_id": "detail.ids"}},
            {"detail": {"ids": ["a"]}},
            TypeError,
            r"gave list of 1 item, not a str; wrap the expression in to_string",
        ),
        (
            {"key": "customer:{customer_id}"},
            ["not", "an", "object"],
            TypeError,
            r"the event is list, not an object",
        ),
    ],
)
def test_a_missing_or_non_string_value_is_a_clear_error_before_any_request(
    options: dict[str, Any],
    event: Any,
    error: type[Exception],
    pattern: str,
    lock_table: str,
    counted_client: DynamoDBClient,
    counting_proxy: Any,
) -> None:
    @lock_handler(counted_client, **options)
    def handler(event: Any, context: Any) -> None:
        raise AssertionError("must not run")

    with pytest.raises(error, match=pattern):
        handler(event, CountdownContext(60))
    assert counting_proxy.total() == 0


@pytest.mark.parametrize(
    ("options", "error", "pattern"),
    [
        ({"key": "c:{id}", "fields": {"id": "detail.["}}, ValueError, "not a valid JMESPath"),
        ({"key": "c:{id}", "fields": {"idd": "detail.id"}}, ValueError, r"fields names \['idd'\]"),
        ({"key": "c:{id}", "fields": {"id": 3}}, TypeError, "must be a JMESPath expression"),
        ({"key": "c:{id}", "fields": ["id"]}, TypeError, "fields must map placeholder names"),
        ({"key": "c:{0}"}, ValueError, "positional placeholder"),
        ({"key": "c:{id}", "reserve_time": -1}, ValueError, "reserve_time must be 0 or more"),
        ({"key": "c:{id}", "wait_timeout": -1}, ValueError, "wait_timeout must be 0 or more"),
        ({"key": "c:{id}", "lease_duration": 0.01}, ValueError, "lease_duration must be at least"),
        ({"key": "c:{id}", "table": "x"}, ValueError, "not a valid DynamoDB table name"),
        ({"key": "c:{id}", "log_key": "plain"}, ValueError, "log_key must be 'hash'"),
        ({"key": "c:{id}", "on_contention": 409}, TypeError, "on_contention must be a callable"),
        ({"key": "c:{id}", "metrics": object()}, TypeError, "metrics must be a Powertools"),
        ({"key": "c:{id}", "logger": "log"}, TypeError, "logger must be a Powertools Logger"),
        ({"key": "c:{id}", "client": "boto3"}, TypeError, "client must be a dynalease"),
    ],
)
def test_bad_options_are_rejected_when_the_handler_is_decorated(
    options: dict[str, Any], error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        lock_handler(**options)


def test_an_async_handler_is_rejected_with_a_way_out() -> None:
    with pytest.raises(TypeError, match=r"asyncio.run inside a def handler"):

        @lock_handler(key="c:{id}", table="locks")
        async def handler(event: Any, context: Any) -> None: ...


def test_without_a_table_argument_or_environment_variable_the_error_names_both(
    aws_env: str,
    monkeypatch: pytest.MonkeyPatch,
    counted_client: DynamoDBClient,
    counting_proxy: Any,
) -> None:
    monkeypatch.delenv(ENV_TABLE, raising=False)

    @lock_handler(counted_client, key="c:{id}")
    def handler(event: Any, context: Any) -> None: ...

    with pytest.raises(
        ValueError, match=r"pass table=\.\.\. to the decorator or set the DYNALEASE_TABLE"
    ):
        handler({"id": "1"}, CountdownContext(60))
    assert counting_proxy.total() == 0


def test_an_explicit_table_wins_over_the_environment(
    lock_table: str, other_client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_TABLE, "some-other-table")
    run = _key_of(key="c:{id}", table=lock_table)
    assert run({"id": "x"}) == "c:x"


# --- contention ------------------------------------------------------------------


def test_on_contention_turns_a_held_lock_into_the_handlers_response(
    lock_table: str, other_client: DynamoDBClient
) -> None:
    seen: list[tuple[Any, Any, LockNotAcquired]] = []

    def conflict(event: Any, context: Any, error: LockNotAcquired) -> dict[str, Any]:
        seen.append((event, context, error))
        return {"statusCode": 409, "body": json.dumps({"message": "busy"})}

    @lock_handler(key="customer:{customer_id}", wait_timeout=0.2, on_contention=conflict)
    def handler(event: Any, context: Any) -> dict[str, Any]:
        return {"statusCode": 200}

    customer = _id()
    event, context = {"customer_id": customer}, CountdownContext(29)
    with SyncDistributedLock(other_client, table=lock_table, key=f"customer:{customer}"):
        assert handler(event, context)["statusCode"] == 409
    [(seen_event, seen_context, error)] = seen
    assert seen_event is event and seen_context is context
    assert error.key == f"customer:{customer}" and error.table == lock_table
    assert handler(event, CountdownContext(29)) == {"statusCode": 200}


def test_on_contention_also_answers_when_the_invocation_has_no_time_left(lock_table: str) -> None:
    @lock_handler(
        key="c:{id}", reserve_time=25, on_contention=lambda e, c, error: {"statusCode": 503}
    )
    def handler(event: Any, context: Any) -> None:
        raise AssertionError("must not run")

    assert handler({"id": "1"}, CountdownContext(29)) == {"statusCode": 503}


def test_a_failing_handler_releases_its_lock_and_its_error_propagates(
    lock_table: str, other_client: DynamoDBClient
) -> None:
    @lock_handler(key="c:{id}")
    def handler(event: Any, context: Any) -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        handler({"id": "failing"}, CountdownContext(60))
    assert (
        other_client.sync_get_item(lock_table, {"key": "c:failing"}, consistent_read=True) is None
    )


def test_current_lock_outside_a_wrapped_handler_says_where_it_works() -> None:
    with pytest.raises(LookupError, match="inside a handler wrapped by lock_handler"):
        current_lock()


# --- Powertools stacking and observability -------------------------------------------


class _Observed:
    """A Powertools Logger writing to a buffer, and Metrics (EMF goes to stdout)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.stream = io.StringIO()
        # A service name of its own: Powertools Loggers of one service share handlers.
        self.logger = Logger(service=f"lock-tests-{uuid.uuid4().hex}", stream=self.stream)
        self.metrics = Metrics(namespace="DynaleaseTests", service="lock-tests")
        self.metrics.clear_metrics()

    def logs(self) -> list[dict[str, Any]]:
        return _json_lines(self.stream.getvalue())

    def emf(self) -> dict[str, Any]:
        """The one EMF metrics line printed to stdout since the output was last read."""
        [emf] = [line for line in _json_lines(self.capsys.readouterr().out) if "_aws" in line]
        return emf


@pytest.fixture
def observed(capsys: pytest.CaptureFixture[str]) -> _Observed:
    capsys.readouterr()
    return _Observed(capsys)


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_it_stacks_under_logger_and_metrics_with_one_log_line_and_emf_metrics_per_lock(
    lock_table: str, observed: _Observed
) -> None:
    logger, metrics = observed.logger, observed.metrics
    customer = _id()

    @logger.inject_lambda_context
    @metrics.log_metrics
    @lock_handler(key="customer:{customer_id}", logger=logger, metrics=metrics)
    def handler(event: Any, context: Any) -> str:
        logger.info("working")
        return current_lock().key

    context = CountdownContext(60, function_name="stacked")
    assert handler({"customer_id": customer}, context) == f"customer:{customer}"

    emf = observed.emf()
    names = {m["Name"]: m["Unit"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {
        "LockAcquired": "Count",
        "LockWaitMs": "Milliseconds",
        "LockRenewals": "Count",
        "LockHeldMs": "Milliseconds",
    }
    assert emf["LockAcquired"] == [1.0] and emf["LockRenewals"] == [0.0]
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "DynaleaseTests"

    logs = observed.logs()
    assert [line["message"] for line in logs] == ["working", "dynalease lock released"]
    lock = logs[1]  # the lock's fields are top-level keys of the line
    assert logs[1]["function_name"] == "stacked"  # inject_lambda_context's fields are there
    assert logs[1]["function_request_id"] == context.aws_request_id
    assert lock["outcome"] == "released" and lock["table"] == lock_table
    assert lock["template"] == "customer:{customer_id}"
    assert lock["key_hash"] == key_hash(f"customer:{customer}") and "key" not in lock
    assert lock["renewals"] == 0 and lock["requests"] == 2 and lock["wait_ms"] >= 0


def test_contention_is_logged_and_counted_even_though_the_handler_raises(
    lock_table: str,
    other_client: DynamoDBClient,
    capsys: pytest.CaptureFixture[str],
    observed: _Observed,
) -> None:
    logger, metrics = observed.logger, observed.metrics
    customer = _id()

    @metrics.log_metrics
    @lock_handler(
        key="customer:{customer_id}", wait_timeout=0, logger=logger, metrics=metrics, log_key="key"
    )
    def handler(event: Any, context: Any) -> None:
        raise AssertionError("must not run")

    capsys.readouterr()
    with SyncDistributedLock(other_client, table=lock_table, key=f"customer:{customer}"):
        with pytest.raises(LockNotAcquired):
            handler({"customer_id": customer}, CountdownContext(60))
    emf = observed.emf()
    assert emf["LockContention"] == [1.0] and "LockAcquired" not in emf
    [line] = observed.logs()
    assert line["level"] == "INFO" and line["message"] == "dynalease lock contention"
    assert line["key"] == f"customer:{customer}" and "key_hash" not in line
    assert line["outcome"] == "contention" and line["wait_ms"] >= 0


@pytest.fixture
def unreachable_client(aws_env: str, refusing_url: str) -> DynamoDBClient:
    """A client whose endpoint is a loopback port nobody listens on: every request fails."""
    return DynamoDBClient(
        region="us-east-1",
        endpoint_url=refusing_url,
        access_key="testing",
        secret_key="testing",
    )


def test_an_outage_reaches_on_contention_as_lock_unavailable_and_contention_as_plain(
    lock_table: str, other_client: DynamoDBClient, unreachable_client: DynamoDBClient
) -> None:
    seen: list[LockNotAcquired] = []

    def answer(event: Any, context: Any, error: LockNotAcquired) -> dict[str, Any]:
        seen.append(error)
        return {"statusCode": 503 if isinstance(error, LockUnavailable) else 409}

    options: dict[str, Any] = {"key": "c:{id}", "wait_timeout": 0.3, "on_contention": answer}
    down = lock_handler(unreachable_client, table=lock_table, **options)(lambda e, c: 200)
    up = lock_handler(other_client, table=lock_table, **options)(lambda e, c: 200)
    customer = _id()
    assert down({"id": customer}, CountdownContext(29)) == {"statusCode": 503}
    with SyncDistributedLock(other_client, table=lock_table, key=f"c:{customer}"):
        assert up({"id": customer}, CountdownContext(29)) == {"statusCode": 409}
    assert [type(error) for error in seen] == [LockUnavailable, LockNotAcquired]


def test_an_outage_is_logged_and_counted_as_unavailable_not_as_contention(
    lock_table: str,
    unreachable_client: DynamoDBClient,
    capsys: pytest.CaptureFixture[str],
    observed: _Observed,
) -> None:
    logger, metrics = observed.logger, observed.metrics
    customer = _id()

    @metrics.log_metrics
    @lock_handler(
        unreachable_client,
        key="customer:{customer_id}",
        wait_timeout=0.2,
        logger=logger,
        metrics=metrics,
    )
    def handler(event: Any, context: Any) -> None:
        raise AssertionError("must not run")

    capsys.readouterr()
    with pytest.raises(LockUnavailable):
        handler({"customer_id": customer}, CountdownContext(60))
    emf = observed.emf()
    assert emf["LockUnavailable"] == [1.0]
    assert "LockContention" not in emf and "LockAcquired" not in emf
    [line] = observed.logs()
    assert line["level"] == "WARNING" and line["message"] == "dynalease lock unavailable"
    assert line["outcome"] == "unavailable" and line["requests"] >= 1
    assert line["key_hash"] == key_hash(f"customer:{customer}") and "key" not in line


@pytest.mark.parametrize(("setting", "logs_key"), [(None, False), ("hash", False), ("key", True)])
def test_without_log_key_the_line_follows_dynalease_log_keys_as_the_engine_does(
    setting: str | None,
    logs_key: bool,
    lock_table: str,
    observed: _Observed,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if setting is None:
        monkeypatch.delenv(ENV_LOG_KEYS, raising=False)
    else:
        monkeypatch.setenv(ENV_LOG_KEYS, setting)
    customer = _id()

    @lock_handler(key="customer:{customer_id}", logger=observed.logger)
    def handler(event: Any, context: Any) -> str:
        return "done"

    handler({"customer_id": customer}, CountdownContext(60))
    [line] = observed.logs()
    if logs_key:
        assert line["key"] == f"customer:{customer}" and "key_hash" not in line
    else:
        assert line["key_hash"] == key_hash(f"customer:{customer}") and "key" not in line


def test_an_explicit_log_key_wins_over_dynalease_log_keys(
    lock_table: str, observed: _Observed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_LOG_KEYS, "key")
    customer = _id()

    @lock_handler(key="customer:{customer_id}", logger=observed.logger, log_key="hash")
    def handler(event: Any, context: Any) -> str:
        return "done"

    handler({"customer_id": customer}, CountdownContext(60))
    [line] = observed.logs()
    assert line["key_hash"] == key_hash(f"customer:{customer}") and "key" not in line


def test_a_lock_lost_during_the_invocation_fails_it_and_is_logged_and_counted_as_lost(
    lock_table: str,
    other_client: DynamoDBClient,
    capsys: pytest.CaptureFixture[str],
    observed: _Observed,
) -> None:
    logger, metrics = observed.logger, observed.metrics

    @metrics.log_metrics
    @lock_handler(key="c:{id}", logger=logger, metrics=metrics)
    def handler(event: Any, context: Any) -> str:
        # Someone removes the row by hand while we work: ownership is gone.
        other_client.sync_delete_item(lock_table, {"key": current_lock().key})
        return "done, but unprotected"

    capsys.readouterr()
    with pytest.raises(LockLost, match="deleted by someone else"):
        handler({"id": _id()}, CountdownContext(60))
    emf = observed.emf()
    assert emf["LockLost"] == [1.0] and emf["LockAcquired"] == [1.0]
    [line] = observed.logs()
    assert line["level"] == "WARNING" and line["outcome"] == "lost"


def test_under_powertools_idempotency_a_repeated_event_is_answered_without_taking_the_lock(
    lock_table: str, other_client: DynamoDBClient, aws_env: str
) -> None:
    import boto3
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent,
    )

    records = f"idempotency-{uuid.uuid4().hex[:12]}"
    other_client.sync_create_table(records, partition_key=("id", "S"), wait=True)
    persistence = DynamoDBPersistenceLayer(
        table_name=records, boto3_client=boto3.client("dynamodb", endpoint_url=aws_env)
    )
    runs: list[str] = []

    @idempotent(
        persistence_store=persistence,
        config=IdempotencyConfig(event_key_jmespath="customer_id"),
    )
    @lock_handler(key="customer:{customer_id}")
    def handler(event: Any, context: Any) -> dict[str, str]:
        runs.append(current_lock().key)
        return {"synchronized": event["customer_id"]}

    customer = _id()
    first = handler({"customer_id": customer}, CountdownContext(60))
    # The repeat is answered from the idempotency record, even while another
    # owner holds the customer's lock: the lock is only taken for real work.
    with SyncDistributedLock(other_client, table=lock_table, key=f"customer:{customer}"):
        second = handler({"customer_id": customer}, CountdownContext(60))
    assert first == second == {"synchronized": customer}
    assert runs == [f"customer:{customer}"]


def test_without_a_powertools_logger_the_library_logger_gets_the_same_line(
    lock_table: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dynalease")
    run = _key_of(key="c:{id}")
    run({"id": "plain"})
    [record] = [r for r in caplog.records if r.name == "dynalease.middleware"]
    assert record.levelno == logging.DEBUG
    assert record.getMessage().startswith("dynalease lock released: table=")
    assert f"key_hash={key_hash('c:plain')}" in record.getMessage()


def test_importing_the_middleware_pulls_in_no_cdk_boto3_or_cli() -> None:
    # Powertools itself imports botocore's package and jmespath; boto3 (the client's
    # sessions) waits for the first invocation, and nothing CDK or CLI is needed.
    code = (
        "import sys, time; t = time.perf_counter(); import dynalease.middleware; "
        "print(round((time.perf_counter() - t) * 1000)); "
        "print(sorted(m for m in ('aws_cdk', 'boto3', 'rich', 'dynalease.cdk', "
        "'dynalease.cli', 'dynalease_dev.demo', 'dynalease_dev.invoke') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    print(f"import dynalease.middleware: {out[0]} ms")  # a figure, not an assertion
    assert out[1] == "[]"


# --- permits -----------------------------------------------------------------------


def test_permits_let_n_invocations_hold_a_key_at_once(
    lock_table: str, other_client: DynamoDBClient
) -> None:
    from dynalease import SyncDistributedSemaphore

    @lock_handler(
        key="partner:{name}",
        permits=2,
        wait_timeout=0,
        on_contention=lambda e, c, error: {"statusCode": 429, "error": str(error)},
    )
    def handler(event: Any, context: Any) -> dict[str, Any]:
        guard = current_lock()
        assert isinstance(guard, SyncDistributedSemaphore)
        return {"statusCode": 200, "permit": guard.permit_key}

    name = _id()
    options = {"table": lock_table, "key": f"partner:{name}", "permits": 2}
    with SyncDistributedSemaphore(other_client, **options) as first:  # type: ignore[arg-type]
        answer = handler({"name": name}, CountdownContext(29))
        assert answer["statusCode"] == 200 and answer["permit"] != first.permit_key
        with SyncDistributedSemaphore(other_client, **options):  # type: ignore[arg-type]
            busy = handler({"name": name}, CountdownContext(29))
            assert busy["statusCode"] == 429 and "none of its 2 permits" in busy["error"]


def test_a_bad_permits_count_is_rejected_when_decorating() -> None:
    with pytest.raises(ValueError, match="between 1 and 100"):
        lock_handler(key="k", permits=0)
    with pytest.raises(TypeError, match="permits must be an int"):
        lock_handler(key="k", permits="3")  # type: ignore[arg-type]


@pytest.mark.parametrize("decorator", [middleware.lock_handler, middleware.lock_record])
def test_a_misspelled_or_missing_option_is_python_s_own_type_error_naming_it(
    decorator: Callable[..., Any],
) -> None:
    """Explicit keywords: a wrong name is Python's own TypeError naming it, at once."""
    name = decorator.__name__
    with pytest.raises(
        TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'wait_timout'"
    ):
        decorator(table="locks", key="k", wait_timout=5)
    with pytest.raises(TypeError, match=rf"^{name}\(\) missing required keyword argument: 'key'$"):
        decorator(table="locks")


def test_lock_record_takes_no_on_contention() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'on_contention'"):
        middleware.lock_record(key="k", on_contention=lambda *_: None)


def test_both_decorators_show_every_option_to_an_editor() -> None:
    """Explicit keyword-only options, the same names and defaults in both decorators."""
    handler = inspect.signature(middleware.lock_handler).parameters
    record = inspect.signature(middleware.lock_record).parameters
    assert {"key", "table", "fields", "lease_duration", "wait_timeout", "permits"} <= set(record)
    assert set(handler) - set(record) == {"on_contention", "single_flight"}  # responses only
    for name, parameter in record.items():
        if name != "client":
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert handler[name].default == parameter.default, name
        assert handler[name].annotation == parameter.annotation, name


CARD = "4111111111111111"


@pytest.mark.parametrize(
    ("options", "event", "error", "shown"),
    [
        (
            {"key": "customer:{customer_id}", "fields": {"customer_id": "body.customer"}},
            {"body": {"customer": {"id": 7, "card": CARD, "cvv": "123"}}},
            TypeError,
            "gave dict of 3 items, not a str",
        ),
        ({"key": "card:{card}"}, {"card": int(CARD)}, TypeError, "gave int, not a str"),
        (
            {"key": "card:{card}", "fields": {"card": "length(card)"}},
            {"card": int(CARD)},
            ValueError,
            "length() takes string or array or object, not number",
        ),
        (
            {"keys": ["account:{a}", "account:{b}"], "fields": {"b": "body.card"}},
            {"a": CARD, "body": {"card": CARD}},
            ValueError,
            "keys[1] repeats keys[0]; each key may appear once",
        ),
    ],
)
def test_event_data_never_reaches_an_error_message_only_types_sizes_and_indices(
    options: dict[str, Any],
    event: Any,
    error: type[Exception],
    shown: str,
    lock_table: str,
) -> None:
    @lock_handler(**options)
    def handler(event: Any, context: Any) -> None:
        raise AssertionError("must not run")

    with pytest.raises(error) as raised:
        handler(event, CountdownContext(60))
    message = str(raised.value)
    assert shown in message
    assert CARD[:6] not in message and "'123'" not in message, message


# --- who holds the row -------------------------------------------------------------


def test_an_invocations_row_names_its_function_version_and_request_id(
    lock_table: str, other_client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-sync")
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_VERSION", "12")
    seen: dict[str, Any] = {}

    @lock_handler(key="order:{id}")
    def handler(event: Any, context: Any) -> None:
        key = current_lock().key
        item = other_client.sync_get_item(lock_table, {"key": key}, consistent_read=True)
        seen.update(item["holder"] if item else {})

    handler({"id": _id()}, CountdownContext(60, aws_request_id="8f5c3e2a-invocation"))
    assert seen["lambda"] == {
        "function": "orders-sync",
        "version": "12",
        "request_id": "8f5c3e2a-invocation",
    }


def test_a_takeover_of_an_abandoned_row_is_counted_as_contended_and_as_a_takeover(
    lock_table: str, other_client: DynamoDBClient, observed: _Observed
) -> None:
    key = f"order:{_id()}"
    other_client.sync_put_item(  # a holder that died: pydynox's row shape, a 0.1 s lease
        lock_table,
        {"key": key, "owner": str(uuid.uuid4()), "version": "v", "lease_ms": 100, "protocol": 1},
    )

    @observed.metrics.log_metrics
    @lock_handler(key="{key}", metrics=observed.metrics)
    def handler(event: Any, context: Any) -> None:
        pass

    handler({"key": key}, CountdownContext(60))
    emf = observed.emf()
    assert emf["LockAcquired"] == [1.0]
    assert emf["LockContended"] == [1.0] and emf["LockTakeover"] == [1.0]
    assert emf["LockWaitMs"][0] >= 100  # it watched the row for the stored lease
    assert len(emf["LockHeldMs"]) == 1
