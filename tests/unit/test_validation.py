"""Bad input is rejected before any request, naming the offending parameter."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import dynalease
from dynalease import DynamoDBClient
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock

# Nothing listens here: any request would fail with a connection error, not ValueError.
UNREACHABLE = "http://127.0.0.1:9"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> DynamoDBClient:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return DynamoDBClient(region="us-east-1", endpoint_url=UNREACHABLE)


@pytest.mark.parametrize(
    ("options", "parameter"),
    [
        ({"lease_duration": math.inf}, "lease_duration"),
        ({"lease_duration": math.nan}, "lease_duration"),
        ({"lease_duration": 0.09}, "lease_duration"),
        ({"lease_duration": 86_400.5}, "lease_duration"),
        ({"wait_timeout": -0.1}, "wait_timeout"),
        ({"wait_timeout": math.inf}, "wait_timeout"),
        ({"wait_timeout": 86_401}, "wait_timeout"),
    ],
)
def test_invalid_durations_name_the_parameter(
    client: DynamoDBClient, options: dict[str, float], parameter: str
) -> None:
    for face in (SyncDistributedLock, DistributedLock):
        with pytest.raises(ValueError, match=parameter):
            face(client, table="locks", key="k", **options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=parameter):
        distributed_lock(client, table="locks", key="k", **options)  # type: ignore[arg-type]


def test_non_numeric_durations_are_type_errors(client: DynamoDBClient) -> None:
    with pytest.raises(TypeError, match="lease_duration"):
        SyncDistributedLock(client, table="locks", key="k", lease_duration="30")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wait_timeout"):
        SyncDistributedLock(client, table="locks", key="k", wait_timeout=True)


@pytest.mark.parametrize("key", ["", "é" * 1025, "x" * 2049])
def test_keys_outside_1_to_2048_utf8_bytes_are_rejected(client: DynamoDBClient, key: str) -> None:
    with pytest.raises(ValueError, match="key"):
        SyncDistributedLock(client, table="locks", key=key)


def test_a_key_of_2048_utf8_bytes_is_accepted(client: DynamoDBClient) -> None:
    lock = SyncDistributedLock(client, table="locks", key="é" * 1024)
    assert lock.key == "é" * 1024


@pytest.mark.parametrize("table", ["", "ab", "bad name", "locks\n", 3])
def test_bad_table_names_are_rejected(client: DynamoDBClient, table: object) -> None:
    with pytest.raises((ValueError, TypeError), match="table"):
        SyncDistributedLock(client, table=table, key="k")  # type: ignore[arg-type]


@pytest.mark.parametrize("template", ["a:{", "a:}", "{}", "{0}", "{a.b}", "{a!r}", "{a:>3}"])
def test_bad_templates_fail_at_decoration(client: DynamoDBClient, template: str) -> None:
    with pytest.raises(ValueError, match="template"):
        distributed_lock(client, table="locks", key=template)


def test_a_placeholder_that_is_not_an_argument_fails_at_decoration(client: DynamoDBClient) -> None:
    with pytest.raises(ValueError, match="customer_id"):

        @distributed_lock(client, table="locks", key="c:{customer_id}")
        def work(order_id: str) -> None: ...


def test_generators_are_rejected_at_decoration(client: DynamoDBClient) -> None:
    with pytest.raises(TypeError, match="generator"):

        @distributed_lock(client, table="locks", key="k")
        def steps() -> object:
            yield 1

    with pytest.raises(TypeError, match="generator"):

        @distributed_lock(client, table="locks", key="k")
        async def async_steps() -> object:
            yield 1


def test_non_str_arguments_fail_at_call_time_before_io(client: DynamoDBClient) -> None:
    @distributed_lock(client, table="locks", key="c:{customer_id}")
    def work(customer_id: str) -> str:
        return customer_id

    with pytest.raises(TypeError, match="customer_id"):
        work(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="work"):
        work()  # type: ignore[call-arg]


def test_decorating_keeps_name_docstring_and_signature(client: DynamoDBClient) -> None:
    import inspect

    @distributed_lock(client, table="locks", key="{tenant}:{id}")
    async def sync_tenant(tenant: str, id: str = "1") -> int:
        """Docs."""
        return 1

    assert sync_tenant.__name__ == "sync_tenant" and sync_tenant.__doc__ == "Docs."
    assert list(inspect.signature(sync_tenant).parameters) == ["tenant", "id"]
    assert inspect.iscoroutinefunction(sync_tenant)
    sync_tenant("acme").close()  # an unawaited coroutine makes no request


def test_the_client_type_is_checked() -> None:
    with pytest.raises(TypeError, match="DynamoDBClient"):
        SyncDistributedLock(object(), table="locks", key="k")  # type: ignore[arg-type]


def test_the_package_exports_its_public_names() -> None:
    for name in dynalease.__all__:
        assert getattr(dynalease, name) is not None
    assert set(dynalease.__all__) >= {
        "DynamoDBClient",
        "DistributedLock",
        "SyncDistributedLock",
        "distributed_lock",
        "LockNotAcquired",
        "LockLost",
        "LockReleaseError",
        "TransactionCanceledException",
    }


def test_a_missing_key_value_is_named_and_never_advised_to_become_the_text_none(
    client: DynamoDBClient,
) -> None:
    with pytest.raises(TypeError, match="got None; the value is missing") as direct:
        SyncDistributedLock(client, table="locks", key=None)  # type: ignore[arg-type]
    assert "str()" not in str(direct.value) and "'None'" in str(direct.value)

    @distributed_lock(client, table="locks", key="order:{order_id}")
    def handle(order_id: str | None) -> None: ...

    with pytest.raises(TypeError, match="got None; the value is missing") as templated:
        handle(None)
    assert "convert it to str" not in str(templated.value)


def test_other_non_str_key_values_are_told_to_convert_to_the_text_they_mean(
    client: DynamoDBClient,
) -> None:
    with pytest.raises(TypeError, match=r"got int.*for example str\(order_id\)"):
        SyncDistributedLock(client, table="locks", key=123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        dynalease.SyncDistributedSemaphore,
        dynalease.DistributedSemaphore,
        dynalease.distributed_semaphore,
    ],
)
def test_a_semaphore_s_misspelled_or_missing_option_is_python_s_type_error(
    client: DynamoDBClient, make: type | Callable[..., object]
) -> None:
    """Explicit keywords, as the locks': Python's own TypeError names the wrong or missing one."""
    with pytest.raises(TypeError, match=r"\(\) got an unexpected keyword argument 'permit'$"):
        make(client, table="locks", key="k", permit=2)
    with pytest.raises(
        TypeError, match=r"\(\) missing 1 required keyword-only argument: 'permits'$"
    ):
        make(client, table="locks", key="k")


# --- a multi-key lock: bad key sets -------------------------------------------------

BAD_KEY_SETS = [
    ({"keys": [f"k{i}" for i in range(101)]}, ValueError, "101 keys, over the limit of 100"),
    ({"keys": ["a", "b", "a"]}, ValueError, r"keys\[2\] repeats keys\[0\]"),
    ({"keys": []}, ValueError, "keys is empty"),
    ({"keys": ["a", "b"], "key": "a"}, ValueError, "either key=... or keys=.*not both"),
    ({"keys": "ab"}, TypeError, "list or tuple of str keys"),
    ({"keys": ["a", 7]}, TypeError, r"keys\[1\] must be a str"),
    ({"keys": ["a", ""]}, ValueError, r"keys\[1\] is empty"),
    ({"keys": ["a", "x" * 2049]}, ValueError, r"keys\[1\] is 2049 UTF-8 bytes"),
    ({}, TypeError, "got None; the value is missing"),
    ({"keys": ["a", "b"], "fencing": True}, ValueError, "fencing=True is not available"),
]


@pytest.mark.parametrize(("options", "error", "message"), BAD_KEY_SETS)
def test_bad_key_sets_are_refused_before_any_request(
    client: DynamoDBClient, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    for face in (SyncDistributedLock, DistributedLock):
        with pytest.raises(error, match=message):
            face(client, table="locks", **options)


def test_one_hundred_distinct_keys_are_accepted(client: DynamoDBClient) -> None:
    keys = [f"k{i}" for i in range(100)]
    assert SyncDistributedLock(client, table="locks", keys=keys).keys == tuple(keys)
    assert SyncDistributedLock(client, table="locks", keys=["only"]).keys == ("only",)


def test_the_decorator_checks_its_templates_when_decorating_and_its_keys_per_call(
    client: DynamoDBClient,
) -> None:
    with pytest.raises(ValueError, match="not both"):
        distributed_lock(client, table="locks", key="a", keys=["b"])
    with pytest.raises(ValueError, match="1 to 100 key templates"):
        distributed_lock(client, table="locks", keys=[])

    @distributed_lock(client, table="locks", keys=["account:{source}", "account:{target}"])
    def transfer(source: str, target: str) -> None:
        raise AssertionError("never runs")

    with pytest.raises(ValueError, match=r"keys\[1\] repeats keys\[0\]"):
        transfer("a", "a")  # both templates resolve to account:a
    with pytest.raises(TypeError, match="placeholder"):
        transfer("a", 7)  # type: ignore[arg-type]
