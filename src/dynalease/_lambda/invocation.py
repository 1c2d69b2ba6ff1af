"""One invocation as the middleware sees it on every compute mode: its context and its deadline.

- A durable function's handler gets a ``DurableContext``; the Lambda context (remaining
  time, tenant id) is its ``.lambda_context``: :func:`lambda_context_of`.
- Every guard acquired while the handler runs is bounded by the invocation's deadline
  (:func:`bounded`): on Lambda Managed Instances nothing stops a handler that overruns
  its timeout, so a lock must end there by itself. The remaining time is read from the
  context when each guard starts acquiring; 0 or less means the time is up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._engine.deadline import TIME_LEFT
from .budget import remaining_seconds

__all__ = ["bounded", "lambda_context_of"]


def lambda_context_of(context: Any) -> Any:
    """The Lambda context behind ``context``: a ``DurableContext``'s ``.lambda_context``.

    Anything else (a Lambda context, a test's stand-in, ``None``) is returned as it is.
    """
    inner = getattr(context, "lambda_context", None)
    if inner is not None and callable(getattr(inner, "get_remaining_time_in_millis", None)):
        return inner
    return context


@contextlib.contextmanager
def bounded(context: Any) -> Iterator[None]:
    """Bound the guards acquired in the block by the deadline of ``context`` (or a durable one's).

    Without a remaining time (a quick local test's ``None``) nothing is bounded.
    """
    context = lambda_context_of(context)
    token = None
    if callable(getattr(context, "get_remaining_time_in_millis", None)):
        token = TIME_LEFT.set(lambda: remaining_seconds(context) or 0.0)
    try:
        yield
    finally:
        if token is not None:
            TIME_LEFT.reset(token)
