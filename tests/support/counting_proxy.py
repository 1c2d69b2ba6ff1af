"""An HTTP proxy on loopback that counts the DynamoDB operations passing through it.

For the Lambda tests (a path that must make no request at all, or exactly a
create and a delete) and the recovery benchmark (the requests of a normal
invocation, with and without the extension, which imports it as
``tests.support.counting_proxy``); never imported by the library.
"""

from __future__ import annotations

import collections
import http.client
import http.server
import json
import threading
import urllib.parse
from typing import Any

__all__ = ["CountingProxy", "authorized_actions"]

#: Answer headers the proxy sets itself: it sends the whole body with its length.
_FRAMING = ("content-length", "connection", "transfer-encoding")


class CountingProxy:
    """Forwards each POST unchanged to ``upstream`` and counts it by its ``X-Amz-Target``.

    ``counts`` maps operation names (``PutItem``, ``GetItem``...) to how many
    passed through, so a caller can prove that a code path made no request at all;
    ``actions`` the same requests as the IAM actions and tables they need
    (:func:`authorized_actions`)::

        with CountingProxy("http://127.0.0.1:5000") as proxy:
            client = DynamoDBClient(region="us-east-1", endpoint_url=proxy.url)
            ...
            assert proxy.counts["PutItem"] == 1
    """

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname is None:
            raise ValueError(f"upstream must be an http://host:port URL, not {upstream!r}")
        host: str = parsed.hostname
        port = parsed.port
        self.counts: collections.Counter[str] = collections.Counter()
        self.actions: collections.Counter[tuple[str, str]] = collections.Counter()
        self._guard = threading.Lock()  # the server answers each request on its own thread
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                operation = target.rpartition(".")[2]
                needs = authorized_actions(operation, json.loads(body or b"{}"))
                with proxy._guard:
                    proxy.counts[operation] += 1
                    proxy.actions.update(needs)
                onward = http.client.HTTPConnection(host, port, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                onward.request("POST", self.path, body=body, headers=headers)
                answer = onward.getresponse()
                payload = answer.read()
                onward.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in _FRAMING:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def total(self) -> int:
        """How many requests passed through since the last :meth:`reset`."""
        with self._guard:
            return sum(self.counts.values())

    def reset(self) -> None:
        """Start counting from zero."""
        with self._guard:
            self.counts.clear()
            self.actions.clear()

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: A transaction's items are authorized by the action of each item (DynamoDB's
#: "Using IAM with DynamoDB transactions"); the transaction itself is no IAM action.
_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def authorized_actions(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(IAM action, table)`` pairs one request needs: one per table of a batch read,
    one per item of a transaction, else the operation on its ``TableName``."""
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            (f"dynamodb:{_ITEM_ACTIONS[kind]}", str(action["TableName"]))
            for item in params.get("TransactItems", [])
            for kind, action in item.items()
        ]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{operation}", str(table)) for table in params.get("RequestItems", {})]
    return [(f"dynamodb:{operation}", str(params.get("TableName", "")))]
