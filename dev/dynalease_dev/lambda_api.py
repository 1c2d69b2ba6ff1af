"""The HTTP side of the local Lambda APIs: a loopback server whose answers are JSON, and
the Extensions API's answers to ``extension/register`` as AWS documents them.

For :mod:`.lambda_plane` and for tests that script an Extensions API of their own, so
an extension meets the same answers from both; never in the layer.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FUNCTION_NAME",
    "FUNCTION_VERSION",
    "MANAGED_INSTANCES",
    "Answer",
    "ApiServer",
    "invoke_refused",
    "read_json",
    "registered",
    "unknown_extension",
]

#: The function every local sandbox runs, as the APIs name it.
FUNCTION_NAME = "dynalease-plane"
FUNCTION_VERSION = "$LATEST"
#: ``AWS_LAMBDA_INITIALIZATION_TYPE`` of a Lambda Managed Instances environment.
MANAGED_INSTANCES = "lambda-managed-instances"

#: One answer: status, headers, and the payload (sent as JSON unless it is bytes).
Answer = tuple[int, dict[str, str], Any]


def registered(identifier: str, *, handler: str) -> Answer:
    """``extension/register`` accepted: the extension's identifier and the function it serves."""
    function = {"functionName": FUNCTION_NAME, "functionVersion": FUNCTION_VERSION}
    return 200, {"Lambda-Extension-Identifier": identifier}, {**function, "handler": handler}


def unknown_extension(name: str) -> Answer:
    """``extension/register`` refused: no extension by that ``Lambda-Extension-Name``."""
    return 403, {}, {"errorType": "Extension.InvalidName", "errorMessage": name}


def invoke_refused(name: str) -> Answer:
    """``extension/register`` refused on Managed Instances: only ``SHUTDOWN`` may be asked for."""
    return (
        400,
        {},
        {
            "errorType": "Extension.InvalidEventType",
            "errorMessage": f"{name}: Managed Instances give extensions SHUTDOWN, not INVOKE",
        },
    )


def read_json(body: bytes) -> Any:
    """A request body as JSON; ``None`` when empty, the text itself when it is not JSON."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return body.decode("utf-8", "replace")


class ApiServer:
    """An HTTP/1.1 server on loopback that hands each GET and POST to ``answer``.

    ``answer(method, path, headers, body)`` returns an :data:`Answer`; raising
    :class:`ConnectionAbortedError` drops the connection unanswered (a caller
    blocked in a long poll while the server closes). ``address`` is
    ``host:port``, as ``AWS_LAMBDA_RUNTIME_API`` gives it.
    """

    def __init__(self, answer: Callable[[str, str, Any, bytes], Answer]) -> None:
        self._server = _Server(("127.0.0.1", 0), _handler_for(answer))
        self._server.daemon_threads = True
        self.address = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a killed process's socket
            super().handle_error(request, client_address)


def _handler_for(
    answer: Callable[[str, str, Any, bytes], Answer],
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                status, headers, payload = answer(method, self.path, self.headers, body)
            except ConnectionAbortedError:
                self.close_connection = True
                return
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
