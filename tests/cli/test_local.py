"""``dynalease local``: a real process, its printed environment used as printed."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.cli_runner import CLI, cli_env, spawn_cli_without_moto

from dynalease._tooling.local_server import LocalServer
from dynalease.cli.common import NEEDS_MOTO

_EXPORT = re.compile(r"^export (\w+)=(\S+)$")
_CLIENT_SCRIPT = """
import sys
from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock

client = DynamoDBClient()  # the environment only: endpoint, credentials, Region
client.sync_create_table("tried-locally", partition_key=("key", "S"), wait=True)
with SyncDistributedLock(client, table="tried-locally", key="k", wait_timeout=0) as lease:
    print("held", lease.owner != "", client.endpoint_url)
"""


def _user_env(**exports: str) -> dict[str, str]:
    """A shell with none of the test suite's AWS settings, plus the printed exports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env.update(exports)
    return env


def _start(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [*CLI, "local", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("# (then"):
            return process, lines
    process.kill()
    _, err = process.communicate()
    pytest.fail(f"dynalease local printed {lines!r}, then exited; stderr: {err}")


def test_local_prints_an_environment_that_reaches_it_and_stops_on_sigterm() -> None:
    process, lines = _start("--port", "0")
    try:
        exports = dict(m.groups() for line in lines if (m := _EXPORT.match(line)))
        endpoint = exports["AWS_ENDPOINT_URL_DYNAMODB"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", endpoint)
        assert not endpoint.endswith(":0")
        assert set(exports) == {
            "AWS_ENDPOINT_URL_DYNAMODB",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
        }
        assert any(f"--endpoint {endpoint}" in line for line in lines)
        used = subprocess.run(
            [sys.executable, "-c", _CLIENT_SCRIPT],
            env=_user_env(**exports),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert used.returncode == 0, used.stderr
        assert used.stdout.split() == ["held", "True", "None"]
        # The CLI over the --endpoint form, with the printed credentials and Region.
        flagged = {k: v for k, v in exports.items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}
        inspected = subprocess.run(
            [*CLI, "inspect", "--table", "tried-locally", "--endpoint", endpoint],
            env=_user_env(**flagged),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert inspected.returncode == 0, inspected.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert code == 0


def test_local_with_table_serves_those_lock_tables_before_printing_the_exports() -> None:
    process, lines = _start("--port", "0", "--table", "locks", "--table", "other-locks")
    try:
        exports = dict(m.groups() for line in lines if (m := _EXPORT.match(line)))
        assert "# lock table 'locks' created (partition key 'key', S)" in lines
        for table in ("locks", "other-locks"):
            checked = subprocess.run(
                [*CLI, "doctor", "--table", table],
                env=_user_env(**exports),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert checked.returncode == 0, checked.stdout + checked.stderr
            assert "verdict: usable as a dynalease lock table" in checked.stdout
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert code == 0


def test_local_reports_a_taken_port_as_a_flag_to_change() -> None:
    first, lines = _start("--port", "0")
    try:
        endpoint = next(m.group(2) for line in lines if (m := _EXPORT.match(line)))
        port = endpoint.rsplit(":", 1)[1]
        second = subprocess.run(
            [*CLI, "local", "--port", port],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        first.terminate()
        first.wait(30)
    assert second.returncode == 2
    assert f"dynalease local: error: cannot listen on 127.0.0.1:{port}" in second.stderr
    assert "--port 0" in second.stderr


def test_local_without_moto_names_the_extra() -> None:
    result = spawn_cli_without_moto("local", "--port", "0")
    assert result.code == 1
    assert result.err.strip().splitlines() == [f"dynalease local: error: {NEEDS_MOTO}"]
    assert result.out == ""


@pytest.mark.parametrize(("port", "said"), [("70000", "from 0 to 65535"), ("x", "a port number")])
def test_local_rejects_a_bad_port(port: str, said: str) -> None:
    result = subprocess.run(
        [*CLI, "local", "--port", port], env=cli_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--port" in result.stderr and said in result.stderr


def test_the_install_line_pins_the_moto_of_the_local_extra() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (pinned,) = project["project"]["optional-dependencies"]["local"]
    assert f"pip install '{pinned}'" in NEEDS_MOTO


def _request(
    url: str, method: str = "GET", headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one request, HTTP errors included."""
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def _dynamodb(endpoint: str, operation: str, params: dict[str, object]) -> dict[str, object]:
    headers = {
        "X-Amz-Target": f"DynamoDB_20120810.{operation}",
        "Content-Type": "application/x-amz-json-1.0",
        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/"
        "aws4_request, SignedHeaders=host, Signature=0",
    }
    status, _, body = _request(endpoint + "/", "POST", headers, json.dumps(params).encode())
    assert status == 200, body
    answer: dict[str, object] = json.loads(body)
    return answer


def test_local_serves_dynamodb_only_and_nothing_a_web_page_can_reach() -> None:
    process, lines = _start("--port", "0")
    try:
        endpoint = next(m.group(2) for line in lines if (m := _EXPORT.match(line)))
        _dynamodb(
            endpoint,
            "CreateTable",
            {
                "TableName": "kept",
                "KeySchema": [{"AttributeName": "key", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "key", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
        evil = {"Origin": "https://evil.example"}
        answers = {
            # A cross-site "simple" POST reset every table; a page could read moto's state.
            "reset from a page": _request(endpoint + "/moto-api/reset", "POST", evil, b"x"),
            "state from a page": _request(endpoint + "/moto-api/data.json", "GET", evil),
            "preflight": _request(endpoint + "/", "OPTIONS", evil),
            "DNS rebinding": _request(endpoint + "/", "GET", {"Host": "evil.example:8000"}),
            # Other moto services: STS, S3, moto's own API.
            "sts": _request(
                endpoint + "/", "POST", {}, b"Action=GetCallerIdentity&Version=2011-06-15"
            ),
            "s3": _request(endpoint + "/some-bucket", "PUT"),
            "moto-api": _request(endpoint + "/moto-api/data.json"),
        }
        for what, (status, headers, _) in answers.items():
            assert status in (400, 403), what
            assert not any(name.startswith("access-control-") for name in headers), what
        assert _dynamodb(endpoint, "ListTables", {})["TableNames"] == ["kept"]
    finally:
        process.terminate()
        process.wait(30)


def test_local_warns_about_a_host_that_is_not_loopback() -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the bind fails after the warning,
    # and nothing is exposed on a network by the test.
    result = subprocess.run(
        [*CLI, "local", "--host", "192.0.2.1", "--port", "0"],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    warning = result.stderr.splitlines()[0]
    assert warning.startswith("# dynalease local: WARNING: --host 192.0.2.1 is not a loopback")
    assert "--host 127.0.0.1" in warning


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"])
def test_loopback_hosts_get_no_warning(host: str) -> None:
    from dynalease._tooling.local_server import is_loopback

    assert is_loopback(host)
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("10.0.0.1")


@pytest.mark.parametrize("keep_alive", [True, False], ids=["keep-alive", "close-connections"])
def test_the_test_suites_local_server_keeps_its_output_and_says_how_it_ended(
    tmp_path: Path, keep_alive: bool
) -> None:
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log, LocalServer(keep_alive=keep_alive, log=log) as server:
        assert server.exit_code is None and server.pid is not None
        host, port = server.url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", "/")
        answer = connection.getresponse()
        answer.read()
        assert answer.will_close is not keep_alive
        connection.close()
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while server.exit_code is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.exit_code == -signal.SIGKILL
    if not keep_alive:  # werkzeug's server announces itself on its output
        assert "Running on http://127.0.0.1" in log_path.read_text()
