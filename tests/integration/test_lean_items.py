"""The item and table helpers on the lean path: no botocore client, botocore's retry rule.

A fresh process against the moto server shows a script's helpers (table check
and creation, items, a transaction) work and never load botocore's client
machinery. A small canned-answer HTTP server shows the retry rule: throttling
and 5xx are retried up to ``max_retries``, a conditional write whose outcome is
unknown is not resent, and what this path does not read (a ``Scan``, a retry
mode from the environment) goes through botocore.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dynalease import DynamoDBClient
from dynalease._engine.store import Request
from dynalease._transport import items as lean_items
from dynalease._transport.boto import BotoTransport
from dynalease._transport.items import ItemTransport
from dynalease.exceptions import RequestFailedError, ThrottledError

pytestmark = pytest.mark.timeout(60)

_SCRIPT = """
import json, sys
from dynalease import DynamoDBClient, SyncDistributedLock, SyncTransaction
client = DynamoDBClient(endpoint_url=sys.argv[1])
table, items = sys.argv[2], sys.argv[3]
seen = {"before": client.sync_table_exists(table)}
client.sync_create_table(table, partition_key=("key", "S"), wait=True)
client.sync_create_table(items, partition_key=("job_id", "S"), wait=True)
seen["after"] = client.sync_table_exists(table)
client.sync_put_item(items, {"job_id": "a", "n": 3, "blob": b"\\x00\\xff", "tags": {"x", "y"}})
seen["item"] = client.sync_get_item(items, {"job_id": "a"}, consistent_read=True)
with SyncDistributedLock(client, table=table, key="k") as lease:
    with SyncTransaction(client) as transaction:
        lease.check_in(transaction)
        transaction.put(items, {"job_id": "b", "summary": "done"})
seen["b"] = client.sync_get_item(items, {"job_id": "b"}, consistent_read=True)
client.sync_delete_item(items, {"job_id": "a"})
seen["gone"] = client.sync_get_item(items, {"job_id": "a"}, consistent_read=True)
seen["botocore_client"] = "botocore.client" in sys.modules
seen["boto3"] = "boto3" in sys.modules
print(json.dumps(seen, default=lambda v: sorted(v) if isinstance(v, set) else v.hex()))
"""


def _lean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DYNALEASE_"))}
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE="/nonexistent/dynalease-config",
    )
    env.update(extra)
    return env


def test_a_scripts_helpers_work_without_botocores_client(endpoint: str) -> None:
    suffix = os.urandom(4).hex()
    table, items = f"lean-locks-{suffix}", f"lean-items-{suffix}"
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, endpoint, table, items],
        env=_lean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] is False and seen["after"] is True
    assert seen["item"] == {"job_id": "a", "n": 3, "blob": "00ff", "tags": ["x", "y"]}
    assert seen["b"] == {"job_id": "b", "summary": "done"}
    assert seen["gone"] is None
    assert seen["botocore_client"] is False and seen["boto3"] is False


class _Canned:
    """A loopback HTTP server answering each request with the next canned answer."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.answers = list(answers)
        self.targets: list[str] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                canned.targets.append(self.headers["X-Amz-Target"].rsplit(".", 1)[-1])
                status, body = canned.answers.pop(0) if canned.answers else (200, {})
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


_THROTTLED = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException"})
_BROKEN = (500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError"})
_TABLE = (200, {"Table": {"TableName": "t", "TableStatus": "ACTIVE"}})


@pytest.fixture
def lean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("AWS_", "DYNALEASE_")):
            monkeypatch.delenv(name)
    for name, value in _lean_env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(lean_items, "backoff_s", lambda attempt: 0.001)
    yield


def _client(canned: _Canned, **options: Any) -> DynamoDBClient:
    client = DynamoDBClient(endpoint_url=canned.url, **options)
    assert isinstance(client._items, ItemTransport)
    return client


@pytest.mark.usefixtures("lean_env")
def test_throttling_is_retried_up_to_max_retries() -> None:
    canned = _Canned([_THROTTLED, _THROTTLED, _TABLE])
    try:
        assert _client(canned, max_retries=2).sync_table_exists("ttt") is True
        assert canned.targets == ["DescribeTable"] * 3
        canned.answers = [_THROTTLED, _THROTTLED, _TABLE]
        canned.targets.clear()
        with pytest.raises(ThrottledError):
            _client(canned, max_retries=1).sync_table_exists("ttt")
        assert canned.targets == ["DescribeTable"] * 2
    finally:
        canned.close()


@pytest.mark.usefixtures("lean_env")
def test_an_unknown_outcome_is_resent_only_when_that_is_safe() -> None:
    canned = _Canned([_BROKEN, (200, {"Item": {"job_id": {"S": "a"}}})])
    try:
        client = _client(canned)
        assert client.sync_get_item("items", {"job_id": "a"}) == {"job_id": "a"}
        assert canned.targets == ["GetItem", "GetItem"]
        canned.targets.clear()
        canned.answers = [_BROKEN, (200, {})]
        conditional = {"TableName": "items", "Item": {"job_id": {"S": "a"}}}
        conditional["ConditionExpression"] = "attribute_not_exists(job_id)"  # type: ignore[assignment]
        with pytest.raises(RequestFailedError) as failed:
            client._items.handle(Request("PutItem", conditional))
        assert failed.value.may_have_committed and canned.targets == ["PutItem"]
        canned.targets.clear()
        canned.answers = [_BROKEN, (200, {})]
        client.sync_put_item("items", {"job_id": "a"})  # an unconditional put is resent
        assert canned.targets == ["PutItem", "PutItem"]
    finally:
        canned.close()


@pytest.mark.usefixtures("lean_env")
def test_what_the_lean_path_does_not_read_goes_through_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    canned = _Canned([(200, {"Items": [], "Count": 0, "ScannedCount": 0})])
    try:
        client = _client(canned)
        items = client._items
        assert isinstance(items, ItemTransport)
        assert items.boto._client is None
        items.handle(Request("Scan", {"TableName": "ttt"}))
        assert items.boto._client is not None and canned.targets == ["Scan"]
        monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
        assert isinstance(DynamoDBClient(endpoint_url=canned.url)._items, BotoTransport)
    finally:
        canned.close()
