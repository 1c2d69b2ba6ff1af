"""A TCP relay on loopback that passes requests at once and answers one byte at a time.

What a slow middlebox or an on-path attacker can do to a plain-HTTP endpoint: every
answer arrives whole and well-formed, only too slowly. Each client connection gets its
own upstream connection; the relay stops with :meth:`TrickleRelay.close`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit


class TrickleRelay:
    """Forwards ``upstream`` (an ``http://host:port`` URL); answers go one byte per ``pause``."""

    def __init__(self, upstream: str, pause: float) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.pause = pause
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pass, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._trickle, args=(upstream, client), daemon=True).start()

    def _pass(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        self._close(source, sink)

    def _trickle(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                for byte in data:
                    if self._stopped.wait(self.pause):
                        return
                    sink.sendall(bytes([byte]))
        self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> TrickleRelay:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
