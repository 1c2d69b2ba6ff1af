"""One invocation as the middleware sees it on every compute mode: its context and its deadline.

- A durable function's handler gets a ``DurableContext``; the Lambda context (remaining
  time, tenant id) is its ``.lambda_context``: :func:`lambda_context_of`.
- Every guard acquired while the handler runs is bounded by the invocation's deadline
  (:func:`bound_to`): on Lambda Managed Instances nothing stops a handler that overruns
  its timeout, so a lock must end there by itself. The remaining time is read from the
  context when each guard starts acquiring; 0 or less means the time is up.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from .._engine.deadline import TIME_LEFT
from .budget import remaining_seconds

__all__ = ["Bound", "bound_to", "lambda_context_of", "unbind"]

Bound = contextvars.Token[Callable[[], float]] | None


def lambda_context_of(context: Any) -> Any:
    """The Lambda context behind ``context``: a ``DurableContext``'s ``.lambda_context``.

    Anything else (a Lambda context, a test's stand-in, ``None``) is returned as it is.
    """
    inner = getattr(context, "lambda_context", None)
    if inner is not None and callable(getattr(inner, "get_remaining_time_in_millis", None)):
        return inner
    return context


def bound_to(context: Any) -> Bound:
    """Bound the guards acquired from here on by ``context``'s deadline; undo with :func:`unbind`.

    ``context`` is a Lambda context (unwrap a durable one first). Without a remaining
    time (a quick local test's ``None``) nothing is bounded and ``None`` is returned.
    """
    if not callable(getattr(context, "get_remaining_time_in_millis", None)):
        return None

    return TIME_LEFT.set(lambda: remaining_seconds(context) or 0.0)


def unbind(bound: Bound) -> None:
    """Undo :func:`bound_to`."""
    if bound is not None:
        TIME_LEFT.reset(bound)
