"""The one interface every transport implements: a :class:`Request` in, an answer out.

As httpx's transports: ``handle`` (from the calling thread), ``handle_async`` (from the
runtime loop) and ``close``. How long a request may take and who gets an answer that
comes too late are fields of the request, not methods; what a transport can do is one
property (``blocking``). ``prepare`` stays apart: one-time setup (a botocore client, the
endpoint) that must not count toward the first request's ``timeout``.
"""

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

from .. import _tracing

__all__ = ["LoopTransport", "Request", "TimedOut", "Transport", "bounded", "late_answer"]


class Request(NamedTuple):
    """One DynamoDB request, and how the caller bounds it.

    ``timeout``: seconds the caller waits (None: the transport's own bounds). ``on_late``:
    once ``timeout`` passes (or the wait is interrupted), it gets the answer still to come
    (see :func:`late_answer`) and the transport raises :class:`TimedOut` or the failure.
    """

    operation: str
    params: dict[str, Any]
    timeout: float | None = None
    on_late: Callable[[Any], object] | None = None


class TimedOut(Exception):
    """No answer within the request's ``timeout``; the rest went to its ``on_late``."""


class Transport(Protocol):
    """Sends DynamoDB requests.

    Failures are ``ConditionFailed`` or ``DynamoDBError`` subclasses; a
    ``RequestFailedError`` with ``may_have_committed`` means the outcome is unknown.
    """

    @property
    def blocking(self) -> bool:
        """True when :meth:`handle` honours a request's ``timeout`` and ``on_late`` (a sync
        caller may then send from its own thread); once True, always True."""
        ...

    async def prepare(self) -> None:
        """One-time setup (its blocking work off the runtime loop), awaited before a request's
        timeout starts. Failures are left for the first request; once done, returns at once.
        """
        ...

    def handle(self, request: Request) -> dict[str, Any]:
        """Send from the calling thread and block until the answer."""
        ...

    async def handle_async(self, request: Request) -> dict[str, Any]:
        """Send from the runtime's event loop."""
        ...

    def close(self) -> None:
        """Close idle pooled connections (SnapStart: a snapshot's would be shared by every
        copy). Called with no request in flight; later requests open new ones."""
        ...


async def bounded(
    request: Awaitable[dict[str, Any]],
    timeout: float | None,
    on_late: Callable[[Any], object] | None,
) -> dict[str, Any]:
    """Await ``request`` at most ``timeout`` seconds; then ``on_late`` gets the rest."""
    import asyncio

    if timeout is None or on_late is None:
        return await request
    task = asyncio.ensure_future(request)
    try:
        done, _ = await asyncio.wait((task,), timeout=max(0.0, timeout))
    except asyncio.CancelledError:
        on_late(task)
        raise
    if not done:
        on_late(task)
        raise TimedOut
    return task.result()


def late_answer(late: Any) -> Awaitable[dict[str, Any]]:
    """What an ``on_late`` was handed, as something the runtime loop awaits: an awaitable as
    it is, a ``concurrent.futures.Future`` (a blocking request read on a pool) wrapped."""
    import asyncio

    if isinstance(late, Awaitable):
        return late
    wrapped: Awaitable[dict[str, Any]] = asyncio.wrap_future(late)
    return wrapped


class LoopTransport:
    """A transport that bounds its requests only on the runtime loop (``blocking`` is
    False): it writes :meth:`handle`; ``handle_async`` runs it on the runtime's pool."""

    @property
    def blocking(self) -> bool:
        return False

    async def prepare(self) -> None:
        return

    def handle(self, request: Request) -> dict[str, Any]:
        raise NotImplementedError

    async def handle_async(self, request: Request) -> dict[str, Any]:
        import asyncio

        # The request's span (botocore's own instrumentation) is a child of the caller's.
        send = _tracing.carried(self.handle)
        answer = asyncio.get_running_loop().run_in_executor(None, send, request)
        return await bounded(answer, request.timeout, request.on_late)

    def close(self) -> None:
        return  # nothing pooled of ours (botocore keeps its own pool)
