"""What a failed request means for the lock protocol, told apart in one place.

A write that may have reached the server must be reconciled by the lock
protocol; one that never left need not be. Every failure of the lean HTTP path
ends up as one of the exceptions here, and both drivers (asyncio and blocking)
raise them through the same few functions, so the two cannot drift apart.
"""

from __future__ import annotations

__all__ = [
    "Cut",
    "Malformed",
    "NotSent",
    "Stale",
    "Unanswered",
    "closed_early",
    "connect_failure",
    "unanswered",
]


class NotSent(Exception):
    """The request never reached the server (refused, unresolvable, connect timeout)."""

    def __init__(self, cause: BaseException | None, *, timeout: bool) -> None:
        super().__init__(str(cause) if cause else "connect timed out")
        self.cause = cause
        self.timeout = timeout


class Unanswered(Exception):
    """The request may have reached the server but no complete answer came back."""

    def __init__(self, cause: BaseException | None, *, timeout: bool) -> None:
        super().__init__(str(cause) if cause else "read timed out")
        self.cause = cause
        self.timeout = timeout


class Malformed(ValueError):
    """The bytes received are not an HTTP/1.1 answer the core reads (raised as Unanswered)."""


class Cut(Exception):
    """The caller's time limit passed first; the answer goes to its ``on_late``."""


class Stale(Exception):
    """A reused connection closed before any byte of the answer: maybe an idle drop.

    Only a connection that carried an answer before raises it (see
    :attr:`.wire.ResponseReader.reused`); the pools may then resend a request
    that changes nothing on a new connection.
    """


def unanswered(error: OSError) -> Unanswered:
    """A socket error after the request may have gone out."""
    if isinstance(error, TimeoutError):
        return Unanswered(None, timeout=True)
    return Unanswered(error, timeout=False)


def closed_early() -> Unanswered:
    """The connection closed before an answer, and no resend is allowed."""
    return Unanswered(ConnectionResetError("connection closed before an answer"), timeout=False)


def connect_failure(error: OSError) -> NotSent:
    """A failed lookup, connect or TLS handshake: nothing was sent."""
    return NotSent(error, timeout=isinstance(error, TimeoutError))
