"""Key templates (docs/protocol.md): binding, framing, braces, limits, when errors surface."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.lease_harness import TABLE, recording_client

from dynalease.keys import MAX_KEY_BYTES, KeyTemplate
from dynalease.lock import distributed_lock


def locked_key(transport: Any) -> str:
    """The key of the last lock row created through the recording transport."""
    creates = [r for r in transport.sent if r.operation == "PutItem"]
    return str(creates[-1].params["Item"]["key"]["S"])


# --- resolution through the decorator -------------------------------------------------


def test_positional_keyword_and_default_arguments_resolve_the_same_key() -> None:
    client, transport = recording_client()

    @distributed_lock(client, table=TABLE, key="{tenant}:{region}")
    def sync(tenant: str, region: str = "eu") -> str:
        return f"{tenant}/{region}"

    assert sync("acme") == "acme/eu"
    assert locked_key(transport) == "4:acme:2:eu"
    sync(tenant="acme")
    assert locked_key(transport) == "4:acme:2:eu"
    sync("acme", region="eu")
    assert locked_key(transport) == "4:acme:2:eu"
    sync("acme", "us")
    assert locked_key(transport) == "4:acme:2:us"


def test_keyword_only_arguments_can_be_placeholders() -> None:
    client, transport = recording_client()

    @distributed_lock(client, table=TABLE, key="job:{job_id}")
    def run_job(*, job_id: str) -> None: ...

    run_job(job_id="42")
    assert locked_key(transport) == "job:42"


def test_a_decorated_method_resolves_its_arguments_without_self() -> None:
    client, transport = recording_client()

    class Worker:
        @distributed_lock(client, table=TABLE, key="customer:{customer_id}")
        def sync(self, customer_id: str) -> str:
            return f"{type(self).__name__} {customer_id}"

        @distributed_lock(client, table=TABLE, key="order:{order_id}")
        async def refresh(self, order_id: str) -> str:
            return order_id

    worker = Worker()
    assert worker.sync("123") == "Worker 123"
    assert locked_key(transport) == "customer:123"
    assert asyncio.run(worker.refresh(order_id="9")) == "9"
    assert locked_key(transport) == "order:9"


def test_a_bound_method_can_be_decorated_directly() -> None:
    client, transport = recording_client()

    class Worker:
        def sync(self, customer_id: str) -> str:
            return customer_id

    locked = distributed_lock(client, table=TABLE, key="c:{customer_id}")(Worker().sync)
    assert locked("7") == "7"
    assert locked_key(transport) == "c:7"


def test_a_template_without_placeholders_is_the_key_itself() -> None:
    client, transport = recording_client()

    @distributed_lock(client, table=TABLE, key="nightly-report")
    def report() -> None: ...

    report()
    assert locked_key(transport) == "nightly-report"


# --- the framing ------------------------------------------------------------------------


def test_one_placeholder_inserts_the_value_unframed() -> None:
    assert KeyTemplate("customer:{customer_id}").resolve({"customer_id": "123"}) == ("customer:123")


def test_several_placeholders_are_framed_with_utf8_byte_lengths() -> None:
    template = KeyTemplate("{tenant}:{id}")
    assert template.resolve({"tenant": "acme", "id": "123"}) == "4:acme:3:123"
    # Lengths are UTF-8 bytes, not characters: é is 2 bytes, 猫 3, 🦆 4.
    assert template.resolve({"tenant": "café", "id": "猫🦆"}) == "5:café:7:猫🦆"
    assert template.resolve({"tenant": "", "id": "x"}) == "0::1:x"


def test_framing_keeps_delimiters_inside_values_from_colliding() -> None:
    template = KeyTemplate("{a}:{b}")
    assert template.resolve({"a": "x:y", "b": "z"}) != template.resolve({"a": "x", "b": "y:z"})


def test_a_repeated_placeholder_is_framed_at_each_occurrence() -> None:
    assert KeyTemplate("{a}-{a}").resolve({"a": "xy"}) == "2:xy-2:xy"


def test_double_braces_are_literal_braces() -> None:
    assert KeyTemplate("{{literal}}").resolve({}) == "{literal}"
    assert KeyTemplate("{{{id}}}").resolve({"id": "7"}) == "{7}"
    assert KeyTemplate("a{{b}}:{x}:{y}").resolve({"x": "1", "y": "22"}) == "a{b}:1:1:2:22"


# --- limits ---------------------------------------------------------------------------------


def test_resolved_keys_of_1_and_2048_utf8_bytes_are_accepted() -> None:
    template = KeyTemplate("{k}")
    assert template.resolve({"k": "x"}) == "x"
    assert template.resolve({"k": "é" * 1024}) == "é" * 1024
    assert MAX_KEY_BYTES == 2048


@pytest.mark.parametrize(
    ("template", "values", "problem"),
    [
        ("{k}", {"k": ""}, "empty"),
        ("{k}", {"k": "x" * 2049}, "2049 UTF-8 bytes"),
        ("{k}", {"k": "猫" * 683}, "2049 UTF-8 bytes"),
        ("p:{a}:{b}", {"a": "x" * 1020, "b": "y" * 1020}, "UTF-8 bytes"),
        ("{k}", {"k": "\ud800"}, "surrogate"),
    ],
)
def test_resolved_keys_outside_the_limits_are_rejected(
    template: str, values: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        KeyTemplate(template).resolve(values)


# --- when errors surface -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    ["a:{", "a:}", "{}", "{0}", "{a.b}", "{a[0]}", "{a!r}", "{a:>3}", "{1abc}", "{a{b}"],
)
def test_template_errors_are_raised_at_decoration_without_a_request(template: str) -> None:
    client, transport = recording_client()
    with pytest.raises(ValueError, match="key template"):

        @distributed_lock(client, table=TABLE, key=template)
        def work(a: str) -> None: ...

    assert transport.sent == []


def test_a_template_that_is_not_a_str_is_a_type_error() -> None:
    client, _ = recording_client()
    with pytest.raises(TypeError, match="key template"):
        distributed_lock(client, table=TABLE, key=123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "signature",
    ["def work(order_id: str): ...", "def work(*customer_id): ...", "def work(**customer_id): ..."],
)
def test_a_placeholder_that_is_not_a_direct_argument_fails_at_decoration(signature: str) -> None:
    client, transport = recording_client()
    namespace: dict[str, Any] = {}
    exec(signature, namespace)
    with pytest.raises(ValueError, match="customer_id"):
        distributed_lock(client, table=TABLE, key="c:{customer_id}")(namespace["work"])
    assert transport.sent == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "problem"),
    [
        ((123,), {}, TypeError, "customer_id"),
        ((b"123",), {}, TypeError, "bytes"),
        ((None,), {}, TypeError, "got None; the value is missing"),
        ((), {}, TypeError, "missing"),
        (("1", "2"), {}, TypeError, "positional"),
        (("1",), {"other": "2"}, TypeError, "unexpected keyword"),
        (("",), {}, ValueError, "empty"),
        (("x" * 2049,), {}, ValueError, "2,048|2048"),
    ],
)
def test_argument_errors_are_raised_at_call_before_any_request(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], problem: str
) -> None:
    client, transport = recording_client()
    calls: list[object] = []

    @distributed_lock(client, table=TABLE, key="{customer_id}")
    def work(customer_id: str) -> None:
        calls.append(customer_id)

    @distributed_lock(client, table=TABLE, key="{customer_id}")
    async def async_work(customer_id: str) -> None:
        calls.append(customer_id)

    with pytest.raises(error, match=problem):
        work(*args, **kwargs)
    with pytest.raises(error, match=problem):
        asyncio.run(async_work(*args, **kwargs))
    assert transport.sent == [] and calls == []


def test_decorating_and_creating_an_unawaited_coroutine_make_no_request() -> None:
    client, transport = recording_client()

    @distributed_lock(client, table=TABLE, key="c:{customer_id}")
    async def work(customer_id: str) -> str:
        return customer_id

    pending = work("1")
    pending.close()
    assert transport.sent == []
    assert asyncio.run(work("2")) == "2"
    assert [r.operation for r in transport.sent] == ["PutItem", "DeleteItem"]
