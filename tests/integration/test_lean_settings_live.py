"""Settings the lean path must honour as botocore does, or hand to botocore.

Against the moto server: a small counting HTTP proxy (forwarding and CONNECT)
on loopback shows whether lock requests went through the proxy the environment
or a client's ``Config(proxies=...)`` names, and a TLS relay in front of moto
(a ``trustme`` authority) shows whether they were verified against the CA
bundle botocore would use (``REQUESTS_CA_BUNDLE``, ``AWS_CA_BUNDLE``,
``verify=False`` or ``verify=<path>`` on a client given to ``from_client``), on
both transports. Last, a request that fails puts no secret in an error or a log
line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import trustme
from botocore.config import Config

from dynalease import DynamoDBClient
from dynalease._transport.boto import BotoTransport
from dynalease._transport.lean import LeanTransport
from dynalease.exceptions import DynaleaseError, LockUnavailable, RequestFailedError
from dynalease.lock import SyncDistributedLock

pytestmark = pytest.mark.timeout(60)

_CLEARED = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "DYNALEASE_TRANSPORT",
    "REQUEST_METHOD",
)
#: Every spelling a test sets (the environment is compared case-sensitively on Linux).
_PROXY_NAMES = (
    "HTTP_PROXY",
    "http_proxy",
    "Http_Proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "Https_Proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
)


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Static keys, no config files, no proxy and no CA bundle unless a test sets one."""
    import os

    for name in list(os.environ):
        if name in _CLEARED or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def table(endpoint: str) -> str:
    name = f"settings-{uuid.uuid4().hex[:10]}"
    DynamoDBClient(region="us-east-1", endpoint_url=endpoint).sync_create_table(name, wait=True)
    return name


# --- loopback servers on one background event loop ----------------------------------


class _Loop:
    """An event loop on a daemon thread, for the servers below."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def close(self) -> None:
        """Stop the loop once the servers' connection handlers have ended.

        A client's kept-alive connection leaves its handler waiting for a request:
        cancelled here, it closes its side instead of being destroyed pending.
        """

        async def end_handlers() -> None:
            handlers = asyncio.all_tasks() - {asyncio.current_task()}
            for handler in handlers:
                handler.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        self.run(end_handlers())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def close_server(self, server: asyncio.Server) -> None:
        """Close ``server`` on its own loop: asyncio servers are not thread-safe.

        Closed from this thread, its close could race a connection ending on the
        loop (both wake the server's waiters, and the second finds none).
        """

        async def close() -> None:
            server.close()

        self.run(close())


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _both_ways(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    await asyncio.gather(_pipe(a[0], b[1]), _pipe(b[0], a[1]))


async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
    """One HTTP/1.1 message with a Content-Length body (or none): head, headers, body."""
    head = await reader.readuntil(b"\r\n\r\n")
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    assert "chunked" not in headers.get("transfer-encoding", ""), "the test proxy reads lengths"
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return head, headers, body


class CountingProxy:
    """An HTTP proxy on loopback: forwards absolute-form requests, tunnels CONNECT, counts."""

    def __init__(self, loop: _Loop) -> None:
        self._loop = loop
        self.forwarded: list[str] = []  # each forwarded request's X-Amz-Target
        self.tunnels: list[str] = []  # each CONNECT's authority
        self._server = loop.run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    @property
    def count(self) -> int:
        return len(self.forwarded) + len(self.tunnels)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head, headers, body = await _read_message(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ")
                if method == "CONNECT":
                    self.tunnels.append(target)
                    host, port = target.rsplit(":", 1)
                    upstream = await asyncio.open_connection(host, int(port))
                    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    await writer.drain()
                    await _both_ways((reader, writer), upstream)
                    return
                self.forwarded.append(headers.get("x-amz-target", target))
                parts = urlsplit(target)
                assert parts.hostname and parts.port, f"not an absolute-form target: {target}"
                up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port)
                lines = head.decode("latin-1").split("\r\n")[1:]
                kept = [
                    line
                    for line in lines
                    if line and not line.lower().startswith(("proxy-", "connection:"))
                ]
                request = "\r\n".join(
                    [f"{method} {parts.path or '/'} HTTP/1.1", *kept, "Connection: close", "", ""]
                )
                up_writer.write(request.encode("latin-1") + body)
                await up_writer.drain()
                answer_head, _, answer_body = await _read_message(up_reader)
                up_writer.close()
                writer.write(answer_head + answer_body)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def close(self) -> None:
        self._loop.close_server(self._server)


class TlsRelay:
    """TLS on loopback in front of the moto server, with a certificate from ``authority``."""

    def __init__(
        self,
        loop: _Loop,
        upstream: str,
        authority: trustme.CA,
        names: tuple[str, ...] = ("127.0.0.1", "localhost"),
    ) -> None:
        self._loop = loop
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert(*names).configure_cert(context)
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname, parts.port)
        self.handshakes = 0
        self._server = loop.run(asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context))
        self.url = f"https://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handshakes += 1  # asyncio calls this once the handshake succeeded
        host, port = self._upstream
        upstream = await asyncio.open_connection(host, port)
        await _both_ways((reader, writer), upstream)

    def close(self) -> None:
        self._loop.close_server(self._server)


@pytest.fixture
def loop() -> Iterator[_Loop]:
    made = _Loop()
    yield made
    made.close()


@pytest.fixture
def proxy(loop: _Loop) -> Iterator[CountingProxy]:
    made = CountingProxy(loop)
    yield made
    made.close()


@pytest.fixture
def authority(tmp_path: Path) -> tuple[trustme.CA, str]:
    made = trustme.CA()
    bundle = tmp_path / "ca.pem"
    made.cert_pem.write_to_path(str(bundle))
    return made, str(bundle)


@pytest.fixture
def tls(loop: _Loop, endpoint: str, authority: tuple[trustme.CA, str]) -> Iterator[TlsRelay]:
    made = TlsRelay(loop, endpoint, authority[0])
    yield made
    made.close()


def _lock_once(client: DynamoDBClient, table: str) -> None:
    with SyncDistributedLock(client, table=table, key=f"k-{uuid.uuid4().hex[:6]}"):
        pass


def _lean_chose(client: DynamoDBClient) -> bool:
    """True when lock requests went over the lean path's own connections."""
    transport = client._lock_store.transport
    return isinstance(transport, LeanTransport) and transport.route is not None


TRANSPORTS = pytest.mark.parametrize("transport", ["lean", "boto"])


# --- proxies ------------------------------------------------------------------------


@TRANSPORTS
@pytest.mark.parametrize("name", ["HTTP_PROXY", "http_proxy", "Http_Proxy"])
def test_lock_requests_go_through_the_environment_proxy_in_any_letter_case(
    endpoint: str,
    table: str,
    proxy: CountingProxy,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    transport: str,
) -> None:
    monkeypatch.setenv(name, proxy.url)
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport=transport)
    _lock_once(client, table)
    assert any(target.endswith(".PutItem") for target in proxy.forwarded), proxy.forwarded
    assert any(target.endswith(".DeleteItem") for target in proxy.forwarded), proxy.forwarded
    assert _lean_chose(client) == (transport == "lean")  # the lean path goes through it too


@TRANSPORTS
def test_an_https_proxy_in_any_letter_case_carries_lock_requests_to_a_tls_endpoint(
    tls: TlsRelay,
    table: str,
    proxy: CountingProxy,
    authority: tuple[trustme.CA, str],
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", authority[1])
    monkeypatch.setenv("Https_Proxy", proxy.url)
    client = DynamoDBClient(region="us-east-1", endpoint_url=tls.url, transport=transport)
    _lock_once(client, table)
    assert proxy.tunnels and all(t == tls.url.removeprefix("https://") for t in proxy.tunnels)
    assert _lean_chose(client) == (transport == "lean")


@TRANSPORTS
def test_a_proxy_for_the_other_scheme_or_excluded_by_no_proxy_is_not_used(
    endpoint: str,
    table: str,
    proxy: CountingProxy,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    monkeypatch.setenv("Https_Proxy", proxy.url)  # the endpoint is http://
    _lock_once(
        DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport=transport), table
    )
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("No_Proxy", "localhost, .example.com,127.0.0.1")
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint, transport=transport)
    _lock_once(client, table)
    assert proxy.count == 0  # botocore connects directly too
    assert _lean_chose(client) == (transport == "lean")


@TRANSPORTS
def test_a_proxy_in_the_botocore_config_of_a_client_given_to_from_client_is_used(
    endpoint: str, table: str, proxy: CountingProxy, transport: str
) -> None:
    mine = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=endpoint,
        config=Config(proxies={"http": proxy.url}),
    )
    client = DynamoDBClient.from_client(mine, transport=transport)
    _lock_once(client, table)
    assert any(target.endswith(".PutItem") for target in proxy.forwarded)
    assert _lean_chose(client) == (transport == "lean")


# --- CA bundles and verify ----------------------------------------------------------


@TRANSPORTS
@pytest.mark.parametrize("name", ["REQUESTS_CA_BUNDLE", "AWS_CA_BUNDLE"])
def test_lock_requests_over_tls_use_the_environment_ca_bundle(
    tls: TlsRelay,
    table: str,
    authority: tuple[trustme.CA, str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    transport: str,
) -> None:
    monkeypatch.setenv(name, authority[1])
    client = DynamoDBClient(region="us-east-1", endpoint_url=tls.url, transport=transport)
    _lock_once(client, table)
    assert tls.handshakes > 0
    assert _lean_chose(client) == (transport == "lean")


@TRANSPORTS
def test_without_the_ca_bundle_the_tls_endpoint_is_refused(
    tls: TlsRelay, table: str, transport: str
) -> None:
    client = DynamoDBClient(region="us-east-1", endpoint_url=tls.url, transport=transport)
    with pytest.raises(DynaleaseError):
        with SyncDistributedLock(client, table=table, key="refused", wait_timeout=1):
            pass
    assert tls.handshakes == 0


@TRANSPORTS
@pytest.mark.parametrize("wait", [0, 5])
def test_an_untrusted_certificate_is_named_with_how_to_trust_it_not_as_an_outage(
    tls: TlsRelay, table: str, transport: str, wait: float
) -> None:
    # wait_timeout=0 gives up when its one request failed; 5 s stops early, as for a
    # refused connection: either way the error names the TLS check, not an outage.
    client = DynamoDBClient(region="us-east-1", endpoint_url=tls.url, transport=transport)
    with pytest.raises(LockUnavailable) as raised:
        with SyncDistributedLock(client, table=table, key="untrusted", wait_timeout=wait):
            pass
    text = str(raised.value)
    assert "TLS verification failed" in text, text
    assert "unable to get local issuer certificate (CERTIFICATE_VERIFY_FAILED)" in text, text
    assert "AWS_CA_BUNDLE" in text and "verify=" in text, text
    assert "is an outage" not in text, text
    assert "refused the connection" not in text, text
    if wait:
        assert "stopped at once instead of waiting out its wait_timeout" in text, text
    cause = raised.value.__cause__
    assert isinstance(cause, RequestFailedError), repr(cause)
    assert cause.code == "SSLCertVerificationError"
    assert not cause.may_have_committed
    assert tls.handshakes == 0


@TRANSPORTS
def test_a_certificate_for_another_name_says_so_and_names_the_endpoint_setting(
    loop: _Loop,
    endpoint: str,
    table: str,
    authority: tuple[trustme.CA, str],
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    relay = TlsRelay(loop, endpoint, authority[0], names=("dynamodb.example.com",))
    try:
        monkeypatch.setenv("AWS_CA_BUNDLE", authority[1])  # the issuer is trusted
        client = DynamoDBClient(region="us-east-1", endpoint_url=relay.url, transport=transport)
        with pytest.raises(LockUnavailable) as raised:
            with SyncDistributedLock(client, table=table, key="misnamed", wait_timeout=5):
                pass
    finally:
        relay.close()
    text = str(raised.value)
    assert "TLS verification failed" in text, text
    assert "does not name the host in the endpoint URL" in text, text
    assert "endpoint_url" in text and "AWS_ENDPOINT_URL_DYNAMODB" in text, text
    assert "refused the connection" not in text, text
    cause = raised.value.__cause__
    assert isinstance(cause, RequestFailedError) and not cause.may_have_committed


@TRANSPORTS
@pytest.mark.parametrize("how", ["verify=False", "verify=<CA path>"])
def test_a_client_given_to_from_client_keeps_its_verify_setting_for_lock_requests(
    tls: TlsRelay,
    table: str,
    authority: tuple[trustme.CA, str],
    how: str,
    transport: str,
) -> None:
    verify: bool | str = False if how == "verify=False" else authority[1]
    mine = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=tls.url, verify=verify)
    client = DynamoDBClient.from_client(mine, transport=transport)
    _lock_once(client, table)
    assert tls.handshakes > 0
    assert _lean_chose(client) == (transport == "lean")
    if transport == "boto":
        assert isinstance(client._lock_store.transport, BotoTransport)


# --- secrets ------------------------------------------------------------------------

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYsecretEXAMPLE"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLEsessionTOKENvalue"


@TRANSPORTS
@pytest.mark.parametrize("source", ["arguments", "environment"])
def test_a_failing_lock_request_shows_no_secret_in_errors_or_log_lines(
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    transport: str,
    refusing_url: str,
) -> None:
    keys: dict[str, Any] = {}
    if source == "arguments":
        keys = {"access_key": "AKIAIOSFODNN7EXAMPLE", "secret_key": SECRET, "session_token": TOKEN}
    else:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG, logger="dynalease")
    client = DynamoDBClient(
        region="us-east-1", endpoint_url=refusing_url, transport=transport, **keys
    )
    with pytest.raises(DynaleaseError) as raised:
        with SyncDistributedLock(client, table="locks", key="k", wait_timeout=0.5):
            pass
    shown = [
        caplog.text,
        "".join(traceback.format_exception(raised.value)),
        repr(raised.value),
        repr(client._lock_store.transport),
        repr(vars(client._lock_store.transport)),
    ]
    transport_object = client._lock_store.transport
    if isinstance(transport_object, LeanTransport):
        shown.append(repr(transport_object._direct))
        if transport_object._route is not None:
            shown.append(repr(vars(transport_object._route)))
            shown.append(repr(transport_object._route.credentials))
    for text in shown:
        assert SECRET not in text and TOKEN not in text, text
