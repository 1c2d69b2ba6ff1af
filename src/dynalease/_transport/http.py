"""A small keep-alive HTTP/1.1 client on asyncio protocols, for the lean request path.

It sends one POST at a time per connection and keeps idle connections for the
next request, all on the runtime's event loop: no thread per request and no
thread per lease. A protocol object (rather than streams) parses the answer as
bytes arrive, so a request costs one wake-up of the loop when the answer is
complete. Plain ``http://`` connections skip asyncio's transport and are served
from the selector directly (:class:`_PlainSocket`); TLS ones use asyncio's.
Failures are told apart by whether the request could have reached the server,
because a write that may have arrived must be reconciled by the lock protocol,
and one that never left need not be.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["BlockingPool", "ConnectionPool", "Cut", "Late", "NotSent", "Unanswered"]

#: A connection idle longer than this is closed rather than reused: servers
#: and middle boxes drop idle connections, and a write sent into a connection
#: that was just dropped has an unknown outcome.
IDLE_REUSE_S = 20.0
#: How long a resolved address is reused for new connections.
RESOLVE_TTL_S = 30.0
_MAX_HEAD = 64 * 1024
_READ_SIZE = 64 * 1024
#: What a non-blocking ``connect`` answers while the handshake is under way.
_CONNECTING = frozenset({errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK, errno.EINTR})
#: Where to connect: (address family, socket address).
_Address = tuple[int, tuple[Any, ...]]
#: An answer: (status, body, its ``x-amz-crc32`` if sent).
_Answered = tuple[int, bytes, int | None]
#: Takes the coroutine that finishes reading an answer the caller stopped waiting for.
_OnLate = Callable[[Coroutine[Any, Any, _Answered]], object]


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


class Cut(Exception):
    """The caller's time limit passed first; the answer goes to its ``on_late``."""


class _Stale(Exception):
    """A reused connection closed before any byte of the answer: maybe an idle drop."""


class _Answer(asyncio.Protocol):
    """One connection: collects each answer and wakes the request waiting for it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[_Answered] | None = None
        self.closed = False
        self.timed_out = False
        self.keep = False
        self.idle_since = 0.0
        self._head: tuple[int, int | None, bool, bool, int | None] | None = None
        self._head_end = 0

    # --- asyncio callbacks --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is None or self.waiter.done():
            return
        try:
            answer = self.complete()
        except ValueError as error:
            self._fail(error)
            return
        if answer is not None:
            self.waiter.set_result(answer)

    def eof_received(self) -> bool:
        self._lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)

    # --- requests -----------------------------------------------------------------

    def usable(self, now: float) -> bool:
        return (
            not self.closed
            and not self.buffer
            and self.transport is not None
            and not self.transport.is_closing()
            and now - self.idle_since < IDLE_REUSE_S
        )

    def start(self, data: bytes) -> asyncio.Future[_Answered]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self._head = None
        self._head_end = 0
        self.buffer.clear()
        self.transport.write(data)
        return self.waiter

    def cut(self) -> None:
        """The caller's own time limit passed: stop its wait, keep the connection."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(Cut())

    def detach(self) -> asyncio.Future[_Answered]:
        """A new future for the rest of the answer, once its first waiter stopped waiting."""
        late: asyncio.Future[_Answered]
        late = self.waiter = asyncio.get_running_loop().create_future()
        try:
            # Bytes (or the end) that arrived meanwhile were kept, not delivered.
            answer = self.ended(None) if self.closed else self.complete()
        except (_Stale, OSError, ValueError) as error:
            late.set_exception(error)
        else:
            if answer is not None:
                late.set_result(answer)
        return late

    def expire(self) -> None:
        """The read timeout passed: give up on this connection at once."""
        self.timed_out = True
        self._fail(TimeoutError("read timed out"))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, error: BaseException) -> None:
        self.close()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)

    def _lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            waiter.set_result(self.ended(exc))
        except (_Stale, OSError) as error:
            waiter.set_exception(error)

    def ended(self, exc: BaseException | None) -> _Answered:
        """The answer when the connection ends now; raises when it is incomplete.

        Raises :class:`_Stale` when not a byte of the answer had arrived.
        """
        if self._head is None and self._head_end == 0 and not self.buffer:
            raise _Stale()
        if self._head is not None and self._head[1] is None and not self._head[2]:
            # No length and not chunked: the body runs to the end of the connection.
            status, _, _, _, crc = self._head
            self.keep = False
            return status, bytes(self.buffer[self._head_end :]), crc
        if isinstance(exc, OSError):
            raise exc
        raise ConnectionResetError("connection closed mid-answer")

    def complete(self) -> _Answered | None:
        """The whole answer once it is in the buffer, else None."""
        if self._head is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    raise ValueError("response head too large")
                return None
            self._head = _parse_head(bytes(self.buffer[: end + 4]))
            self._head_end = end + 4
        status, length, chunked, keep, crc = self._head
        start = self._head_end
        if chunked:
            dechunked = _dechunk(self.buffer, start)
            if dechunked is None:
                return None
            body, end = dechunked
        elif length is not None:
            end = start + length
            if len(self.buffer) < end:
                return None
            body = bytes(self.buffer[start:end])
        else:
            return None  # read to the end of the connection
        # Bytes after the answer were never asked for: do not reuse such a connection.
        self.keep = keep and len(self.buffer) == end
        self.buffer.clear()
        return status, body, crc


class _PlainSocket(asyncio.Transport):
    """A plain-TCP connection served straight from the selector (``http://`` endpoints).

    asyncio's socket transport costs more per connection than a lock request
    does against a server that closes after every answer, as moto's and DynamoDB
    Local's do: it looks up both socket addresses, schedules its start and its
    end on the loop, and keeps write buffers a POST of a few hundred bytes never
    needs. This one registers a reader and hands bytes, the end and errors
    straight to its :class:`_Answer`. ``close`` is ``abort`` (an answer that
    arrived left nothing to flush), and neither calls ``connection_lost`` back:
    the answer object asked to close and has already recorded it. TLS
    connections keep asyncio's transport.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: _Answer
    ) -> None:
        super().__init__()
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._protocol = protocol
        self._unsent = b""  # what a full send buffer did not take yet
        self._closing = False
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._read_ready)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._sock if name == "socket" else default

    def is_closing(self) -> bool:
        return self._closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        if self._unsent:
            self._unsent += bytes(data)
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as error:
            # As asyncio's transport: the caller learns it on the loop's next turn.
            self._loop.call_soon(self._lost, error)
            return
        if sent < len(data):
            self._unsent = bytes(data[sent:])
            self._loop.add_writer(self._fd, self._write_ready)

    def _write_ready(self) -> None:
        try:
            sent = self._sock.send(self._unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        self._unsent = self._unsent[sent:]
        if not self._unsent:
            self._loop.remove_writer(self._fd)

    def _read_ready(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        if data:
            self._protocol.data_received(data)
        else:
            self._protocol.eof_received()
            self._lost(None)

    def _lost(self, error: Exception | None) -> None:
        if self._closing:
            return
        self.abort()
        self._protocol.connection_lost(error)

    def abort(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if self._unsent:
            self._loop.remove_writer(self._fd)
            self._unsent = b""
        self._sock.close()

    def close(self) -> None:
        self.abort()


async def _tcp_connect(
    loop: asyncio.AbstractEventLoop, family: int, address: tuple[Any, ...], limit: float
) -> socket.socket:
    """A non-blocking TCP socket connected to ``address`` by the loop's time ``limit``."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not isinstance(loop, asyncio.SelectorEventLoop):
            async with asyncio.timeout_at(limit):
                await loop.sock_connect(sock, address)
            return sock
        error = sock.connect_ex(address)
        if error in _CONNECTING:
            # On loopback the handshake is over before connect returns.
            error = _connect_outcome(sock, error)
        if error in _CONNECTING:
            fd = sock.fileno()
            ready: asyncio.Future[bool] = loop.create_future()
            loop.add_writer(fd, _settle, ready, True)
            timer = loop.call_at(limit, _settle, ready, False)
            try:
                connected = await ready
            finally:
                loop.remove_writer(fd)
                timer.cancel()
            if not connected:
                raise TimeoutError("connect timed out")
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))
    except BaseException:
        sock.close()
        raise
    return sock


def _connect_outcome(sock: socket.socket, pending: int) -> int:
    """The outcome of a connect in progress if it is known already, else ``pending``.

    0 or the connect's error (reading it clears it). Saves two turns of the event
    loop per connection to a local server, where the handshake completes inside
    ``connect`` itself.
    """
    poll = select.poll()
    poll.register(sock, select.POLLOUT)
    if not poll.poll(0):
        return pending
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


class _Pool:
    """Where a pool connects to and its time limits."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: Any = None,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.opened = 0  # connections made, for tests and benchmarks
        literal = _ip_literal(host, port)  # an IP address needs no lookup
        self._literal = None if literal is None else [literal]
        #: The looked-up addresses in the order to try them, until none connects.
        self._addresses: list[_Address] | None = None
        self._resolved_at = -RESOLVE_TTL_S

    def _known(self) -> list[_Address] | None:
        """The addresses to try when no lookup is needed first."""
        if self._literal is not None:
            return self._literal
        if self._addresses is None or time.monotonic() - self._resolved_at > RESOLVE_TTL_S:
            return None
        return self._addresses

    def _learn(self, infos: list[Any], now: float) -> list[_Address]:
        """Keep what ``getaddrinfo`` answered, in its order, without repeats."""
        addresses: list[_Address] = []
        for family, _, _, _, address in infos:
            if (family, address) not in addresses:
                addresses.append((family, address))
        if not addresses:
            raise OSError(f"cannot resolve {self.host!r}")
        self._addresses, self._resolved_at = addresses, now
        return addresses

    def _answered(self, addresses: list[_Address], index: int) -> None:
        """Try the address that accepted a connection first from now on.

        A name such as ``localhost`` often resolves to ``::1`` first while a
        local server listens on 127.0.0.1 only: as botocore (urllib3) does, each
        address is tried in turn, and the one that answers is remembered.
        """
        if index and addresses is self._addresses:
            self._addresses = [addresses[index], *addresses[:index], *addresses[index + 1 :]]

    def _connect_failed(self, error: OSError) -> NotSent:
        """What a connect's failure means: nothing was sent."""
        if isinstance(error, TimeoutError):
            return NotSent(error, timeout=True)
        self._addresses = None  # resolve again next time
        return NotSent(error, timeout=False)


class ConnectionPool(_Pool):
    """Keep-alive connections to one host, used from one event loop."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: Any = None,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
    ) -> None:
        super().__init__(
            host,
            port,
            ssl_context=ssl_context,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        self._idle: deque[_Answer] = deque()
        self._slots = asyncio.Semaphore(max_connections)
        self._resolving: asyncio.Future[list[Any]] | None = None

    async def _resolve(self) -> list[_Address]:
        known = self._known()
        if known is not None:
            return known
        now = time.monotonic()
        # Connections opened together share one lookup (one thread, not one each).
        if self._resolving is None or self._resolving.done():
            self._resolving = asyncio.ensure_future(
                asyncio.get_running_loop().getaddrinfo(
                    self.host, self.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                )
            )
        infos = await asyncio.shield(self._resolving)
        return self._learn(infos, now)

    async def _connect(self, deadline: float | None = None) -> _Answer:
        loop = asyncio.get_running_loop()
        limit = loop.time() + self.connect_timeout
        if deadline is not None:
            limit = min(limit, deadline)
        try:
            addresses = self._known()
            if addresses is None:
                async with asyncio.timeout_at(limit):
                    addresses = await self._resolve()
            sock = await self._tcp_connect(loop, addresses, limit)
            try:
                if self.ssl_context is None and isinstance(loop, asyncio.SelectorEventLoop):
                    protocol = _Answer()
                    _PlainSocket(loop, sock, protocol)
                else:
                    async with asyncio.timeout_at(limit):
                        _, protocol = await loop.create_connection(
                            _Answer,
                            sock=sock,
                            ssl=self.ssl_context,
                            server_hostname=self.host if self.ssl_context is not None else None,
                        )
            except BaseException:
                sock.close()
                raise
        except OSError as error:
            raise self._connect_failed(error) from None
        self.opened += 1
        return protocol

    async def _tcp_connect(
        self, loop: asyncio.AbstractEventLoop, addresses: list[_Address], limit: float
    ) -> socket.socket:
        """A socket connected to the first of ``addresses`` that accepts (see ``_answered``)."""
        failure = OSError(f"no address to connect to for {self.host!r}")
        for index, (family, address) in enumerate(addresses):
            try:
                sock = await _tcp_connect(loop, family, address, limit)
            except TimeoutError:
                raise  # the time is spent: no other address would have any left
            except OSError as error:
                failure = error
                continue
            self._answered(addresses, index)
            return sock
        raise failure

    def _take_idle(self) -> _Answer | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()  # the most recently used is the least likely dropped
            if connection.usable(now):
                return connection
            connection.close()
        return None

    async def request(
        self,
        head: bytes,
        body: bytes,
        *,
        retry_stale: bool,
        timeout: float | None = None,
        on_late: _OnLate | None = None,
    ) -> _Answered:
        """Send ``head`` + ``body``; return (status, response body, its ``x-amz-crc32``).

        ``retry_stale`` allows one more try on a new connection when a reused
        connection turns out to be closed before any answer byte arrived
        (only for requests that change nothing, such as reads).

        With ``timeout`` and ``on_late`` the wait ends after ``timeout`` seconds in
        all, raising :class:`Cut` (or :class:`NotSent` if nothing was sent), and
        a cancelled wait ends at once; either way a request that went out is not
        abandoned: ``on_late`` gets a coroutine that finishes reading its answer
        (within the read timeout). The caller then needs no task of its own to
        keep a request running past its time limit.
        """
        data = head + body
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None or on_late is None else loop.time() + timeout
        async with self._slots:
            connection = self._take_idle()
            reused = connection is not None
            if connection is None:
                connection = await self._connect(deadline)
            try:
                return await self._exchange(connection, data, deadline, on_late)
            except _Stale:
                if not (reused and retry_stale):
                    raise _closed() from None
            connection = await self._connect(deadline)
            try:
                return await self._exchange(connection, data, deadline, on_late)
            except _Stale:
                raise _closed() from None

    async def _exchange(
        self,
        connection: _Answer,
        data: bytes,
        deadline: float | None = None,
        on_late: _OnLate | None = None,
    ) -> _Answered:
        loop = asyncio.get_running_loop()
        cut: asyncio.TimerHandle | None = None
        if deadline is not None:
            left = deadline - loop.time()
            if left <= 0:
                connection.close()
                raise NotSent(None, timeout=True)
            if left < self.read_timeout:
                cut = loop.call_later(left, connection.cut)
        waiter = connection.start(data)
        timer = loop.call_later(self.read_timeout, connection.expire)
        handed = False
        try:
            answer = await waiter
        except Cut:
            assert on_late is not None
            on_late(self._late(connection, timer))
            handed = True
            raise
        except _Stale:
            raise
        except (OSError, ValueError) as error:
            connection.close()
            raise Unanswered(
                None if connection.timed_out else error, timeout=connection.timed_out
            ) from None
        except asyncio.CancelledError:
            if on_late is None:
                connection.close()  # the answer would confuse the next request
            else:
                on_late(self._late(connection, timer))  # it may still say what happened
                handed = True
            raise
        except BaseException:
            connection.close()
            raise
        finally:
            if cut is not None:
                cut.cancel()
            if not handed:
                timer.cancel()
        connection.waiter = None
        if connection.keep and not connection.closed:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()
        return answer

    async def _late(self, connection: _Answer, timer: asyncio.TimerHandle) -> _Answered:
        """The rest of an answer nobody waits for any more, within the read timeout."""
        late = connection.detach()
        try:
            return await late
        except _Stale:
            raise _closed() from None
        except (OSError, ValueError) as error:
            timed_out = isinstance(error, TimeoutError)
            raise Unanswered(None if timed_out else error, timeout=timed_out) from None
        finally:
            timer.cancel()
            connection.close()  # never reused: simpler than proving it is clean

    def close(self) -> None:
        """Close the idle connections."""
        while self._idle:
            self._idle.pop().close()


class Late:
    """A request sent by a blocking caller whose answer had not arrived when it stopped waiting.

    The write may still be applied; whoever takes this over finishes reading the
    answer (:meth:`BlockingPool.finish`) to learn whether it was.
    """

    def __init__(self, pool: BlockingPool, sock: socket.socket, answer: _Answer, expires: float):
        self.pool = pool
        self.sock = sock
        self.answer = answer
        self.expires = expires

    def finish(self) -> _Answered:
        """Block until the answer is complete or the read timeout has passed."""
        return self.pool.finish(self)

    def close(self) -> None:
        """Stop listening for the answer."""
        self.sock.close()


class BlockingPool(_Pool):
    """Keep-alive connections to one host for callers that block in their own thread.

    A sync lock's own requests go out from the calling thread: no hand-over to
    the runtime thread and back, which costs more CPU than the request itself.
    Thread-safe; each request uses one connection at a time.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: Any = None,
        connect_timeout: float,
        read_timeout: float,
        max_idle: int,
    ) -> None:
        super().__init__(
            host,
            port,
            ssl_context=ssl_context,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        self.max_idle = max_idle
        self._idle: list[tuple[socket.socket, float]] = []
        self._lock = threading.Lock()

    def request(
        self,
        data: bytes,
        *,
        timeout: float,
        retry_stale: bool,
        on_late: Callable[[Late], object] | None = None,
    ) -> _Answered:
        """Send ``data``; return (status, response body, its ``x-amz-crc32``).

        Waits at most ``timeout`` seconds in all. When the request was sent but
        its answer is not complete by then (or an interrupt arrives meanwhile),
        the connection goes to ``on_late`` as a :class:`Late` before
        :class:`Unanswered` (or the interrupt) is raised.
        """
        deadline = time.monotonic() + timeout
        sock = self._take_idle()
        reused = sock is not None
        if sock is None:
            sock = self._connect(deadline)
        try:
            return self._exchange(sock, data, deadline, on_late, reused=reused)
        except _Stale:
            if not (reused and retry_stale):
                raise _closed() from None
        sock = self._connect(deadline)
        try:
            return self._exchange(sock, data, deadline, on_late, reused=False)
        except _Stale:
            raise _closed() from None

    def finish(self, late: Late) -> _Answered:
        """Read the rest of a late answer until its read timeout (see :class:`Late`)."""
        try:
            return self._read(late.sock, late.answer, late.expires)
        except TimeoutError:
            raise Unanswered(None, timeout=True) from None
        except _Stale:
            raise _closed() from None
        finally:
            late.sock.close()

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, _ in idle:
            sock.close()

    def _take_idle(self) -> socket.socket | None:
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock, since = self._idle.pop()  # the most recently used is the least likely dropped
            if now - since < IDLE_REUSE_S and _open_and_quiet(sock):
                return sock
            sock.close()

    def _connect(self, deadline: float) -> socket.socket:
        try:
            addresses = self._known()
            if addresses is None:
                infos = socket.getaddrinfo(
                    self.host, self.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                )
                addresses = self._learn(infos, time.monotonic())
            sock = self._tcp_connect(addresses, deadline)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if self.ssl_context is not None:
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        except OSError as error:
            raise self._connect_failed(error) from None
        self.opened += 1
        return sock

    def _tcp_connect(self, addresses: list[_Address], deadline: float) -> socket.socket:
        """A socket connected to the first of ``addresses`` that accepts (see ``_answered``)."""
        failure = OSError(f"no address to connect to for {self.host!r}")
        for index, (family, address) in enumerate(addresses):
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(_left(deadline, cap=self.connect_timeout))
                sock.connect(address)
            except BaseException as error:
                sock.close()
                # After a timeout no other address would have any time left.
                if not isinstance(error, OSError) or isinstance(error, TimeoutError):
                    raise
                failure = error
                continue
            self._answered(addresses, index)
            return sock
        raise failure

    def _exchange(
        self,
        sock: socket.socket,
        data: bytes,
        deadline: float,
        on_late: Callable[[Late], object] | None,
        *,
        reused: bool,
    ) -> _Answered:
        answer = _Answer()
        try:
            sock.settimeout(_left(deadline))
            sock.sendall(data)
        except BaseException as error:
            sock.close()
            if reused and isinstance(error, OSError) and not isinstance(error, TimeoutError):
                raise _Stale() from None  # dropped while idle: nothing was read from it
            if isinstance(error, OSError):
                raise Unanswered(
                    None if isinstance(error, TimeoutError) else error,
                    timeout=isinstance(error, TimeoutError),
                ) from None
            raise
        expires = time.monotonic() + self.read_timeout
        try:
            result = self._read(sock, answer, deadline)
        except TimeoutError:
            if on_late is None:
                sock.close()
            else:
                on_late(Late(self, sock, answer, expires))
            raise Unanswered(None, timeout=True) from None
        except (_Stale, Unanswered):
            sock.close()
            raise
        except BaseException:
            # Interrupted while waiting: the answer may still tell whether it was applied.
            if on_late is None:
                sock.close()
            else:
                on_late(Late(self, sock, answer, expires))
            raise
        if answer.keep:
            self._keep(sock)
        else:
            sock.close()
        return result

    def _read(self, sock: socket.socket, answer: _Answer, deadline: float) -> _Answered:
        """Receive until ``answer`` is complete; TimeoutError once ``deadline`` passes."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("read timed out")
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise
            except OSError as error:
                try:
                    return answer.ended(error)
                except OSError as failure:
                    raise Unanswered(failure, timeout=False) from None
            if not chunk:
                try:
                    return answer.ended(None)
                except OSError as failure:
                    raise Unanswered(failure, timeout=False) from None
            answer.buffer += chunk
            try:
                result = answer.complete()
            except ValueError as error:
                raise Unanswered(error, timeout=False) from None
            if result is not None:
                return result

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append((sock, time.monotonic()))
                return
        sock.close()


def _open_and_quiet(sock: socket.socket) -> bool:
    """True when an idle connection is still open and has sent nothing unasked.

    A readable idle connection was closed by the server (or sent bytes nobody
    asked for): either way it must not carry a write whose outcome matters.
    """
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _left(deadline: float, cap: float | None = None) -> float:
    left = max(deadline - time.monotonic(), 1e-3)
    return left if cap is None else min(left, cap)


def _ip_literal(host: str, port: int) -> _Address | None:
    """(family, address) when ``host`` is an IP address: nothing to look up."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.version == 6:
        return socket.AF_INET6, (host, port, 0, 0)
    return socket.AF_INET, (host, port)


def _closed() -> Unanswered:
    return Unanswered(ConnectionResetError("connection closed before an answer"), timeout=False)


def _parse_head(head: bytes) -> tuple[int, int | None, bool, bool, int | None]:
    """(status, content length, chunked, keep-alive, CRC32) from a response head.

    ``head`` ends with the blank line. Only the four headers that matter are
    looked up (case-insensitively), not every header split and decoded.
    """
    line_end = head.find(b"\r\n")
    first = head[:line_end].decode("latin-1")
    version, _, rest = first.partition(" ")
    if not version.startswith("HTTP/") or len(rest) < 3 or not rest[:3].isdigit():
        raise ValueError(f"not an HTTP response: {first[:80]!r}")
    lower = head.lower()
    length_text = _header(lower, head, b"content-length")
    length = None if length_text is None else int(length_text)
    encoding = _header(lower, head, b"transfer-encoding")
    chunked = encoding is not None and "chunked" in encoding.lower()
    keep = version == "HTTP/1.1"
    connection = _header(lower, head, b"connection")
    if connection is not None:
        token = connection.lower()
        keep = token == "keep-alive" or (keep and token != "close")
    crc_text = _header(lower, head, b"x-amz-crc32")
    crc = None if crc_text is None else int(crc_text)
    return int(rest[:3]), length, chunked, keep, crc


def _header(lower: bytes, head: bytes, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) in ``head``, or None when absent."""
    at = lower.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    return head[start : head.find(b"\r\n", start)].strip().decode("latin-1")


def _dechunk(buffer: bytearray, start: int) -> tuple[bytes, int] | None:
    """(body, end offset) of a complete chunked answer starting at ``start``, else None."""
    parts: list[bytes] = []
    position = start
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size = int(bytes(buffer[position:line_end]).split(b";", 1)[0], 16)
        position = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n\r\n", position - 2)
            return None if trailer_end < 0 else (b"".join(parts), trailer_end + 4)
        if len(buffer) < position + size + 2:
            return None
        parts.append(bytes(buffer[position : position + size]))
        position += size + 2
