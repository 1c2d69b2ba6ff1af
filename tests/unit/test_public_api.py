"""Acceptance: the public API is exactly what docs/api.md names.

Names, parameters, defaults and exception types are a contract with users and
with the reference lock's documentation; this file fails if any of them drifts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import pathlib
import tomllib
from typing import Any

import pytest

import dynalease
from dynalease import exceptions
from dynalease.client import DynamoDBClient
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock
from dynalease.metrics import LockMetrics
from dynalease.testing import MemoryBackend
from dynalease.transaction import SyncTransaction, Transaction

EMPTY = inspect.Parameter.empty
KW = inspect.Parameter.KEYWORD_ONLY
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
PUBLIC_MODULES = [
    "dynalease",
    "dynalease.client",
    "dynalease.lock",
    "dynalease.transaction",
    "dynalease.exceptions",
    "dynalease.metrics",
    "dynalease.keys",
    "dynalease.testing",
    "dynalease.rwlock",
    "dynalease.fair",
]


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter, leaving out ``self``/``cls``."""
    signature = inspect.signature(function)
    return [
        (p.name, p.kind, p.default)
        for p in signature.parameters.values()
        if p.name not in ("self", "cls")
    ]


# --- the client -----------------------------------------------------------------------


def test_the_client_takes_the_region_by_position_and_the_named_keyword_options() -> None:
    names = [
        "endpoint_url",
        "access_key",
        "secret_key",
        "session_token",
        "profile",
        "connect_timeout",
        "read_timeout",
        "max_retries",
    ]
    region, *given = parameters(DynamoDBClient.__init__)
    # The Region alone by position, as pydynox's DynamoDBClient("us-east-1").
    assert region == ("region", POS, None)
    assert given[: len(names)] == [(name, KW, None) for name in names]
    # Later additions (such as the transport choice) must not change how existing
    # calls bind: keyword-only, defaulting to None.
    assert all(kind is KW and default is None for _, kind, default in given[len(names) :])


def test_the_client_can_be_built_from_a_boto3_session_or_client() -> None:
    assert parameters(DynamoDBClient.from_session)[0][0] == "session"
    assert parameters(DynamoDBClient.from_client)[0][0] == "dynamodb"
    for factory in (DynamoDBClient.from_session, DynamoDBClient.from_client):
        assert all(kind is KW for _, kind, _ in parameters(factory)[1:])
    assert isinstance(inspect.getattr_static(DynamoDBClient, "from_session"), classmethod)
    assert isinstance(inspect.getattr_static(DynamoDBClient, "from_client"), classmethod)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("create_table", ["name", "partition_key", "sort_key", "wait"]),
        ("table_exists", ["name"]),
        ("get_item", ["table", "key", "consistent_read"]),
        ("put_item", ["table", "item"]),
        ("delete_item", ["table", "key"]),
    ],
)
def test_item_helpers_come_in_sync_and_async_forms(name: str, expected: list[str]) -> None:
    sync_form = getattr(DynamoDBClient, f"sync_{name}")
    async_form = getattr(DynamoDBClient, name)
    assert not inspect.iscoroutinefunction(sync_form)
    assert inspect.iscoroutinefunction(async_form)
    assert [p[0] for p in parameters(sync_form)] == expected
    assert parameters(sync_form) == parameters(async_form)


def test_create_table_defaults_to_no_sort_key_and_no_wait() -> None:
    defaults = {name: default for name, _, default in parameters(DynamoDBClient.sync_create_table)}
    assert defaults["sort_key"] is None and defaults["wait"] is False


# --- locks ------------------------------------------------------------------------------------

LOCK_PARAMETERS = [
    ("table", KW, EMPTY),
    ("key", KW, None),
    ("lease_duration", KW, 30.0),
    ("wait_timeout", KW, 35.0),
    ("on_lost", KW, None),
    ("fencing", KW, False),  # beyond the reference: fenced (protocol-2) rows, opt-in
    ("keys", KW, None),  # beyond the reference: several keys at once, exclusive with key
    ("fair", KW, False),  # beyond the reference: waiters in arrival order (docs/fairness.md)
    ("metadata", KW, None),  # beyond the reference: the user's part of the rows' holder map
]


@pytest.mark.parametrize("face", [DistributedLock.__init__, SyncDistributedLock.__init__])
def test_lock_classes_take_a_client_then_keyword_options_with_the_reference_defaults(
    face: Any,
) -> None:
    assert parameters(face) == [("client", POS, EMPTY), *LOCK_PARAMETERS]


def test_the_decorator_has_the_same_options_and_defaults() -> None:
    assert parameters(distributed_lock) == [("client", POS, EMPTY), *LOCK_PARAMETERS]


def test_the_async_lock_is_an_async_context_and_the_sync_lock_a_sync_one() -> None:
    assert inspect.iscoroutinefunction(DistributedLock.__aenter__)
    assert inspect.iscoroutinefunction(DistributedLock.__aexit__)
    assert not hasattr(DistributedLock, "__enter__")
    assert hasattr(SyncDistributedLock, "__enter__") and hasattr(SyncDistributedLock, "__exit__")
    assert not hasattr(SyncDistributedLock, "__aenter__")


@pytest.mark.parametrize("face", [DistributedLock, SyncDistributedLock])
def test_guards_offer_the_named_checks_signals_and_metrics(face: Any) -> None:
    assert parameters(face.raise_if_lost) == []
    assert [p[0] for p in parameters(face.check_in)] == ["transaction"]
    assert parameters(face.set_metadata) == [("metadata", POS, EMPTY)]
    assert parameters(face.wait_lost) == [("timeout", POS, None)]
    assert inspect.iscoroutinefunction(face.until_lost)
    for name in ("metrics", "lost", "time_left", "owner", "key", "table"):
        assert isinstance(inspect.getattr_static(face, name), property), name


def test_lock_metrics_has_exactly_the_named_fields() -> None:
    fields = [(f.name, f.type) for f in dataclasses.fields(LockMetrics)]
    assert fields == [
        ("read_requests", "int"),
        ("write_requests", "int"),
        ("renewals", "int"),
        ("wait_ms", "float"),
        ("conditional_failures", "int"),
        ("request_failures", "int"),
        ("wait_timeouts", "int"),
        ("cleanup_failures", "int"),
        ("lost", "bool"),
        ("consumed_rcu", "float"),
        ("consumed_wcu", "float"),
        ("throttled_requests", "int"),
        ("throttling_reasons", "tuple[str, ...]"),
    ]
    snapshot = LockMetrics()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.renewals = 1  # type: ignore[misc]


# --- exceptions -----------------------------------------------------------------------------


def test_every_error_derives_from_one_base_class() -> None:
    for name in exceptions.__all__:
        error = getattr(exceptions, name)
        assert issubclass(error, exceptions.DynaleaseError), name
    assert exceptions.DynaleaseError.__bases__ == (Exception,)


@pytest.mark.parametrize(
    "name",
    [
        "LockNotAcquired",
        "LockUnavailable",
        "LockLost",
        "LockReleaseError",
        "TransactionCanceledError",
        "TransactionCanceledException",
    ],
)
def test_the_named_errors_live_in_dynalease_exceptions_and_the_package(name: str) -> None:
    error = getattr(exceptions, name)
    assert getattr(dynalease, name) is error
    assert error.__module__ == "dynalease.exceptions"


def test_lock_outcomes_are_distinct_and_dynamodb_failures_are_never_contention() -> None:
    outcomes = [exceptions.LockNotAcquired, exceptions.LockLost, exceptions.LockReleaseError]
    for error in outcomes:
        assert not any(issubclass(error, other) for other in outcomes if other is not error)
    failures = [
        exceptions.TableNotFoundError,
        exceptions.AccessDeniedError,
        exceptions.ThrottledError,
        exceptions.ValidationError,
        exceptions.RequestFailedError,
    ]
    for failure in failures:
        assert issubclass(failure, exceptions.DynamoDBError)
        assert not issubclass(failure, exceptions.LockError)


def test_a_rejected_check_in_is_catchable_as_a_cancelled_transaction() -> None:
    error = exceptions.LockOwnershipLost(
        "moved on", reasons=[{"Code": "ConditionalCheckFailed"}], table="t", key="k", owner="o"
    )
    assert isinstance(error, exceptions.TransactionCanceledError)
    assert isinstance(error, exceptions.TransactionCanceledException)
    assert isinstance(error, exceptions.DynamoDBError)
    assert error.reasons == [{"Code": "ConditionalCheckFailed"}]
    assert (error.table, error.key, error.owner) == ("t", "k", "o")


def test_the_exceptions_module_exports_exactly_its_errors() -> None:
    assert sorted(exceptions.__all__) == [
        "AccessDeniedError",
        "DynaleaseError",
        "DynamoDBError",
        "FencingMismatch",
        "FencingUnavailable",
        "ForkedProcessError",
        "GuardReused",
        "LockError",
        "LockHeldAtSnapshot",
        "LockLost",
        "LockNotAcquired",
        "LockNotBroken",
        "LockOwnershipLost",
        "LockReleaseError",
        "LockUnavailable",
        "MalformedLockRow",
        "RequestFailedError",
        "SharedCallFailed",
        "SharedResultTooLarge",
        "TableNotFoundError",
        "ThrottledError",
        "TransactionCanceledError",
        "TransactionCanceledException",
        "ValidationError",
    ]


def test_the_drawn_exception_tree_is_the_real_one() -> None:
    drawn = (exceptions.__doc__ or "").split("The tree::")[1].split("\n\n")[1]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in drawn.splitlines():
        name = line.lstrip(" │├└─").split()[0]
        depth = len(line) - len(line.lstrip(" │├└─"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    classes = {
        name: value
        for name, value in vars(exceptions).items()
        if isinstance(value, type)
        and issubclass(value, exceptions.DynaleaseError)
        and name == value.__name__
    }
    assert set(parents) | {"DynaleaseError"} == set(classes)
    for name, parent in parents.items():
        own = [
            base for base in classes[name].__bases__ if issubclass(base, exceptions.DynaleaseError)
        ]
        assert [base.__name__ for base in own] == [parent], name


def test_every_dynalease_error_class_is_defined_in_dynalease_exceptions() -> None:
    import pkgutil

    defined_elsewhere = []
    for info in pkgutil.walk_packages(dynalease.__path__, "dynalease."):
        if info.name == "dynalease.exceptions" or info.name.startswith(
            ("dynalease.cdk", "dynalease.cli", "dynalease._tooling")
        ):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, exceptions.DynaleaseError)
                and value.__module__ == info.name
            ):
                defined_elsewhere.append(f"{info.name}.{value.__name__}")
    assert defined_elsewhere == []


def test_an_outage_is_still_caught_as_not_acquired_and_is_never_a_dynamodb_error() -> None:
    assert issubclass(exceptions.LockUnavailable, exceptions.LockNotAcquired)
    assert not issubclass(exceptions.LockUnavailable, exceptions.DynamoDBError)


def test_reusing_a_guard_is_a_dynalease_error_and_still_a_runtime_error() -> None:
    assert issubclass(exceptions.GuardReused, exceptions.DynaleaseError)
    assert issubclass(exceptions.GuardReused, RuntimeError)
    assert not issubclass(exceptions.GuardReused, exceptions.LockError)


def test_entering_a_guard_twice_raises_guard_reused_from_both_faces() -> None:
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks", partition_key=("key", "S"))
        guard = SyncDistributedLock(backend.client, table="locks", key="once")
        with guard:
            pass
        with pytest.raises(exceptions.GuardReused, match="single use"):
            with guard:
                pass

        async def twice() -> None:
            async_guard = DistributedLock(backend.client, table="locks", key="once")
            async with async_guard:
                pass
            with pytest.raises(exceptions.GuardReused, match="single use"):
                async with async_guard:
                    pass

        asyncio.run(twice())


def test_lock_errors_carry_their_table_key_and_owner() -> None:
    error = exceptions.LockNotAcquired("busy", table="locks", key="k", owner="me")
    assert (error.table, error.key, error.owner) == ("locks", "k", "me")


# --- transactions and the memory backend -------------------------------------------------------


#: pydynox's expression parameters, by position or keyword, then the short keywords.
_EXPRESSIONS = ["expression_attribute_names", "expression_attribute_values"]
_SHORT = ["condition", "names", "values"]


@pytest.mark.parametrize(
    ("method", "pydynox", "short"),
    [
        ("put", ["table", "item", "condition_expression", *_EXPRESSIONS], _SHORT),
        (
            "update",
            ["table", "key", "update_expression", "condition_expression", *_EXPRESSIONS],
            ["update", *_SHORT],
        ),
        ("delete", ["table", "key", "condition_expression", *_EXPRESSIONS], _SHORT),
        ("condition_check", ["table", "key", "condition_expression", *_EXPRESSIONS], _SHORT),
    ],
)
def test_transactions_offer_put_update_delete_and_condition_check(
    method: str, pydynox: list[str], short: list[str]
) -> None:
    for face in (Transaction, SyncTransaction):
        given = parameters(getattr(face, method))
        assert [(name, kind) for name, kind, _ in given] == [
            *((name, POS) for name in pydynox),
            *((name, KW) for name in short),
        ]


def test_transactions_are_built_from_a_client_and_are_contexts_with_commit() -> None:
    for face in (Transaction, SyncTransaction):
        assert parameters(face.__init__)[0][0] == "client"
        assert parameters(face.__init__)[1:] == [("client_request_token", KW, None)]
        assert parameters(face.commit) == []
    assert inspect.iscoroutinefunction(Transaction.__aexit__)
    assert inspect.iscoroutinefunction(Transaction.commit)
    assert hasattr(SyncTransaction, "__exit__")
    assert not inspect.iscoroutinefunction(SyncTransaction.commit)


def test_memory_backend_is_a_context_with_a_ready_client() -> None:
    with MemoryBackend() as backend:
        assert isinstance(backend.client, DynamoDBClient)
        backend.client.sync_create_table("locks", partition_key=("key", "S"))
        assert backend.client.sync_table_exists("locks")


# --- exports, docstrings, typing -------------------------------------------------------------


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(dynalease.__all__) == sorted(
        [
            "DistributedLock",
            "DistributedSemaphore",
            "DynaleaseError",
            "DynamoDBClient",
            "LockLost",
            "LockMetrics",
            "LockNotAcquired",
            "LockReleaseError",
            "LockUnavailable",
            "SyncDistributedLock",
            "SyncDistributedSemaphore",
            "SyncTransaction",
            "Transaction",
            "TransactionCanceledError",
            "TransactionCanceledException",
            "__version__",
            "distributed_lock",
            "distributed_semaphore",
            *("ReadLock", "SyncReadLock", "SyncWriteLock", "WriteLock"),
            *("distributed_read_lock", "distributed_write_lock"),
        ]
    )
    for name in dynalease.__all__:
        assert getattr(dynalease, name) is not None


def _public_objects() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        found.append((module_name, module))
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if name.startswith("__") or not (inspect.isclass(value) or callable(value)):
                continue
            found.append((f"{module_name}.{name}", value))
            if inspect.isclass(value):
                ours = [base for base in value.__mro__ if base.__module__.startswith("dynalease")]
                members = {m: a for base in reversed(ours) for m, a in vars(base).items()}
                for member, attribute in members.items():
                    if member.startswith("_"):
                        continue
                    if isinstance(attribute, classmethod | staticmethod):
                        attribute = attribute.__func__
                    if callable(attribute) or isinstance(attribute, property):
                        found.append((f"{module_name}.{name}.{member}", attribute))
    return found


def test_every_public_module_class_function_and_method_has_a_docstring() -> None:
    missing = [name for name, value in _public_objects() if not (value.__doc__ or "").strip()]
    assert missing == []

    covered = {name for name, _ in _public_objects()}
    assert {"dynalease.lock.DistributedLock.check_in", "dynalease.Transaction.put"} <= covered


def test_the_package_ships_py_typed() -> None:
    package = pathlib.Path(dynalease.__file__).parent
    assert (package / "py.typed").is_file()
    project = pathlib.Path(__file__).parents[2] / "pyproject.toml"
    config = tomllib.loads(project.read_text())
    packages = config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert "src/dynalease" in packages  # the whole package directory, py.typed included
    excluded = config["tool"]["hatch"]["build"]["targets"]["wheel"].get("exclude", [])
    assert not any("py.typed" in pattern for pattern in excluded)
