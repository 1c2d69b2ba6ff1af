"""An ``http.client`` connection whose every step ends by a deadline: connect, a proxy's
CONNECT answer, the TLS handshake, and each read of the answer.

A socket timeout bounds one read and starts again with the next, so an answer that keeps
bytes coming would otherwise hold its reader for as long as it likes. The connection's
socket (:class:`DeadlineSocket`, or :class:`DeadlineTLSSocket` through the TLS context's
``sslsocket_class``) therefore gives each read only the time left.
"""

from __future__ import annotations

import http.client
import math
import socket
import ssl
import time
from typing import Any, cast

from .heads import Response

__all__ = [
    "Bounded",
    "DeadlineSocket",
    "DeadlineTLSSocket",
    "HTTPConnection",
    "HTTPSConnection",
    "time_left",
]


class DeadlineSocket(socket.socket):
    """A socket whose every read waits at most :attr:`read_timeout` seconds and never past
    :attr:`deadline`. ``http.client`` reads an answer only through ``recv_into`` (of the
    file ``makefile`` gives it), so an answer that keeps bytes coming (one byte at a time,
    an endless run of ``100 Continue``, trailer lines, a proxy's CONNECT headers) ends
    by the deadline as a silent one does."""

    deadline = math.inf
    #: The longest one read may wait, however far the deadline (botocore's read_timeout).
    read_timeout = math.inf

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the exchange's deadline passed")
        self.settimeout(min(left, self.read_timeout))
        # None as SSLSocket's own default: up to the buffer's size (0 says the same).
        return super().recv_into(buffer, nbytes or 0, flags)


class DeadlineTLSSocket(DeadlineSocket, ssl.SSLSocket):
    """:class:`DeadlineSocket` over TLS: the ``sslsocket_class`` of the lean path's TLS
    contexts, so the socket ``wrap_socket`` returns bounds its reads the same way."""


class Bounded(http.client.HTTPConnection):
    """A connection whose every step ends by a deadline: :attr:`deadline` while it
    connects (the TCP connection, a proxy's CONNECT answer and the TLS handshake share
    it), then each exchange's, given to its socket by :meth:`until`."""

    #: The deadline of connecting; each exchange's lives on the socket (:meth:`until`).
    deadline = math.inf
    #: The longest one read may wait, however far the deadline (botocore's read_timeout).
    read_timeout = math.inf
    #: http.client's lines of the request's head: putrequest's, then :meth:`post`'s.
    _buffer: list[bytes]
    #: Answers whose heads are read without the ``email`` parser (``heads.py``).
    response_class = Response

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = self._open

    def until(self, deadline: float) -> None:
        """The next exchange ends by ``deadline``: its send, and each read of its answer."""
        sock = cast(DeadlineSocket, self.sock)
        sock.deadline, sock.read_timeout = deadline, self.read_timeout
        sock.settimeout(min(self.read_timeout, time_left(deadline)))

    def post(self, path: str, headers: dict[str, str], body: bytes) -> None:
        """Send a POST of ``body`` with ``headers`` (Host and Accept-Encoding among them)
        and its length.

        The head's lines go straight into http.client's buffer, which ``_send_output``
        sends: ``putheader`` checks each name and each value with a regular expression,
        about a tenth of a lock cycle's instructions (callgrind), for names that are ours
        and values the signer built. A line break is refused here, once for the head.
        """
        self.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
        values = "".join(headers.values())
        if "\r" in values or "\n" in values:
            raise ValueError("a request header holds a line break")
        self._buffer += [f"{name}: {value}".encode("latin-1") for name, value in headers.items()]
        self._buffer.append(b"Content-Length: %d" % len(body))
        self.endheaders(body)

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        """The head and a body of bytes in one send, as botocore's connection sends them.

        http.client sends them apart: a second segment costs a system call on each side
        (and a second TLS record), and the server reads the request in two wakeups.
        """
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked)  # type: ignore[misc]
            return
        head = b"\r\n".join([*self._buffer, b"", b""])
        del self._buffer[:]
        self.send(head + message_body)

    def _open(
        self, address: tuple[str, int], timeout: float, source: tuple[str, int] | None = None
    ) -> socket.socket:
        made = socket.create_connection(address, timeout, source)  # its address walk, as is
        sock = DeadlineSocket(made.family, made.type, made.proto, fileno=made.detach())
        sock.deadline, sock.read_timeout = self.deadline, self.read_timeout
        sock.settimeout(time_left(self.deadline))  # for a TLS handshake, next on this socket
        return sock


class HTTPConnection(Bounded):
    """:class:`Bounded` over plain HTTP."""


class HTTPSConnection(Bounded, http.client.HTTPSConnection):
    """:class:`Bounded` over TLS (through a CONNECT tunnel when there is a proxy); its
    context's ``sslsocket_class`` must be :class:`DeadlineTLSSocket`."""


def time_left(deadline: float) -> float:
    """Seconds to ``deadline``, a thousandth at least: a socket timeout of 0 would make the
    socket non-blocking, whose reads fail as "would block", not as a timeout."""
    return max(deadline - time.monotonic(), 1e-3)
