"""Fixtures for the Lambda tests: AWS settings for the moto server, lock tables,
a request-counting proxy, and the example handlers loaded as Lambda loads them."""

from __future__ import annotations

import collections
import http.client
import http.server
import json
import pathlib
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dynalease import DynamoDBClient
from dynalease._lambda.invoke import load_handler
from dynalease.constants import ENV_TABLE

ROOT = pathlib.Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
EXAMPLES = ROOT / "examples" / "lambda"


class CountingProxy:
    """An HTTP proxy in front of the moto server that counts DynamoDB operations.

    Requests are forwarded unchanged; ``counts`` maps operation names
    (``PutItem``, ``GetItem``...) to how many passed through, so a test can
    prove that a code path made no request at all.
    """

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.counts: collections.Counter[str] = collections.Counter()
        self._guard = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                with proxy._guard:
                    proxy.counts[target.rpartition(".")[2]] += 1
                upstream_conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream_conn.request("POST", self.path, body=body, headers=headers)
                answer = upstream_conn.getresponse()
                payload = answer.read()
                upstream_conn.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding"):
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
        with self._guard:
            return sum(self.counts.values())

    def reset(self) -> None:
        with self._guard:
            self.counts.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="session")
def counting_proxy(endpoint: str) -> Iterator[CountingProxy]:
    proxy = CountingProxy(endpoint)
    yield proxy
    proxy.close()


@pytest.fixture
def aws_env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The standard AWS settings pointing at the moto server, as Lambda would set them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "DynaleaseTests")
    return endpoint


def _client_for(url: str) -> DynamoDBClient:
    return DynamoDBClient(
        region="us-east-1", endpoint_url=url, access_key="testing", secret_key="testing"
    )


@pytest.fixture(scope="session")
def other_client(endpoint: str) -> DynamoDBClient:
    """A client standing for another service: creates tables and holds locks elsewhere.

    One for the session (building a client costs a few hundred ms); tests use
    fresh tables and keys, so nothing carries over between them.
    """
    return _client_for(endpoint)


@pytest.fixture
def lock_table(aws_env: str, other_client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh lock table, also set as DYNALEASE_TABLE."""
    name = f"lambda-locks-{uuid.uuid4().hex[:12]}"
    other_client.sync_create_table(name, partition_key=("key", "S"), wait=True)
    monkeypatch.setenv(ENV_TABLE, name)
    return name


@pytest.fixture(scope="session")
def _counted_session_client(counting_proxy: CountingProxy) -> DynamoDBClient:
    return _client_for(counting_proxy.url)


@pytest.fixture
def counted_client(
    counting_proxy: CountingProxy, _counted_session_client: DynamoDBClient, aws_env: str
) -> DynamoDBClient:
    """A client whose requests go through the counting proxy (counts start at 0)."""
    counting_proxy.reset()
    return _counted_session_client


@pytest.fixture
def example() -> Callable[[str], Callable[..., Any]]:
    """Load ``examples/lambda/<name>.py``'s ``handler`` the way Lambda imports it."""

    def load(name: str) -> Callable[..., Any]:
        return load_handler(f"{EXAMPLES / name}.py:handler")

    return load


@pytest.fixture
def load_event() -> Callable[[str], Any]:
    """Read a sample event from events/, fresh for each call (handlers may mutate events)."""

    def load(name: str) -> Any:
        return json.loads((EVENTS / f"{name}.json").read_text())

    return load
