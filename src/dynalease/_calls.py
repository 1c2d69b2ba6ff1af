"""The decorator ``distributed_lock`` and ``distributed_semaphore`` share, and the keyword
check of signatures that take ``**options: Unpack[SomeTypedDict]``."""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, ParamSpec, Protocol, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")

#: The guard of the decorated call running in this context (``current_guard``).
CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("dynalease_call")


def check_keywords(function: str, given: Mapping[str, object], options: Any) -> None:
    """Python's own ``TypeError`` for a misspelled or missing keyword, with the closest name.

    Python does not check the names of ``**kwargs: Unpack[options]`` itself.
    """
    known = sorted(options.__required_keys__ | options.__optional_keys__)
    for name in given:
        if name not in known:
            import difflib  # here: too slow an import for every Lambda cold start

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}{hint}")
    missing = [name for name in known if name in options.__required_keys__ and name not in given]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        plural = "s" if len(missing) > 1 else ""
        raise TypeError(f"{function}() missing required keyword argument{plural}: {names}")


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
