"""Where a pool connects and which connections it keeps: shared by both drivers.

An :class:`Endpoint` is the host, its limits, the looked-up addresses (the one
that answered goes first) and the idle connections. :class:`ConnectWalk` makes
a connection by trying each address in turn; it opens and connects sockets
itself and only asks its driver to wait until a connect under way finishes, so
the asyncio pool and the blocking pool walk addresses the same way.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any, Generic, Protocol, TypeVar

from .failures import NotSent, connect_failure
from .sockets import CONNECTING, connect_error, connect_failed, open_socket

__all__ = ["IDLE_REUSE_S", "RESOLVE_TTL_S", "Address", "ConnectWalk", "Endpoint", "IdleConnections"]

#: A connection idle longer than this is closed rather than reused: servers
#: and middle boxes drop idle connections, and a write sent into a connection
#: that was just dropped has an unknown outcome.
IDLE_REUSE_S = 20.0
#: How long a resolved address is reused for new connections.
RESOLVE_TTL_S = 30.0

#: Where to connect: (address family, socket address).
Address = tuple[int, tuple[Any, ...]]


class Connection(Protocol):
    """What the idle list needs of a driver's connection."""

    def quiet(self) -> bool:
        """Still open, and nothing arrived since its last answer."""
        ...

    def reusable(self) -> bool:
        """Its last answer allows another request on it."""
        ...

    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)


class IdleConnections(Generic[C]):
    """Connections waiting for the next request, the most recently used first.

    Thread-safe: the blocking pool is used from many threads at once.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._idle: list[tuple[C, float]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._idle)

    def take(self) -> C | None:
        """An idle connection fit to carry a request, or None."""
        if not self._idle:
            return None  # seen without the lock: at worst a connection is made anew
        while True:
            with self._lock:
                if not self._idle:
                    return None
                # The most recently used is the least likely to have been dropped.
                connection, since = self._idle.pop()
            if time.monotonic() - since < IDLE_REUSE_S and connection.quiet():
                return connection
            connection.close()

    def unasked(self, connection: C) -> None:
        """Bytes arrived on ``connection`` while no request was in flight: close it now.

        The one rule for both drivers: a connection that sent anything unasked
        (junk, a stray answer, the start of a close) never carries another
        request, and its bytes are not kept. The asyncio driver learns it as
        the bytes arrive and calls this; the blocking driver's sockets are not
        read while idle, so :meth:`take` finds them readable (not ``quiet``).
        """
        with self._lock:
            self._idle = [(kept, since) for kept, since in self._idle if kept is not connection]
        connection.close()

    def give_back(self, connection: C) -> None:
        """Keep a connection whose answer is complete, or close it."""
        if connection.reusable():
            with self._lock:
                if len(self._idle) < self.limit:
                    self._idle.append((connection, time.monotonic()))
                    return
        connection.close()

    def peek(self) -> list[C]:
        """The idle connections, for tests."""
        with self._lock:
            return [connection for connection, _ in self._idle]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()


class Endpoint(Generic[C]):
    """One host's addresses, limits and idle connections: what both pools share."""

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
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        #: At most this many idle connections (and open ones, on the event loop).
        self.max_connections = max_connections
        self.opened = 0  # connections made, for tests and benchmarks
        self.idle: IdleConnections[C] = IdleConnections(max_connections)
        literal = _ip_literal(host, port)  # an IP address needs no lookup
        self._literal = None if literal is None else [literal]
        #: The looked-up addresses in the order to try them, until none connects.
        self._addresses: list[Address] | None = None
        self._resolved_at = -RESOLVE_TTL_S

    def close(self) -> None:
        """Close the idle connections."""
        self.idle.close()

    def connect_limit(self, now: float, deadline: float | None) -> float:
        """When a connect begun ``now`` must be done: lookup, handshakes and all."""
        limit = now + self.connect_timeout
        return limit if deadline is None else min(limit, deadline)

    def known(self) -> list[Address] | None:
        """The addresses to try when no lookup is needed first."""
        if self._literal is not None:
            return self._literal
        if self._addresses is None or time.monotonic() - self._resolved_at > RESOLVE_TTL_S:
            return None
        return self._addresses

    def learn(self, infos: list[Any], now: float) -> list[Address]:
        """Keep what ``getaddrinfo`` answered, in its order, without repeats."""
        addresses: list[Address] = []
        for family, _, _, _, address in infos:
            if (family, address) not in addresses:
                addresses.append((family, address))
        if not addresses:
            raise OSError(f"cannot resolve {self.host!r}")
        self._addresses, self._resolved_at = addresses, now
        return addresses

    def answered(self, addresses: list[Address], index: int) -> None:
        """Try the address that accepted a connection first from now on.

        A name such as ``localhost`` often resolves to ``::1`` first while a
        local server listens on 127.0.0.1 only: as botocore (urllib3) does, each
        address is tried in turn, and the one that answers is remembered.
        """
        if index and addresses is self._addresses:
            self._addresses = [addresses[index], *addresses[:index], *addresses[index + 1 :]]

    def connect_failed(self, error: OSError) -> NotSent:
        """What a connect's failure means: nothing was sent; look up again if refused."""
        if not isinstance(error, TimeoutError):
            self._addresses = None
        return connect_failure(error)

    def connected(self) -> None:
        self.opened += 1


class ConnectWalk:
    """Connects to the first of ``addresses`` that accepts, trying each in turn.

    The driver only waits::

        with ConnectWalk(endpoint, addresses) as walk:
            while (sock := walk.pending()) is not None:
                walk.settle(wait_until_writable(sock))  # False: the time ran out
        sock = walk.result()

    A timeout ends the walk: no other address would have any time left. Leaving
    the ``with`` block early (a cancellation) closes the socket under way.
    """

    def __init__(self, endpoint: Endpoint[Any], addresses: list[Address], start: int = 0) -> None:
        self._endpoint = endpoint
        self._addresses = addresses
        self._index = start - 1  # ``start``: the addresses before it were tried already
        self._waiting: socket.socket | None = None
        self._connected: socket.socket | None = None
        self._failure: OSError | None = None

    def __enter__(self) -> ConnectWalk:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._waiting is not None:
            self._waiting.close()
            self._waiting = None

    def pending(self) -> socket.socket | None:
        """The socket whose connect is under way, to wait for; None once the walk is over."""
        while self._connected is None and self._index + 1 < len(self._addresses):
            self._index += 1
            family, address = self._addresses[self._index]
            sock = open_socket(family)
            try:
                error = sock.connect_ex(address)  # 0, an errno, or one of CONNECTING
            except BaseException:
                sock.close()
                raise
            if error in CONNECTING:
                self._waiting = sock
                return sock
            self._outcome(sock, error)
        return None

    def settle(self, writable: bool) -> None:
        """The wait for :meth:`pending`'s socket ended: writable, or out of time."""
        sock, self._waiting = self._waiting, None
        assert sock is not None
        if not writable:
            sock.close()
            raise TimeoutError("connect timed out")
        self._outcome(sock, connect_error(sock))

    def result(self) -> socket.socket:
        """The connected socket; raises the last address's failure when none accepted."""
        if self._connected is None:
            raise self._failure or OSError(f"no address to connect to for {self._endpoint.host!r}")
        return self._connected

    def _outcome(self, sock: socket.socket, error: int) -> None:
        if error:
            sock.close()
            self._failure = connect_failed(error)
            return
        self._connected = sock
        self._endpoint.answered(self._addresses, self._index)


def _ip_literal(host: str, port: int) -> Address | None:
    """(family, address) when ``host`` is an IP address: nothing to look up."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.version == 6:
        return socket.AF_INET6, (host, port, 0, 0)
    return socket.AF_INET, (host, port)
