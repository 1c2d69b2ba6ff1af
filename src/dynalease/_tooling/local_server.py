"""A local DynamoDB-compatible server: moto's DynamoDB in its own process (the demo, the
tests, the benchmarks and ``dynalease local``).

Unlike ``python -m moto.server``, it serves only DynamoDB (and ``POST /moto-api/reset`` for
the tests); refuses what a web page could send (an ``Origin`` header, never a CORS header;
on loopback, a ``Host`` that is not loopback: DNS rebinding); answers one request at a time
(a cancelled moto transaction undoes concurrent writes: docs/soak.md); keeps memory flat
(:mod:`dynalease.testing._moto`); and keeps connections alive, as DynamoDB does, unless
``keep_alive=False``. Run alone: ``python -m dynalease._tooling.local_server --port 8000``.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import ipaddress
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

#: It accepts any; never real ones.
_START_TIMEOUT_S = 30.0

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class ServerError(RuntimeError):
    """The local server could not start."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


DYNAMODB_TARGET = "DynamoDB_20120810."
RESET_PATH = "/moto-api/reset"


def is_loopback(host: str) -> bool:
    """``host``: a name or an address, IPv6 with or without brackets."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def dynamodb_app(*, loopback_only: bool = True) -> WsgiApp:
    """``loopback_only``: refuse a ``Host`` a web page could make resolve to this machine."""
    from ..testing._moto import ServedDynamoDB

    dynamodb = ServedDynamoDB()

    def answer(environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
        if environ.get("HTTP_ORIGIN") is not None or method == "OPTIONS":
            return _refused(403, "AccessDeniedException", "cross-origin requests are not served")
        host = _host_name(environ.get("HTTP_HOST", ""))
        if loopback_only and host and not is_loopback(host):
            return _refused(403, "AccessDeniedException", f"host {host!r} is not served")
        if method == "POST" and path == RESET_PATH:
            dynamodb.reset()
            return 200, {"Content-Type": "application/json"}, b'{"status": "ok"}'
        if method in ("GET", "HEAD") and path == "/":
            return 200, {"Content-Type": "text/plain"}, b"dynalease local: DynamoDB only\n"
        if method == "POST" and environ.get("HTTP_X_AMZ_TARGET", "").startswith(DYNAMODB_TARGET):
            return dynamodb.answer(environ)
        return _refused(400, "UnknownOperationException", "only DynamoDB is served here")

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        status, headers, body = answer(environ)
        reason = {200: "OK", 400: "Bad Request", 403: "Forbidden"}.get(status, "Status")
        shown = [
            (name, value)
            for name, value in headers.items()
            if not name.lower().startswith("access-control-") and name.lower() != "content-length"
        ]
        start_response(f"{status} {reason}", [*shown, ("Content-Length", str(len(body)))])
        return [body]

    return serve


def _refused(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message})
    return status, {"Content-Type": "application/x-amz-json-1.0"}, body.encode()


def _keep_alive_handler(app: WsgiApp) -> type[BaseHTTPRequestHandler]:
    class KeepAliveHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            environ: dict[str, Any] = {
                "REQUEST_METHOD": self.command,
                "SCRIPT_NAME": "",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "SERVER_NAME": "127.0.0.1",
                "SERVER_PORT": str(self.server.server_address[1]),  # type: ignore[index]
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

            payload = b"".join(app(environ, start_response))
            code, _, reason = answer["status"].partition(" ")
            self.send_response(int(code), reason)
            for name, value in answer["headers"]:
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = _serve

    return KeepAliveHandler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's backlog of 5 drops the SYN of a sixth simultaneous connection.
    request_queue_size = socket.SOMAXCONN


def make_server(host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Bound (port 0: a free one); call ``serve_forever``."""
    app = dynamodb_app(loopback_only=is_loopback(host))
    return _Server((host, port), _keep_alive_handler(app))


class LocalServer:
    """A local server process on 127.0.0.1; use as a context manager (``url`` then set)."""

    def __init__(self, *, keep_alive: bool = True, log: IO[bytes] | None = None) -> None:
        """``log``: a file for the server's output (discarded without one)."""
        self.url = ""
        self.keep_alive = keep_alive
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        if importlib.util.find_spec("moto") is None:
            raise ServerError(
                "the local server needs moto: install the dev extra "
                "(pip install -e '.[dev]', which `make demo` does) or pass --endpoint URL"
            )
        port = free_port()
        command = [sys.executable, "-m", __name__, "--port", str(port)]
        if not self.keep_alive:
            command.append("--close-connections")
        output = subprocess.DEVNULL if self._log is None else self._log
        self._process = subprocess.Popen(command, stdout=output, stderr=output)
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
                        f"the local moto server did not start on {self.url}"
                    ) from None
                time.sleep(0.1)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def exit_code(self) -> int | None:
        """The process's exit status once it has ended (negative: the signal); None before."""
        return None if self._process is None else self._process.poll()

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        """Idempotent."""
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Serve moto's DynamoDB (only) on 127.0.0.1, one request at a time."
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--close-connections", action="store_true")
    args = parser.parse_args(argv)
    if not args.close_connections:
        make_server("127.0.0.1", args.port).serve_forever()
    else:
        from werkzeug.serving import run_simple

        run_simple("127.0.0.1", args.port, dynamodb_app(), threaded=True)


if __name__ == "__main__":
    main()
