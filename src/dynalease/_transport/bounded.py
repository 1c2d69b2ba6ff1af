"""An ``http.client`` connection whose every step ends by a deadline: connect, a proxy's
CONNECT answer, the TLS handshake, and each read of the answer.

A socket timeout bounds one read and starts again with the next, so an answer that keeps
bytes coming would otherwise hold its reader for as long as it likes.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import math
import socket
import time
from typing import Any, cast

__all__ = ["Bounded", "HTTPConnection", "HTTPSConnection", "time_left"]


class Bounded(http.client.HTTPConnection):
    """A connection whose every step ends by :attr:`deadline`, set before each exchange.

    A socket timeout bounds one read, and starts again with the next: an answer that keeps
    bytes coming (one byte at a time, an endless run of ``100 Continue``, trailer lines, a
    proxy's CONNECT headers) would hold the caller for as long as it likes. Here each
    read of an answer waits only for the time left (:class:`_Reads`), and the TLS
    handshake gets what is left after the TCP connection or the CONNECT answer.
    """

    deadline = math.inf
    #: The longest one read may wait, however far the deadline (botocore's read_timeout).
    read_timeout = math.inf
    #: http.client's lines of the request's head, filled by putrequest and putheader.
    _buffer: list[bytes]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = self._open

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
        sock = socket.create_connection(address, timeout, source)
        sock.settimeout(time_left(self.deadline))  # for a TLS handshake, next on this socket
        return sock

    def response_class(  # type: ignore[override]  # http.client calls it as the class
        self, sock: socket.socket, *args: Any, **kwargs: Any
    ) -> http.client.HTTPResponse:
        bounded = _BoundedSocket(sock, self.deadline, self.read_timeout)
        # http.client asks the socket only for makefile("rb"), which _BoundedSocket has.
        return http.client.HTTPResponse(cast(socket.socket, bounded), *args, **kwargs)


class HTTPConnection(Bounded):
    """:class:`Bounded` over plain HTTP."""


class HTTPSConnection(Bounded, http.client.HTTPSConnection):
    """:class:`Bounded` over TLS (through a CONNECT tunnel when there is a proxy)."""


class _BoundedSocket:
    """What ``http.client`` reads an answer from: ``sock``, each read bounded by :class:`_Reads`."""

    def __init__(self, sock: socket.socket, deadline: float, most: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._most = most

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_Reads(self._sock, self._deadline, self._most))


class _Reads(io.RawIOBase):
    """A socket's reads, each waiting at most ``most`` seconds and never past ``deadline``."""

    def __init__(self, sock: socket.socket, deadline: float, most: float) -> None:
        super().__init__()
        self._sock = sock
        # An open file of the socket, as http.client's own: a close() of the connection
        # while the answer is still being read leaves the descriptor open until this closes.
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline = deadline
        self._most = most

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the exchange's deadline passed")
        self._sock.settimeout(min(left, self._most))
        return self._raw.readinto(buffer)

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
            # A TLS handshake may follow on this socket (after a CONNECT answer): it gets
            # the time left, not what the last read was given.
            with contextlib.suppress(OSError):
                self._sock.settimeout(time_left(self._deadline))
        super().close()


def time_left(deadline: float) -> float:
    """Seconds to ``deadline``, a thousandth at least: a socket timeout of 0 would make the
    socket non-blocking, whose reads fail as "would block", not as a timeout."""
    return max(deadline - time.monotonic(), 1e-3)
