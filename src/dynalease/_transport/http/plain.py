"""A plain-TCP connection served straight from the selector (``http://`` endpoints)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from .wire import READ_SIZE

__all__ = ["PlainSocket"]


class PlainSocket(asyncio.Transport):
    """asyncio's transport interface over a selector reader, for plain TCP.

    asyncio's socket transport costs more per connection than a lock request
    does against a server that closes after every answer, as moto's and DynamoDB
    Local's do: it looks up both socket addresses, schedules its start and its
    end on the loop, and keeps write buffers a POST of a few hundred bytes never
    needs. This one registers a reader and hands bytes, the end and errors
    straight to its protocol. ``close`` is ``abort`` (an answer that arrived
    left nothing to flush), and neither calls ``connection_lost`` back: the
    protocol asked to close and has already recorded it. TLS connections keep
    asyncio's transport.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: asyncio.Protocol
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
            data = self._sock.recv(READ_SIZE)
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
