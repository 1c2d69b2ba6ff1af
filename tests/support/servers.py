"""DynamoDB-compatible servers the integration tests start for themselves.

The moto server fixture lives in tests/conftest.py; this module starts the
second implementation, dynalite (Node, pinned in tests/support/node), so the
protocol tests can run against both. Locally a missing Node or a missing
``npm ci`` skips those tests; in CI (``CI=true``) it fails them, so a broken
setup cannot pass silently.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO, Any

import pytest

from dynalease import DynamoDBClient
from support.tables import fresh_lock_table

NODE_DIR = Path(__file__).resolve().parent / "node"
DYNALITE_CLI = NODE_DIR / "node_modules" / "dynalite" / "cli.js"
START_TIMEOUT_S = 30.0
REGION = "us-east-1"
#: Tries on a fresh port when the server dies at start (another process took the port).
START_ATTEMPTS = 3


def raw_dynamodb(endpoint: str) -> Any:
    """A plain boto3 DynamoDB client on ``endpoint`` with the test credentials, to create
    tables and read and write rows exactly as stored."""
    import boto3

    return boto3.client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def in_ci() -> bool:
    """True when running in CI, where missing test servers are failures, not skips."""
    return os.environ.get("CI", "").lower() == "true"


def missing_dynalite() -> str | None:
    """Why dynalite cannot start here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not on PATH (dynalite needs Node 20+)"
    if not DYNALITE_CLI.is_file():
        return (
            f"dynalite is not installed: run `npm ci` in {NODE_DIR} "
            "(`make system-deps` does it when npm is present)"
        )
    return None


def require_dynalite() -> None:
    """Skip (locally) or fail (in CI) when dynalite cannot start."""
    reason = missing_dynalite()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def _serving(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True  # any HTTP answer means the server is up
    except OSError:
        return False
    return True


def _wait_until_serving(process: subprocess.Popen[bytes], url: str, name: str) -> bool:
    """True once ``url`` answers; False if the process exited first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _serving(url):
        if process.poll() is not None:
            return False
        if time.monotonic() > deadline:
            process.kill()
            process.wait(10)
            raise RuntimeError(f"{name} did not answer on {url} within {START_TIMEOUT_S:g} s")
        time.sleep(0.05)
    return True


def _start_dynalite(log: IO[bytes]) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    command = ["node", str(DYNALITE_CLI), "--host", "127.0.0.1", "--port", str(port)]
    # Table status changes are instant: tests wait for nothing.
    command += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
    # stderr goes to a file, not a pipe: a pipe nobody drains would stall the server.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    return f"http://127.0.0.1:{port}", process


@contextmanager
def running_dynalite() -> Iterator[str]:
    """Start dynalite (in memory, tables ACTIVE at once) and yield its endpoint URL."""
    require_dynalite()
    with tempfile.TemporaryFile() as log:
        for _ in range(START_ATTEMPTS):
            url, process = _start_dynalite(log)
            if _wait_until_serving(process, url, "dynalite"):
                break
        else:
            log.seek(0)
            output = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"dynalite exited at start {START_ATTEMPTS} times:\n{output}")
        try:
            yield url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@dataclass(frozen=True)
class Emulator:
    """A running DynamoDB-compatible server and what it is known to do differently.

    The flags record behaviour measured against each server and described in
    docs/emulators.md; tests assert them, so a server upgrade that changes one
    fails loudly instead of silently changing what the protocol tests cover.
    """

    name: str
    endpoint: str
    #: Whether a failed condition with ReturnValuesOnConditionCheckFailure=ALL_OLD
    #: returns the current item, as DynamoDB does.
    returns_row_on_condition_failure: bool

    def client(self) -> DynamoDBClient:
        """A fresh dynalease client (its own observation cache) on this server."""
        return DynamoDBClient(
            region=REGION, endpoint_url=self.endpoint, access_key="testing", secret_key="testing"
        )

    @cached_property
    def raw(self) -> Any:
        """A plain botocore DynamoDB client, to read and write rows exactly as stored."""
        return raw_dynamodb(self.endpoint)

    def new_table(self) -> str:
        """Create a lock table with a unique name and return the name."""
        return fresh_lock_table(self.client(), "locks")

    def row(self, table: str, key: str) -> dict[str, Any] | None:
        """The stored row in AttributeValue form (strongly consistent), or None."""
        answer = self.raw.get_item(TableName=table, Key={"key": {"S": key}}, ConsistentRead=True)
        item: dict[str, Any] | None = answer.get("Item")
        return item
