"""Integration fixtures: a moto server in its own process, started by the tests.

The server is dynalease's local server (moto answering one request at a time,
with keep-alive connections): the threaded ``python -m moto.server`` undoes
acknowledged writes when a transaction is cancelled concurrently; see
``dynalease._tooling.local_server``.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator

import pytest

from dynalease import DynamoDBClient
from dynalease._tooling.local_server import LocalServer


@pytest.fixture(scope="session")
def endpoint() -> Iterator[str]:
    with LocalServer() as server:
        yield server.url


@pytest.fixture
def client(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> DynamoDBClient:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return DynamoDBClient(region="us-east-1", endpoint_url=endpoint)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """Under ``CI=true`` a skipped test fails: CI must run everything, so a missing tool shows."""
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and os.environ.get("CI", "").lower() == "true"
        and not hasattr(report, "wasxfail")
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"CI=true but this test would skip ({reason}); CI runs every test, so install "
            "what it needs (`make system-deps` installs faketime, dynalite and postgresql)"
        )
