"""The blocking driver of the lean HTTP path: requests sent from the caller's thread.

A sync lock's own requests go out from the calling thread: no hand-over to the
runtime thread and back, which costs more CPU than the request itself.
Connecting, parsing, keep-alive and failures are the shared core's
(:mod:`.endpoint`, :mod:`.wire`, :mod:`.failures`); this module only moves
bytes and waits.

A plain-TCP connection is non-blocking once connected and waits on its own
``poll`` object: one ``poll`` per wait, where a socket timeout would cost an
``ioctl`` on every ``settimeout`` and a ``poll`` before every call, the send's
included. TLS connections keep socket timeouts (the TLS layer may hold bytes
that ``poll`` cannot see).
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Callable

from .endpoint import Address, ConnectWalk, Endpoint
from .failures import Stale, Unanswered, closed_early
from .sockets import (
    CONNECTING,
    connect_error,
    connect_failed,
    open_and_quiet,
    open_socket,
    wait_writable,
)
from .wire import READ_SIZE, Answered, ResponseReader

_HAS_POLL = hasattr(select, "poll")

__all__ = ["BlockingPool", "Late"]


class _Connection:
    """A socket, the reader of its answers and, for plain TCP, the poll it waits on."""

    __slots__ = ("poll", "reader", "sock")

    def __init__(self, sock: socket.socket, poll: select.poll | None) -> None:
        self.sock = sock
        self.reader = ResponseReader()
        #: Plain TCP: the socket stays non-blocking (as connected) and waits here,
        #: on the poll its connect waited on. TLS: socket timeouts.
        self.poll = poll

    def quiet(self) -> bool:
        if not self.reader.quiet:
            return False
        if self.poll is None:
            return open_and_quiet(self.sock)
        try:
            # Readable while idle: closed by the server, or bytes nobody asked for.
            return not self.poll.poll(0)
        except (OSError, ValueError):
            return False

    def reusable(self) -> bool:
        return self.reader.keep

    def close(self) -> None:
        self.sock.close()


class Late:
    """A request sent by a blocking caller whose answer had not arrived when it stopped waiting.

    The write may still be applied; whoever takes this over finishes reading the
    answer (:meth:`finish`) to learn whether it was.
    """

    def __init__(self, pool: BlockingPool, connection: _Connection, expires: float) -> None:
        self.pool = pool
        self.connection = connection
        self.expires = expires
        connection.reader.hand_over()

    def finish(self) -> Answered:
        """Block until the answer is complete or the read timeout has passed."""
        return self.pool.finish(self)

    def close(self) -> None:
        """Stop listening for the answer."""
        self.connection.close()


#: What a poll reports for a connect that failed (its errno is then read from the socket).
_FAILED = select.POLLERR | select.POLLHUP if _HAS_POLL else 0


class BlockingPool(Endpoint[_Connection]):
    """Keep-alive connections to one host for callers that block in their own thread.

    Thread-safe; each request uses one connection at a time.
    """

    def request(
        self,
        data: bytes,
        *,
        timeout: float,
        retry_stale: bool,
        on_late: Callable[[Late], object] | None = None,
    ) -> Answered:
        """Send ``data``; return (status, response body, its ``x-amz-crc32``).

        Waits at most ``timeout`` seconds in all. When the request was sent but
        its answer is not complete by then (or an interrupt arrives meanwhile),
        the connection goes to ``on_late`` as a :class:`Late` before
        :class:`Unanswered` (or the interrupt) is raised.
        """
        deadline = time.monotonic() + timeout
        connection = self.idle.take()
        if connection is None:
            connection = self._connect(deadline)
        try:
            return self._exchange(connection, data, deadline, on_late)
        except Stale:
            if not retry_stale:
                raise closed_early() from None
        return self._exchange(self._connect(deadline), data, deadline, on_late)

    def finish(self, late: Late) -> Answered:
        """Read the rest of a late answer until its read timeout (see :class:`Late`)."""
        try:
            return self._read(late.connection, late.expires)
        except TimeoutError:
            raise Unanswered(None, timeout=True) from None
        finally:
            late.close()

    # Every request runs this code with the caches cold (the server ran meanwhile),
    # where each Python call costs a microsecond or more: the common case (a plain
    # connection to the first address, an answer in one or two reads) is written
    # out in few functions, and only the rest takes the general ones.

    def _connect(self, deadline: float) -> _Connection:
        limit = time.monotonic() + self.connect_timeout
        if deadline < limit:
            limit = deadline
        try:
            addresses = self.known()
            if addresses is None:
                infos = socket.getaddrinfo(
                    self.host, self.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                )
                addresses = self.learn(infos, time.monotonic())
            start = 0
            if self.ssl_context is None and _HAS_POLL:
                connection = self._connect_plain(addresses[0], limit)
                if isinstance(connection, _Connection):
                    self.opened += 1
                    return connection
                if len(addresses) == 1:
                    raise connection
                start = 1  # refused: the walk tries the other addresses
            sock, poll = self._walk(addresses, limit, start)
            if self.ssl_context is not None:
                poll = None  # TLS may hold bytes that a poll cannot see: socket timeouts
                try:
                    sock.settimeout(_left(limit))
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
                except BaseException:
                    sock.close()
                    raise
            elif poll is not None:
                poll.register(sock, select.POLLIN)  # again, if it waited: now for answers
            else:
                sock.settimeout(None)  # no poll: socket timeouts, as for TLS
        except OSError as error:
            raise self.connect_failed(error) from None
        self.connected()
        return _Connection(sock, poll)

    @staticmethod
    def _connect_plain(address: Address, limit: float) -> _Connection | OSError:
        """A plain connection to ``address``, or why it was refused.

        Raises TimeoutError at ``limit``: no other address would have time left.
        """
        sock = open_socket(address[0])
        try:
            error = sock.connect_ex(address[1])
            poll = select.poll()
            if error in CONNECTING:
                poll.register(sock, select.POLLOUT)
                events = poll.poll(max(limit - time.monotonic(), 0.0) * 1000)
                if not events:
                    raise TimeoutError("connect timed out")
                error = 0  # writable alone: connected, nothing to ask the socket
                if events[0][1] & _FAILED:
                    error = connect_error(sock)
            if error:
                sock.close()
                return connect_failed(error)
            poll.register(sock, select.POLLIN)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, poll)

    def _walk(
        self, addresses: list[Address], limit: float, start: int
    ) -> tuple[socket.socket, select.poll | None]:
        """Connect to the first address from ``start`` that accepts, with the poll it waited on."""
        waited: tuple[socket.socket, select.poll] | None = None
        with ConnectWalk(self, addresses, start) as walk:
            while (sock := walk.pending()) is not None:
                if _HAS_POLL:
                    waited = (sock, select.poll())
                    waited[1].register(sock, select.POLLOUT)
                    wait_ms = max(limit - time.monotonic(), 0.0) * 1000
                    walk.settle(bool(waited[1].poll(wait_ms)))
                else:
                    walk.settle(wait_writable(sock, limit - time.monotonic()))
        sock = walk.result()
        if waited is not None and waited[0] is sock:
            return sock, waited[1]
        return sock, select.poll() if _HAS_POLL else None

    def _exchange(
        self,
        connection: _Connection,
        data: bytes,
        deadline: float,
        on_late: Callable[[Late], object] | None,
    ) -> Answered:
        sock, reader, poll = connection.sock, connection.reader, connection.poll
        reader.start()
        try:
            if poll is None:
                sock.settimeout(_left(deadline))
                sock.sendall(data)
            else:
                try:
                    sent = sock.send(data)
                except BlockingIOError:
                    sent = 0
                if sent != len(data):
                    _send_rest(sock, data, sent, deadline)
        except OSError as error:
            sock.close()
            raise reader.send_failed(error) from None
        except BaseException:
            sock.close()
            raise
        sent_at = time.monotonic()
        expires = sent_at + self.read_timeout
        try:
            answer = None
            if poll is not None:
                # The first wait and read here; :meth:`_read` goes on if the answer is not whole.
                left = deadline - sent_at
                if left > 0 and poll.poll(left * 1000):
                    try:
                        chunk = sock.recv(READ_SIZE)
                    except BlockingIOError:
                        chunk = None
                    except OSError as error:
                        answer = reader.end(error)
                    else:
                        answer = reader.feed(chunk) if chunk else reader.end(None)
            if answer is None:
                answer = self._read(connection, deadline)
        except (Stale, Unanswered):
            sock.close()
            raise
        except BaseException as error:
            # A timeout, or interrupted while waiting: the answer may still say
            # whether the request was applied.
            if on_late is None:
                sock.close()
            else:
                on_late(Late(self, connection, expires))
            if isinstance(error, TimeoutError):
                raise Unanswered(None, timeout=True) from None
            raise
        if reader.keep:
            self.idle.give_back(connection)
        else:
            sock.close()
        return answer

    def _read(self, connection: _Connection, deadline: float) -> Answered:
        """Receive until the answer is complete; TimeoutError once ``deadline`` passes."""
        sock, reader, poll = connection.sock, connection.reader, connection.poll
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("read timed out")
            try:
                if poll is None:
                    sock.settimeout(left)
                elif not poll.poll(left * 1000):
                    continue  # the deadline is checked above
                chunk = sock.recv(READ_SIZE)
            except BlockingIOError:
                continue  # woken with nothing to read after all
            except TimeoutError:
                raise
            except OSError as error:
                return reader.end(error)
            if not chunk:
                return reader.end(None)
            answer = reader.feed(chunk)
            if answer is not None:
                return answer


def _send_rest(sock: socket.socket, data: bytes, sent: int, deadline: float) -> None:
    """Send the rest of ``data`` (``sent`` bytes went) on a non-blocking socket.

    TimeoutError once ``deadline`` passes. A request is a few hundred bytes: the
    first ``send`` nearly always takes it all, and this is not called.
    """
    view = memoryview(data)[sent:]
    while view:
        if not wait_writable(sock, deadline - time.monotonic()):
            raise TimeoutError("send timed out")
        with contextlib.suppress(BlockingIOError):  # woken, and full again after all
            view = view[sock.send(view) :]


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 1e-3)
