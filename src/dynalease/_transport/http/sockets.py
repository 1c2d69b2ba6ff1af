"""The socket calls both drivers share: options, a non-blocking connect, readiness.

Every lean connection, whichever driver opens it, comes from :func:`open_socket`,
so both get the same options: ``TCP_NODELAY`` (a request is one small write
that must not wait for an acknowledgement) and ``SO_KEEPALIVE`` (as botocore's
lock client sets ``tcp_keepalive``: a peer that vanished while a lease is held
is noticed by the kernel, not only by the read timeout).
"""

from __future__ import annotations

import errno
import os
import select
import socket

__all__ = [
    "CONNECTING",
    "connect_error",
    "connect_failed",
    "open_and_quiet",
    "open_socket",
    "wait_writable",
]

#: What a non-blocking ``connect`` answers while the handshake is under way.
CONNECTING = frozenset({errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK, errno.EINTR})
_HAS_POLL = hasattr(select, "poll")


def open_socket(family: int) -> socket.socket:
    """A non-blocking TCP socket with the options every lean connection has."""
    sock = socket.socket(family, _NON_BLOCKING_STREAM)
    try:
        if _NON_BLOCKING_STREAM == socket.SOCK_STREAM:
            sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    except BaseException:
        sock.close()
        raise
    return sock


#: Where the platform has it, a socket is made non-blocking by ``socket()`` itself.
_NON_BLOCKING_STREAM = socket.SOCK_STREAM | getattr(socket, "SOCK_NONBLOCK", 0)


def connect_error(sock: socket.socket) -> int:
    """The outcome of a connect that finished: 0 or its errno (reading it clears it)."""
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)


def connect_failed(error: int) -> OSError:
    """The exception for a connect's errno."""
    return OSError(error, os.strerror(error))


def wait_writable(sock: socket.socket, timeout: float) -> bool:
    """Block until ``sock`` is writable (a connect finished): False after ``timeout``.

    A ``timeout`` of 0 only asks: on loopback the handshake is often over before
    ``connect`` returns, and knowing it spares an event loop two turns.
    """
    return timeout >= 0 and _ready(sock, writable=True, timeout=timeout)


def open_and_quiet(sock: socket.socket) -> bool:
    """True when an idle connection is still open and has sent nothing unasked.

    A readable idle connection was closed by the server (or sent bytes nobody
    asked for): either way it must not carry a write whose outcome matters.
    """
    try:
        return not _ready(sock, writable=False, timeout=0)
    except (OSError, ValueError):
        return False


def _ready(sock: socket.socket, *, writable: bool, timeout: float) -> bool:
    if _HAS_POLL:
        # poll, not select: select cannot watch a descriptor above FD_SETSIZE (1024).
        poll = select.poll()
        poll.register(sock, select.POLLOUT if writable else select.POLLIN)
        return bool(poll.poll(timeout * 1000))
    if writable:
        return bool(select.select([], [sock], [], timeout)[1])
    return bool(select.select([sock], [], [], timeout)[0])
