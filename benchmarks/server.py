"""Start a moto DynamoDB server for a benchmark run, with or without keep-alive.

``python -m moto.server`` (werkzeug) closes the connection after every answer,
so against it every client opens a TCP connection per request. DynamoDB keeps
connections alive, and so does this module's ``keepalive`` mode: the same moto
application behind a small threaded HTTP/1.1 server that reads each request
body by its length and answers with a length, so one connection carries many
requests. Benchmarks run both libraries against the same server either way.

Run alone: ``python -m benchmarks.server --keep-alive --port 5000``.
"""

from __future__ import annotations

import argparse
import io
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    """A TCP port on the loopback interface nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server(*, keep_alive: bool) -> Iterator[str]:
    """A moto server in its own process for the duration of the block; yields its URL."""
    port = free_port()
    if keep_alive:
        command = [sys.executable, "-m", "benchmarks.server", "--keep-alive", "--port", str(port)]
    else:
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            break
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"moto server did not start: {' '.join(command)}") from None
            time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(10)


def _handler(app: Any) -> type[BaseHTTPRequestHandler]:
    class KeepAliveHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            environ = {
                "REQUEST_METHOD": self.command,
                "SCRIPT_NAME": "",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "SERVER_NAME": "127.0.0.1",
                "SERVER_PORT": str(self.server.server_address[1]),
                "SERVER_PROTOCOL": "HTTP/1.1",
                "REMOTE_ADDR": self.client_address[0],
                "CONTENT_LENGTH": str(length),
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "wsgi.version": (1, 0),
                "wsgi.url_scheme": "http",
                "wsgi.input": io.BytesIO(body),
                "wsgi.errors": sys.stderr,
                "wsgi.multithread": True,
                "wsgi.multiprocess": False,
                "wsgi.run_once": False,
            }
            for name, value in self.headers.items():
                key = "HTTP_" + name.upper().replace("-", "_")
                if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                    environ[key] = value
            answer: dict[str, Any] = {}

            def start_response(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
                answer["status"], answer["headers"] = status, headers
                return lambda data: None

            chunks = app(environ, start_response)
            try:
                payload = b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            code, _, reason = answer["status"].partition(" ")
            self.send_response(int(code), reason)
            for name, value in answer["headers"]:
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    return KeepAliveHandler


def serve_keep_alive(port: int) -> None:
    """Serve moto's application on 127.0.0.1:port with HTTP/1.1 keep-alive, forever."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(app))
    server.daemon_threads = True
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--keep-alive", action="store_true", required=True)
    serve_keep_alive(parser.parse_args().port)


if __name__ == "__main__":
    main()
