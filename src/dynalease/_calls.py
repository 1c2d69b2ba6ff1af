"""What the faces of every kind share: their options, written once per kind and checked
before any request (``Options``); the decorators' guard per call (``GuardedCalls``); and
the call's guard for ``current_guard()``."""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, NamedTuple, ParamSpec, Protocol, TypeVar, cast

from ._engine.protocol import check_durations, check_table_name
from .client import DynamoDBClient
from .exceptions import LockLost

P = ParamSpec("P")
R = TypeVar("R")

OnLost = Callable[[LockLost], object]

#: The guard of the decorated call running in this context (``current_guard``).
CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("dynalease_call")


class GuardOptions(NamedTuple):
    """The options every guard takes, checked once (``check_options``): a decorator
    hands them to the guard it makes for each call."""

    table: str
    lease_duration: float
    wait_timeout: float
    on_lost: Callable[[LockLost], object] | None


def check_options(
    client: object,
    table: object,
    lease_duration: object,
    wait_timeout: object,
    on_lost: object,
    fencing: object = False,
) -> GuardOptions:
    if not isinstance(client, DynamoDBClient):
        raise TypeError(
            f"client must be a dynalease.DynamoDBClient, got {type(client).__name__}; "
            "create one with DynamoDBClient() or DynamoDBClient.from_client(boto3_client)"
        )
    name = check_table_name(table)
    if on_lost is not None and not callable(on_lost):
        raise TypeError(f"on_lost must be a callable taking the LockLost error, got {on_lost!r}")
    if not isinstance(fencing, bool):
        raise TypeError(
            f"fencing must be True or False, got {type(fencing).__name__}; "
            "fencing=True hands the guard an increasing fencing_token (docs/fencing.md)"
        )
    lease_s, wait_s = check_durations(lease_duration, wait_timeout)
    return GuardOptions(name, lease_s, wait_s, cast(OnLost | None, on_lost))


class Chosen(NamedTuple):
    """What a lock's options choose beside `GuardOptions`."""

    key: str | None
    keys: Sequence[str] | None
    fencing: bool
    fair: bool
    metadata: Mapping[str, Any] | None


class Options:
    """What each kind's options base shares (`LockOptions`, the semaphore's, the read and write
    locks'): the options every guard takes, checked before any request, and the client.

    A kind's options base takes its options in one signature, for its guards and its
    decorator alike; each face then says in ``_made`` what it makes of them: a guard its
    lease, a decorator the key template of its calls.
    """

    _client: DynamoDBClient

    def _checked(
        self,
        client: DynamoDBClient,
        table: str,
        lease_duration: float,
        wait_timeout: float,
        on_lost: OnLost | None,
        fencing: bool = False,
    ) -> GuardOptions:
        options = check_options(client, table, lease_duration, wait_timeout, on_lost, fencing)
        self._client = client
        return options


class LockOptions(Options):
    """A lock's options, taken alike by its guards and its decorator (`Options`)."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        key: str | None = None,
        lease_duration: float = 30.0,
        wait_timeout: float = 35.0,
        on_lost: OnLost | None = None,
        fencing: bool = False,
        keys: Sequence[str] | None = None,
        fair: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        options = self._checked(client, table, lease_duration, wait_timeout, on_lost, fencing)
        self._made(options, Chosen(key, keys, fencing, fair, metadata))

    def _made(self, options: GuardOptions, chosen: Chosen) -> None:
        raise NotImplementedError


class Resolver(Protocol):
    """A key template bound to a function: one call's key (or keys) from its arguments."""

    def resolve(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...


class Template(Protocol):
    """A key template (``keys.KeyTemplate``) or several (``_keyset.KeysTemplate``)."""

    def bind(self, function: Callable[..., Any]) -> Resolver: ...


def guarded_calls(
    name: str,
    template: Template,
    async_guard: Callable[[Any], AbstractAsyncContextManager[Any]],
    sync_guard: Callable[[Any], AbstractContextManager[Any]],
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: each call runs under a guard for ``template`` resolved over its arguments."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        if not callable(function):
            raise TypeError(f"{name} decorates functions, got {function!r}")
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError(
                f"{name} cannot wrap the generator {function.__qualname__}: a lock "
                "around a generator would be held between its steps; lock inside it instead"
            )
        bound = template.bind(function)

        if inspect.iscoroutinefunction(function):
            coroutine_function = cast(Callable[P, Awaitable[Any]], function)

            @functools.wraps(function)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                async with async_guard(bound.resolve(args, kwargs)) as guard:
                    token = CALL.set(guard)
                    try:
                        return await coroutine_function(*args, **kwargs)
                    finally:
                        CALL.reset(token)

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(function)
        def sync_wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with sync_guard(bound.resolve(args, kwargs)) as guard:
                token = CALL.set(guard)
                try:
                    return function(*args, **kwargs)
                finally:
                    CALL.reset(token)

        return sync_wrapper

    return decorate


class GuardedCalls:
    """A decorator face: each call of the decorated function runs under a guard of its own.

    A face takes its guards' options in one signature (its base, e.g. ``LockOptions``)
    and, when made, sets what each call's guard is made of: ``_template`` (the key, or keys,
    over the function's arguments), ``_guards`` (the async and the sync guard's class),
    ``_keywords`` (the guard's options but its key) and ``_key_name`` (``"key"`` or ``"keys"``).
    """

    _client: Any
    _template: Template
    _guards: tuple[
        Callable[..., AbstractAsyncContextManager[Any]], Callable[..., AbstractContextManager[Any]]
    ]
    _keywords: dict[str, Any]
    _key_name = "key"

    def __call__(self, function: Callable[P, R]) -> Callable[P, R]:
        async_guard, sync_guard = self._guards

        def made(guard: Callable[..., Any]) -> Callable[[Any], Any]:
            return lambda resolved: guard(
                self._client, **{self._key_name: resolved}, **self._keywords
            )

        decorate = guarded_calls(
            type(self).__name__, self._template, made(async_guard), made(sync_guard)
        )
        return decorate(function)
