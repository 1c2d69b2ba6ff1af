"""One invocation on every compute mode: its Lambda context and its deadline.

The deadline bounds every guard the handler acquires: on Lambda Managed Instances nothing
stops a handler that overruns its timeout, so a lock must end there by itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._engine.deadline import TIME_LEFT
from .._engine.invocation_id import INVOCATION
from .budget import remaining_seconds

__all__ = ["bounded", "lambda_context_of"]


def lambda_context_of(context: Any) -> Any:
    """A ``DurableContext``'s ``.lambda_context``; any other context as it is."""
    inner = getattr(context, "lambda_context", None)
    if inner is not None and callable(getattr(inner, "get_remaining_time_in_millis", None)):
        return inner
    return context


@contextlib.contextmanager
def bounded(context: Any) -> Iterator[None]:
    """Bound the guards acquired in the block by the deadline of ``context``, if it has one."""
    context = lambda_context_of(context)
    token = None
    request_id = getattr(context, "aws_request_id", None)
    named = INVOCATION.set(request_id) if isinstance(request_id, str) else None
    if callable(getattr(context, "get_remaining_time_in_millis", None)):
        token = TIME_LEFT.set(lambda: remaining_seconds(context) or 0.0)
    try:
        yield
    finally:
        if token is not None:
            TIME_LEFT.reset(token)
        if named is not None:
            INVOCATION.reset(named)
