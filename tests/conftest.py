"""Integration fixtures: a moto server in its own process, started by the tests.

The server is dynalease's local server (moto answering one request at a time,
with keep-alive connections): the threaded ``python -m moto.server`` undoes
acknowledged writes when a transaction is cancelled concurrently; see
``dynalease._tooling.local_server``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from dynalease import DynamoDBClient
from dynalease._tooling.local_server import LocalServer

#: The session's moto server and the file its output goes to, while it is meant to run.
_SERVER = pytest.StashKey[tuple[LocalServer, Path]]()


@pytest.fixture(scope="session")
def endpoint(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log_path = tmp_path_factory.mktemp("moto-server") / "output.log"
    with log_path.open("wb") as log, LocalServer(log=log) as server:
        request.config.stash[_SERVER] = (server, log_path)
        yield server.url
        if _SERVER in request.config.stash:
            del request.config.stash[_SERVER]


@pytest.fixture(autouse=True)
def _moto_server_outlives_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test during which the session's moto server ended, with its status and output.

    Otherwise that shows only as "Connection refused" in this test and every later one.
    """
    yield
    found = request.config.stash.get(_SERVER, None)
    if found is None or found[0].exit_code is None:
        return
    server, log_path = found
    del request.config.stash[_SERVER]  # reported once: the later tests fail on their own
    output = log_path.read_text(errors="replace")[-4000:] or "(none)"
    pytest.fail(
        f"the session's moto server at {server.url} ended during this test "
        f"(exit status {server.exit_code}); its last output:\n{output}",
        pytrace=False,
    )


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` where every connection is refused for the whole test.

    The port is bound and never listened on, so no server started meanwhile (another
    test, another xdist worker) can take it: a port that was merely free a moment ago
    once went to a server that never answered, and a test of refused connections
    waited out its whole ``wait_timeout``.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


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
            f"CI=true but this test would skip ({reason}); CI runs every test, so install what "
            "it needs (`make system-deps` installs faketime, dynalite, postgresql and chromium)"
        )
