"""The lean request path against the moto server and against small real HTTP servers.

moto answers every request and closes the connection (werkzeug); the servers
started here keep connections alive, stall, reset or answer 500, so reuse,
timeouts and failures are exercised over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.credentials import RefreshableCredentials
from support.lean_paths import HOW, botocore_client, sender_for
from support.tls import localhost_tls

from dynalease import DynamoDBClient
from dynalease._engine.protocol import LockRow, new_token
from dynalease._engine.shapes import condition_item
from dynalease._engine.store import ConditionFailed, LockStore, Request, TimedOut, late_answer
from dynalease._transport.boto import BotoTransport
from dynalease._transport.bounded import Bounded
from dynalease._transport.lean import LeanTransport
from dynalease.constants import ENV_TRANSPORT
from dynalease.exceptions import (
    AccessDeniedError,
    LockNotAcquired,
    RequestFailedError,
    TableNotFoundError,
    TransactionCanceledException,
)
from dynalease.lock import SyncDistributedLock

pytestmark = pytest.mark.timeout(60)


def _lean(url: str, config: Config | None = None, verify: str | None = None) -> LeanTransport:
    return LeanTransport(lambda: botocore_client(url, config, verify))


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    name = f"lean-{uuid.uuid4().hex[:10]}"
    client.sync_create_table(name, wait=True)
    return name


def _row(key: str) -> LockRow:
    return LockRow(key, new_token(), new_token(), 3000)


def test_every_store_request_works_on_the_lean_path(endpoint: str, table: str) -> None:
    async def scenario() -> None:
        transport = _lean(endpoint)
        store = LockStore(transport)
        row = _row("job")
        created = await store.write(table, row)
        assert created.capacity > 0
        assert (await store.read(table, "job")).item == row.to_item()
        with pytest.raises(ConditionFailed) as taken:
            await store.write(table, _row("job"))
        assert taken.value.item == row.to_item()  # ALL_OLD on the failed condition
        newer = LockRow("job", new_token(), new_token(), 3000)
        await store.write(table, newer, row)
        renewed = new_token()
        await store.renew_rows(table, ("job",), newer.owner, newer.version, renewed)
        check = condition_item(table, "job", newer.owner)
        await transport.handle_async(Request("TransactWriteItems", {"TransactItems": [check]}))
        with pytest.raises(TransactionCanceledException) as cancelled:
            await transport.handle_async(
                Request(
                    "TransactWriteItems",
                    {"TransactItems": [condition_item(table, "job", "someone-else")]},
                )
            )
        assert cancelled.value.reasons[0]["Code"] == "ConditionalCheckFailed"
        await store.delete(table, "job", newer.owner)
        assert (await store.read(table, "job")).item is None
        assert transport.fallback_reason is None
        assert transport.route is not None

    asyncio.run(scenario())


def test_requests_sent_together_before_the_client_exists_make_it_on_one_thread(
    endpoint: str,
) -> None:
    made: list[str] = []

    def factory() -> Any:
        made.append(threading.current_thread().name)
        return botocore_client(endpoint)

    async def scenario() -> None:
        store = LockStore(LeanTransport(factory))
        missing = f"missing-{uuid.uuid4().hex[:8]}"
        results = await asyncio.gather(
            *(store.read(missing, f"k{i}") for i in range(20)), return_exceptions=True
        )
        assert all(isinstance(result, TableNotFoundError) for result in results)

    asyncio.run(scenario())
    assert len(made) == 1, made


def test_lean_and_botocore_paths_report_the_same_failed_condition(
    endpoint: str, table: str
) -> None:
    async def failed_item(transport: Any, key: str) -> Any:
        store = LockStore(transport)
        row = _row(key)
        await store.write(table, row)
        try:
            await store.renew_rows(table, (key,), "not-the-owner", row.version, new_token())
        except ConditionFailed as failure:
            return failure.item, row.to_item()
        raise AssertionError("the renewal of someone else's row was applied")

    async def scenario() -> None:
        lean_item, lean_row = await failed_item(_lean(endpoint), "a")
        boto = BotoTransport(lambda: botocore_client(endpoint))
        boto_item, boto_row = await failed_item(boto, "b")
        assert lean_item == lean_row
        assert boto_item == boto_row

    asyncio.run(scenario())


def test_a_missing_table_is_reported_as_table_not_found(endpoint: str) -> None:
    async def scenario() -> None:
        store = LockStore(_lean(endpoint))
        with pytest.raises(TableNotFoundError, match="does not exist"):
            await store.read(f"missing-{uuid.uuid4().hex[:8]}", "k")

    asyncio.run(scenario())


# --- small real servers ----------------------------------------------------------


class _Server:
    """An HTTP server on the test's loop whose behaviour each test chooses."""

    def __init__(
        self,
        respond: Callable[[_Server, bytes, asyncio.StreamWriter], Awaitable[bool]],
        tls: ssl.SSLContext | None = None,
    ):
        self.respond = respond
        self.tls = tls
        self.connections = 0
        self.heads: list[bytes] = []
        self.bodies: list[int] = []  # the length of each request body read
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> _Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        # By name under TLS: the test certificate is for "localhost".
        self.url = f"https://localhost:{port}" if self.tls else f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                self.heads.append(head)
                self.bodies.append(length)
                if not await self.respond(self, head, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _keep_alive_ok(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    return True


async def _close_after_answering(
    server: _Server, head: bytes, writer: asyncio.StreamWriter
) -> bool:
    writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
    return False


def _get(key: str = "k") -> dict[str, Any]:
    return {"TableName": "locks", "Key": {"key": {"S": key}}}


@HOW
def test_keep_alive_connections_are_reused_for_sequential_requests(how: str) -> None:
    async def scenario() -> None:
        async with _Server(_keep_alive_ok) as server:
            transport = _lean(server.url)
            send = sender_for(transport, how)
            for index in range(5):
                assert await send("GetItem", _get(str(index))) == {
                    "ResponseMetadata": {"HTTPStatusCode": 200}
                }
            assert server.connections == 1

    asyncio.run(scenario())


@HOW
def test_an_answer_saying_connection_close_is_followed_by_a_new_connection(how: str) -> None:
    async def close_each(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        # As werkzeug's moto.server does; the socket stays open a moment longer.
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        await asyncio.sleep(0.2)
        return False

    async def scenario() -> None:
        async with _Server(close_each) as server:
            transport = _lean(server.url)
            send = sender_for(transport, how)
            for _ in range(3):  # writes: a reused, closing connection would fail one
                await send("PutItem", {"TableName": "locks", "Item": {}})
            assert server.connections == 3

    asyncio.run(scenario())


@HOW
def test_a_request_that_gets_no_answer_times_out_as_may_have_committed(how: str) -> None:
    async def stall(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(5)
        return False

    async def scenario() -> None:
        async with _Server(stall) as server:
            transport = _lean(server.url, Config(connect_timeout=1, read_timeout=0.3))
            send = sender_for(transport, how, timeout=0.3)
            with pytest.raises(RequestFailedError) as raised:
                await send("PutItem", {"TableName": "locks", "Item": {}})
            assert raised.value.may_have_committed
            assert raised.value.code == "ReadTimeoutError"

    asyncio.run(scenario())


@HOW
def test_a_connection_reset_after_the_request_may_have_committed(how: str) -> None:
    async def reset(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.transport.abort()
        return False

    async def scenario() -> None:
        async with _Server(reset) as server:
            send = sender_for(_lean(server.url), how)
            with pytest.raises(RequestFailedError) as raised:
                await send("DeleteItem", {"TableName": "locks", "Key": {}})
            assert raised.value.may_have_committed

    asyncio.run(scenario())


@HOW
def test_a_refused_connection_was_never_applied(how: str) -> None:
    async def scenario() -> None:
        async with _Server(_keep_alive_ok) as server:
            url = server.url
        send = sender_for(_lean(url), how)  # the server is gone: nothing listens on the port
        with pytest.raises(RequestFailedError) as raised:
            await send("PutItem", {"TableName": "locks", "Item": {}})
        assert not raised.value.may_have_committed

    asyncio.run(scenario())


@contextlib.contextmanager
def _full_listener() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A listener whose queue is full: the handshake of the next connection stalls.

    Yields the listener and the connection filling its queue.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        with socket.create_connection(listener.getsockname()) as queued:
            yield listener, queued


@HOW
def test_a_connect_that_never_completes_times_out_and_was_never_applied(how: str) -> None:
    async def scenario(port: int) -> None:
        transport = _lean(f"http://127.0.0.1:{port}", Config(connect_timeout=0.3, read_timeout=1))
        started = asyncio.get_running_loop().time()
        with pytest.raises(RequestFailedError) as raised:
            await sender_for(transport, how)("PutItem", {"TableName": "locks", "Item": {}})
        assert not raised.value.may_have_committed
        assert raised.value.code == "ConnectTimeoutError"
        # The 0.3 s timeout's, not the OS's (its SYN retries last about two minutes): the
        # bound is generous for a loaded two-core machine and still far from those.
        assert asyncio.get_running_loop().time() - started < 30

    with _full_listener() as (listener, _):
        asyncio.run(scenario(listener.getsockname()[1]))


@HOW
def test_a_connect_that_completes_later_carries_the_request(how: str) -> None:
    # As on a real network, the handshake is not over when connect returns. Here
    # the queue has room once the queued connection is taken, and the client's
    # SYN is answered when it is sent again (about a second later).
    def serve(listener: socket.socket, queued: socket.socket) -> None:
        time.sleep(0.3)
        listener.accept()[0].close()
        queued.close()
        connection, _ = listener.accept()
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

    async def scenario(port: int) -> None:
        transport = _lean(f"http://127.0.0.1:{port}", Config(connect_timeout=10))
        assert await sender_for(transport, how)("GetItem", _get()) == {
            "ResponseMetadata": {"HTTPStatusCode": 200}
        }

    with _full_listener() as (listener, queued):
        server = threading.Thread(target=serve, args=(listener, queued), daemon=True)
        server.start()
        asyncio.run(scenario(listener.getsockname()[1]))
        server.join(10)


def _tls_for(scheme: str, directory: Any) -> tuple[ssl.SSLContext | None, str | None]:
    """For ``https``: the test server's TLS context and the CA file that verifies it."""
    if scheme != "https":
        return None, None
    tls, bundle = localhost_tls(directory)
    return tls, str(bundle)


@HOW
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_every_connection_has_keep_alive_and_no_delay(how: str, scheme: str, tmp_path: Any) -> None:
    # Both drivers open sockets in one place; the selector-served plain ones once had
    # no SO_KEEPALIVE while the blocking ones did.
    tls, verify = _tls_for(scheme, tmp_path)

    async def scenario() -> None:
        async with _Server(_keep_alive_ok, tls=tls) as server:
            transport = _lean(server.url, verify=verify)
            await sender_for(transport, how)("GetItem", _get())
            assert transport.route is not None
            [kept] = transport.route.connections._idle
            sock = kept.sock
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)

    asyncio.run(scenario())


@HOW
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_request_goes_out_in_one_send(
    how: str, scheme: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # http.client sends the head and the body apart: two system calls on each side (and
    # two TLS records) for every request, where botocore's connection sends one.
    tls, verify = _tls_for(scheme, tmp_path)
    sent: list[bytes] = []
    send = Bounded.send

    def counted(connection: Bounded, data: Any) -> None:
        sent.append(bytes(data))
        send(connection, data)

    monkeypatch.setattr(Bounded, "send", counted)

    async def scenario() -> None:
        async with _Server(_keep_alive_ok, tls=tls) as server:
            transport = _lean(server.url, verify=verify)
            await sender_for(transport, how)("PutItem", {**_get(), "Item": {"key": {"S": "k"}}})
            [request] = sent
            head, _, body = request.partition(b"\r\n\r\n")
            assert head.startswith(b"POST / HTTP/1.1\r\n")
            assert body.startswith(b"{") and body.endswith(b"}")
            assert f"Content-Length: {len(body)}".encode() in head

    asyncio.run(scenario())


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_sync_create_answered_after_its_wait_is_read_late_and_its_connection_kept(
    scheme: str, tmp_path: Any
) -> None:
    """The caller's create gives up at its bound; the answer, sent later, still reaches
    ``on_late`` (so the lease can delete a row that landed), also on a fresh TLS
    connection whose session tickets arrive before the answer."""
    tls, verify = _tls_for(scheme, tmp_path)

    async def slow_put(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"PutItem" in head:
            await asyncio.sleep(0.6)  # well after the caller's 0.2 s
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n" + b'{"late":true}')
        return True

    async def scenario() -> None:
        async with _Server(slow_put, tls=tls) as server:
            transport = _lean(server.url, verify=verify)
            await transport.prepare()
            late: list[Any] = []
            item = {"TableName": "locks", "Item": {"key": {"S": "k"}}}
            with pytest.raises(RequestFailedError) as failed:
                await asyncio.to_thread(
                    transport.handle, Request("PutItem", item, 0.2, late.append)
                )
            assert failed.value.code == "ReadTimeoutError" and failed.value.may_have_committed
            [future] = late
            answer = await late_answer(future)
            assert answer["late"] is True
            # The connection read to the end is kept: the next request reuses it.
            await asyncio.to_thread(transport.handle, Request("GetItem", _get(), 5.0, late.append))
            assert server.connections == 1

    asyncio.run(scenario())


@HOW
def test_a_request_larger_than_the_socket_buffers_is_sent_whole(how: str) -> None:
    blob = "x" * 6_000_000  # far more than a loopback send buffer takes at once

    async def scenario() -> None:
        async with _Server(_keep_alive_ok) as server:
            send = sender_for(_lean(server.url), how)
            item = {"TableName": "locks", "Item": {"key": {"S": "k"}, "blob": {"S": blob}}}
            await send("PutItem", item)
            await send("GetItem", _get())  # the same connection, still in step
            assert server.bodies[0] > len(blob)
            assert server.connections == 1

    asyncio.run(scenario())


@HOW
def test_requests_over_tls_are_verified_against_the_configured_ca_bundle(
    how: str, tmp_path: Any
) -> None:
    tls, bundle = localhost_tls(tmp_path)

    async def scenario() -> None:
        async with _Server(_keep_alive_ok, tls=tls) as server:
            transport = _lean(server.url, verify=str(bundle))
            send = sender_for(transport, how)
            for index in range(3):
                assert await send("GetItem", _get(str(index))) == {
                    "ResponseMetadata": {"HTTPStatusCode": 200}
                }
            assert server.connections == 1  # kept alive under TLS too
            # Without the bundle, the test authority is unknown: refused before sending.
            with pytest.raises(RequestFailedError) as raised:
                await sender_for(_lean(server.url), how)("PutItem", {"TableName": "locks"})
            assert not raised.value.may_have_committed
            assert len(server.heads) == 3

    asyncio.run(scenario())


@HOW
def test_a_500_answer_may_have_committed(how: str) -> None:
    async def fail(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"x"}'
        writer.write(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return True

    async def scenario() -> None:
        async with _Server(fail) as server:
            with pytest.raises(RequestFailedError) as raised:
                await sender_for(_lean(server.url), how)("UpdateItem", {"TableName": "locks"})
            assert raised.value.may_have_committed
            assert raised.value.code == "InternalServerError"

    asyncio.run(scenario())


@HOW
def test_a_connection_the_server_closed_while_idle_is_not_reused(how: str) -> None:
    async def answer_then_drop(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        return False  # close after answering, without saying Connection: close

    async def scenario() -> None:
        async with _Server(answer_then_drop) as server:
            send = sender_for(_lean(server.url), how)
            await send("GetItem", _get())
            await asyncio.sleep(0.05)
            await send("PutItem", {"TableName": "locks", "Item": {}})
            assert server.connections == 2

    asyncio.run(scenario())


@HOW
def test_a_reused_connection_dropped_unanswered_retries_reads_but_not_writes(how: str) -> None:
    # Keyed by the writer itself: an id() can be reused once a connection's writer is gone,
    # and the next connection would then continue the dropped one's count.
    served: dict[asyncio.StreamWriter, int] = {}

    async def drop_second(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        count = served[writer] = served.get(writer, 0) + 1
        if count == 2:
            writer.transport.abort()  # as if it were dropped just as the request went out
            return False
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        return True

    async def scenario() -> None:
        async with _Server(drop_second) as server:
            send = sender_for(_lean(server.url), how)
            await send("GetItem", _get())
            await send("GetItem", _get())  # dropped, then resent on a new connection
            assert server.connections == 2
            with pytest.raises(RequestFailedError) as raised:
                await send("PutItem", {"TableName": "locks", "Item": {}})
            assert raised.value.may_have_committed
            assert server.connections == 2

    asyncio.run(scenario())


@HOW
def test_chunked_answers_are_read_whole(how: str) -> None:
    async def chunked(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\n{"Ite\r\n8\r\nm":null}\r\n0\r\n\r\n'
        )
        return True

    async def scenario() -> None:
        async with _Server(chunked) as server:
            send = sender_for(_lean(server.url), how)
            assert (await send("GetItem", _get()))["Item"] is None
            assert (await send("GetItem", _get()))["Item"] is None
            assert server.connections == 1

    asyncio.run(scenario())


@HOW
def test_an_answer_without_length_runs_to_the_end_of_the_connection(how: str) -> None:
    async def until_close(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b'HTTP/1.0 200 OK\r\nX-Amz-Crc32: 2297380185\r\n\r\n{"Item":null}')
        return False

    async def scenario() -> None:
        async with _Server(until_close) as server:
            send = sender_for(_lean(server.url), how)
            assert (await send("GetItem", _get()))["Item"] is None
            assert (await send("GetItem", _get()))["Item"] is None
            assert server.connections == 2

    asyncio.run(scenario())


def test_a_blocking_write_answered_after_its_timeout_may_have_been_applied() -> None:
    """A sync caller stops waiting on a create: it may have landed, and its answer (read
    on in the runtime's pool) goes to ``on_late``, for the engine to clean up after."""

    async def answer_late(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.4)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{"ConsumedCapacity"')
        await writer.drain()
        await asyncio.sleep(0.1)  # the answer arrives in two parts
        writer.write(b':{"CapacityUnits":1}}')
        return True

    async def scenario() -> None:
        async with _Server(answer_late) as server:
            transport = _lean(server.url)
            await transport.prepare()
            late: list[Any] = []
            params = {"TableName": "locks", "Item": {}}
            with pytest.raises(RequestFailedError) as raised:
                await asyncio.to_thread(
                    transport.handle, Request("PutItem", params, 0.2, late.append)
                )
            assert raised.value.may_have_committed and raised.value.code == "ReadTimeoutError"
            [still_open] = late
            answer = await late_answer(still_open)
            assert answer["ConsumedCapacity"] == {"CapacityUnits": 1}

    asyncio.run(scenario())


def test_a_loop_request_cut_by_its_limit_hands_on_the_answer_still_to_come() -> None:
    """The engine awaits the request itself; past its limit the answer is still learned."""

    async def answer_late(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.3)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"a":1}')
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b" ")  # the last byte of the body comes later still
        return True

    async def scenario() -> None:
        async with _Server(answer_late) as server:
            transport = _lean(server.url)
            late: list[Any] = []
            with pytest.raises(TimedOut):
                await transport.handle_async(
                    Request("PutItem", {"TableName": "t"}, 0.1, late.append)
                )
            assert len(late) == 1
            assert await late[0] == {"a": 1, "ResponseMetadata": {"HTTPStatusCode": 200}}
            await transport.handle_async(Request("GetItem", _get(), 1.0, late.append))

    asyncio.run(scenario())


def test_a_cancelled_loop_request_hands_on_its_answer() -> None:
    async def answer_late(server: _Server, head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.3)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        return True

    async def scenario() -> None:
        async with _Server(answer_late) as server:
            transport = _lean(server.url)
            late: list[Any] = []
            sending = asyncio.ensure_future(
                transport.handle_async(Request("PutItem", {"TableName": "t"}, 5.0, late.append))
            )
            await asyncio.sleep(0.1)
            sending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sending
            assert len(late) == 1
            assert await late[0] == {"ResponseMetadata": {"HTTPStatusCode": 200}}

    asyncio.run(scenario())


def test_refreshed_credentials_sign_the_next_request_without_blocking_the_loop() -> None:
    refreshes: list[str] = []

    def refresh() -> dict[str, str]:
        key = f"AKIDREFRESH{len(refreshes)}"
        refreshes.append(key)
        return {
            "access_key": key,
            "secret_key": "secret",
            "token": "token",
            # Inside the advisory refresh window: every request refreshes, none is expired.
            "expiry_time": (datetime.now(UTC) + timedelta(minutes=12)).isoformat(),
        }

    async def scenario() -> None:
        async with _Server(_keep_alive_ok) as server:
            client = botocore_client(server.url)
            client._request_signer._credentials = RefreshableCredentials.create_from_metadata(
                refresh(), refresh, "test"
            )
            transport = LeanTransport(lambda: client)
            await transport.handle_async(Request("GetItem", _get()))
            await transport.handle_async(Request("GetItem", _get()))
        assert len(refreshes) >= 3
        signed = [head.split(b"Credential=")[1].split(b"/")[0].decode() for head in server.heads]
        assert signed[-1] == refreshes[-1]
        assert b"X-Amz-Security-Token: token" in server.heads[-1]

    asyncio.run(scenario())


def test_missing_credentials_are_reported_as_access_denied(endpoint: str) -> None:
    async def scenario() -> None:
        client = botocore_client(endpoint)
        client._request_signer._credentials.secret_key = None
        with pytest.raises(AccessDeniedError, match="credentials"):
            await LeanTransport(lambda: client).handle_async(Request("GetItem", _get()))

    asyncio.run(scenario())


# --- selection -----------------------------------------------------------------------


def test_the_lean_path_is_the_default_and_the_environment_can_select_botocore(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv(ENV_TRANSPORT, raising=False)
    assert isinstance(DynamoDBClient(region="us-east-1")._lock_store.transport, LeanTransport)
    monkeypatch.setenv(ENV_TRANSPORT, "boto")
    assert isinstance(DynamoDBClient(region="us-east-1")._lock_store.transport, BotoTransport)
    explicit = DynamoDBClient(region="us-east-1", transport="lean")
    assert isinstance(explicit._lock_store.transport, LeanTransport)
    monkeypatch.setenv(ENV_TRANSPORT, "fast")
    with pytest.raises(ValueError, match=ENV_TRANSPORT):
        DynamoDBClient(region="us-east-1")
    with pytest.raises(ValueError, match="'lean' or 'boto'"):
        DynamoDBClient(region="us-east-1", transport="http2")
    with pytest.raises(ValueError, match="'lean' or 'boto'"):
        DynamoDBClient.from_client(boto3.client("dynamodb", region_name="us-east-1"), transport="x")


def test_locks_over_both_paths_exclude_each_other_and_the_environment_endpoint_is_used(
    endpoint: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    lean = DynamoDBClient(region="us-east-1", transport="lean")
    boto = DynamoDBClient(region="us-east-1", transport="boto")
    with SyncDistributedLock(lean, table=table, key="shared", lease_duration=2):
        with pytest.raises(LockNotAcquired, match="not acquired"):
            with SyncDistributedLock(boto, table=table, key="shared", wait_timeout=0):
                pass
    with SyncDistributedLock(boto, table=table, key="shared", wait_timeout=0):
        pass
    transport = lean._lock_store.transport
    assert isinstance(transport, LeanTransport) and transport.route is not None
    assert transport.route.url == endpoint
