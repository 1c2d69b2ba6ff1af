"""The asyncio driver of the lean HTTP path: keep-alive requests on the runtime's loop.

It sends one POST at a time per connection and keeps idle connections for the
next request: no thread per request and no thread per lease. A protocol object
(rather than streams) hands bytes to the :class:`.wire.ResponseReader` as they
arrive, so a request costs one wake-up of the loop when its answer is complete.
Plain ``http://`` connections are served from the selector directly
(:class:`.plain.PlainSocket`); TLS ones use asyncio's transport. Connecting,
parsing, keep-alive and failures are the shared core's (:mod:`.endpoint`,
:mod:`.wire`, :mod:`.failures`); this module only moves bytes and waits.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from .endpoint import Address, ConnectWalk, Endpoint
from .failures import Cut, NotSent, Stale, Unanswered, closed_early
from .plain import PlainSocket
from .sockets import wait_writable
from .wire import Answered, ResponseReader

__all__ = ["ConnectionPool", "OnLate"]

#: Takes the coroutine that finishes reading an answer the caller stopped waiting for.
OnLate = Callable[[Coroutine[Any, Any, Answered]], object]


class _Connection(asyncio.Protocol):
    """One connection on the loop: feeds its reader and wakes the request waiting."""

    def __init__(self, on_unasked: Callable[[_Connection], object]) -> None:
        self.reader = ResponseReader()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Answered] | None = None
        self.closed = False
        #: How the request ended while nobody waited (after a cut), for :meth:`detach`.
        self._outcome: Answered | BaseException | None = None
        self._on_unasked = on_unasked

    # --- asyncio callbacks --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        if not reader.awaiting:
            # No request in flight: the bytes were never asked for. None is kept
            # and the connection goes (the idle list's rule, endpoint.py).
            reader.feed(data)
            self._on_unasked(self)
            return
        try:
            answer = reader.feed(data)
        except Unanswered as failure:
            self._fail(failure)
            return
        if answer is not None:
            self._settle(answer)

    def eof_received(self) -> bool:
        self._lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)

    # --- what the pool asks -------------------------------------------------------

    def quiet(self) -> bool:
        transport = self.transport
        return (
            not self.closed
            and self.reader.quiet
            and transport is not None
            and not transport.is_closing()
        )

    def reusable(self) -> bool:
        return self.reader.keep and not self.closed

    def start(self, data: bytes) -> asyncio.Future[Answered]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.reader.start()
        self.transport.write(data)
        return self.waiter

    def cut(self) -> None:
        """The caller's own time limit passed: stop its wait, keep the connection."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(Cut())

    def detach(self) -> asyncio.Future[Answered]:
        """A new future for the rest of the answer, once its first waiter stopped waiting."""
        late: asyncio.Future[Answered]
        late = self.waiter = asyncio.get_running_loop().create_future()
        self.reader.hand_over()
        # The answer (or the failure) may have come meanwhile: it was kept, not delivered.
        outcome, self._outcome = self._outcome, None
        if outcome is None and self.closed:
            try:
                outcome = self.reader.end(None)
            except (Stale, Unanswered) as failure:
                outcome = failure
        if isinstance(outcome, BaseException):
            late.set_exception(outcome)
        elif outcome is not None:
            late.set_result(outcome)
        return late

    def expire(self) -> None:
        """The read timeout passed: give up on this connection at once."""
        self._fail(Unanswered(None, timeout=True))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _settle(self, outcome: Answered | BaseException) -> None:
        """Hand how the request ended to its waiter, or keep it for :meth:`detach`."""
        waiter = self.waiter
        if waiter is None:
            return
        if waiter.done():
            if self._outcome is None:
                self._outcome = outcome  # the caller was cut: whoever reads on gets it
        elif isinstance(outcome, BaseException):
            waiter.set_exception(outcome)
        else:
            waiter.set_result(outcome)

    def _fail(self, error: BaseException) -> None:
        self.close()
        self._settle(error)

    def _lost(self, exc: Exception | None) -> None:
        if self.closed:
            return  # closed here: whoever waited was told why
        self.closed = True
        if not self.reader.awaiting:
            return
        try:
            outcome: Answered | BaseException = self.reader.end(exc)
        except (Stale, Unanswered) as failure:
            outcome = failure
        self._settle(outcome)


class ConnectionPool(Endpoint[_Connection]):
    """Keep-alive connections to one host, used from one event loop."""

    #: The lookup under way, shared by the connections that wait for it.
    _resolving: asyncio.Future[list[Any]] | None = None

    @functools.cached_property
    def _slots(self) -> asyncio.Semaphore:
        """At most ``max_connections`` requests at once, each on its own connection."""
        return asyncio.Semaphore(self.max_connections)

    async def request(
        self,
        data: bytes,
        *,
        retry_stale: bool,
        timeout: float | None = None,
        on_late: OnLate | None = None,
    ) -> Answered:
        """Send the framed request ``data``; return (status, body, its ``x-amz-crc32``).

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
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None or on_late is None else loop.time() + timeout
        async with self._slots:
            connection = self.idle.take() or await self._connect(loop, deadline)
            try:
                return await self._exchange(connection, data, deadline, on_late)
            except Stale:
                if not retry_stale:
                    raise closed_early() from None
            connection = await self._connect(loop, deadline)
            return await self._exchange(connection, data, deadline, on_late)

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, deadline: float | None
    ) -> _Connection:
        limit = self.connect_limit(loop.time(), deadline)
        try:
            addresses = self.known()
            if addresses is None:
                async with asyncio.timeout_at(limit):
                    addresses = await self._resolve()
            with ConnectWalk(self, addresses) as walk:
                while (sock := walk.pending()) is not None:
                    walk.settle(await _writable(loop, sock, limit))
            connection = await self._open(loop, walk.result(), limit)
        except OSError as error:
            raise self.connect_failed(error) from None
        self.connected()
        return connection

    async def _resolve(self) -> list[Address]:
        loop = asyncio.get_running_loop()
        now = loop.time()
        # Connections opened together share one lookup (one thread, not one each).
        if self._resolving is None or self._resolving.done():
            self._resolving = asyncio.ensure_future(
                loop.getaddrinfo(
                    self.host, self.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                )
            )
        infos = await asyncio.shield(self._resolving)
        return self.learn(infos, now)

    async def _open(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, limit: float
    ) -> _Connection:
        """The connection over a connected socket: the selector's, or asyncio's (TLS)."""
        try:
            if self.ssl_context is None and isinstance(loop, asyncio.SelectorEventLoop):
                connection = _Connection(self.idle.unasked)
                PlainSocket(loop, sock, connection)
                return connection
            async with asyncio.timeout_at(limit):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self.idle.unasked),
                    sock=sock,
                    ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None,
                )
            return connection
        except BaseException:
            sock.close()
            raise

    async def _exchange(
        self,
        connection: _Connection,
        data: bytes,
        deadline: float | None,
        on_late: OnLate | None,
    ) -> Answered:
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
        self.idle.give_back(connection)
        return answer

    async def _late(self, connection: _Connection, timer: asyncio.TimerHandle) -> Answered:
        """The rest of an answer nobody waits for any more, within the read timeout."""
        try:
            return await connection.detach()
        finally:
            timer.cancel()
            connection.close()  # never reused: simpler than proving it is clean


async def _writable(loop: asyncio.AbstractEventLoop, sock: socket.socket, limit: float) -> bool:
    """Wait until a connect under way finished (True) or the loop's time ``limit`` passed."""
    if wait_writable(sock, 0):
        return True
    fd = sock.fileno()
    ready: asyncio.Future[bool] = loop.create_future()
    try:
        loop.add_writer(fd, _settle, ready, True)
    except NotImplementedError:
        # A proactor loop watches no descriptors: wait in a worker thread instead.
        return await loop.run_in_executor(None, wait_writable, sock, limit - loop.time())
    timer = loop.call_at(limit, _settle, ready, False)
    try:
        return await ready
    finally:
        loop.remove_writer(fd)
        timer.cancel()


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
