"""The demo's embedded DynamoDB-compatible server: moto in its own process.

moto ships with the ``dev`` extra (``make demo`` installs it). The server binds
to a free loopback port and stops with the demo.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.request

#: Credentials the embedded server accepts (it accepts any); never real ones.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
LOCAL_REGION = "us-east-1"
_START_TIMEOUT_S = 30.0


class ServerError(RuntimeError):
    """The embedded server could not start."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """A moto server process on 127.0.0.1; use as a context manager."""

    def __init__(self) -> None:
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start the server and wait until it answers; returns its URL."""
        if importlib.util.find_spec("moto") is None:
            raise ServerError(
                "the embedded server needs moto: install the dev extra "
                "(pip install -e '.[dev]', which `make demo` does) or pass --endpoint URL"
            )
        port = free_port()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(self.url, timeout=1).close()
                return self.url
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise ServerError(
                        f"the embedded moto server did not start on {self.url}"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
