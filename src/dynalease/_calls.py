"""The decorator ``distributed_lock`` and ``distributed_semaphore`` share: a guard per call,
its checked options, and the call's guard for ``current_guard()``."""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, NamedTuple, ParamSpec, Protocol, TypeVar, cast

from .exceptions import LockLost

P = ParamSpec("P")
R = TypeVar("R")

#: The guard of the decorated call running in this context (``current_guard``).
CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("dynalease_call")


class GuardOptions(NamedTuple):
    """The options every guard takes, checked once (``lock._check_options``): a decorator
    hands them to the guard it makes for each call."""

    table: str
    lease_duration: float
    wait_timeout: float
    on_lost: Callable[[LockLost], object] | None


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
