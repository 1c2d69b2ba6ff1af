"""The lean path against a hostile or broken HTTP server on loopback, on both paths.

Each test points a real :class:`LeanTransport` (``endpoint_url``) at a raw-socket
server that answers one way: too large, too slow, malformed, interim answers,
junk on an idle connection. Every test runs from the runtime loop and from a
sync caller's own thread. An answer that is not a whole, well-formed HTTP/1.1
answer must fail at once as "may have been applied" (``ConnectionClosedError``,
reconciled by the engine), never as a success and never as a definite failure.
The memory figures for the same servers are in ``benchmarks/hostile.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.config import Config
from support.lean_paths import HOW, botocore_client, sender_for

from dynalease._engine.store import Request
from dynalease._transport.boto import lock_config
from dynalease._transport.connections import MAX_BODY
from dynalease._transport.lean import LeanTransport
from dynalease.exceptions import RequestFailedError

pytestmark = pytest.mark.timeout(60)

#: Long enough that a test waiting for it fails the "at once" checks below.
READ_TIMEOUT_S = 2.0
PUT = {"TableName": "locks", "Item": {"key": {"S": "k"}}}
OK_BODY = b'{"ConsumedCapacity":{"CapacityUnits":1.0,"TableName":"locks"}}'
OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nx-amz-crc32: %d\r\n\r\n%s" % (
    len(OK_BODY),
    zlib.crc32(OK_BODY),
    OK_BODY,
)

#: (connection, its number) -> serve requests on it; the connection closes after.
Serve = Callable[[socket.socket, int], None]


class RawServer:
    """A threaded TCP server on 127.0.0.1: each connection runs ``serve`` in a thread."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.connections = 0
        self.done = threading.Event()  # set by a handler when it got what it waited for
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._run, args=(conn, self.connections), daemon=True).start()

    def _run(self, conn: socket.socket, number: int) -> None:
        with conn:
            with contextlib.suppress(OSError):
                self.serve(conn, number)

    def close(self) -> None:
        self._stopped = True
        self._listener.close()


def read_request(conn: socket.socket) -> bytes:
    """One request's head and body (the lean path always sends Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            raise ConnectionResetError("client went away")
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)
    return head


def hold(conn: socket.socket, seconds: float = READ_TIMEOUT_S + 2) -> None:
    """Keep the connection open, sending nothing, until the client closes it."""
    conn.settimeout(seconds)
    try:
        while conn.recv(65536):
            pass
    except TimeoutError:
        pass


@pytest.fixture
def server() -> Iterator[Callable[[Serve], RawServer]]:
    started: list[RawServer] = []

    def start(serve: Serve) -> RawServer:
        started.append(RawServer(serve))
        return started[-1]

    yield start
    for each in started:
        each.close()


def transport(url: str) -> LeanTransport:
    config = lock_config(None).merge(Config(connect_timeout=2, read_timeout=READ_TIMEOUT_S))
    return LeanTransport(lambda: botocore_client(url, config))


def _get() -> dict[str, Any]:
    return {"TableName": "locks", "Key": {"key": {"S": "k"}}}


def send(lean: LeanTransport, how: str, operation: str, params: dict[str, Any]) -> Any:
    async def scenario() -> Any:
        return await sender_for(lean, how, timeout=READ_TIMEOUT_S)(operation, params)

    return asyncio.run(scenario())


def fails_at_once_as_maybe_applied(lean: LeanTransport, how: str) -> RequestFailedError:
    """The PutItem fails before the read timeout, as "it may have been applied".

    The servers fall silent after what they send: a client that did not refuse the
    answer at once would wait for more and fail at the read timeout instead, as a
    ReadTimeoutError. The error's code tells the two apart, whatever the machine's load.
    """
    failure = fails_as_maybe_applied(lean, how)
    assert failure.code == "ConnectionClosedError", failure
    return failure


def fails_as_maybe_applied(lean: LeanTransport, how: str) -> RequestFailedError:
    """The PutItem fails as "it may have been applied", at once or at the read timeout.

    http.client reads a body whose framing it does not recognise until the
    connection closes: such an answer ends at the read timeout, never as a success.
    """
    with pytest.raises(RequestFailedError) as raised:
        send(lean, how, "PutItem", PUT)
    assert raised.value.may_have_committed, raised.value
    assert raised.value.code in ("ConnectionClosedError", "ReadTimeoutError"), raised.value
    return raised.value


# --- no size limit on responses -------------------------------------------------------


@HOW
def test_a_content_length_over_the_cap_is_refused_at_once(how: str, server: Any) -> None:
    def huge(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (100 * 2**20))
        conn.sendall(b"x" * 2**20)  # then nothing: the rest would take 100 MB
        hold(conn)

    fails_at_once_as_maybe_applied(transport(server(huge).url), how)


@HOW
def test_a_body_without_length_past_the_cap_is_refused_as_it_passes(how: str, server: Any) -> None:
    def endless(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        conn.sendall(b"x" * (MAX_BODY + 2**20))
        hold(conn)

    fails_at_once_as_maybe_applied(transport(server(endless).url), how)


@HOW
def test_a_chunk_over_the_cap_is_never_read_whole(how: str, server: Any) -> None:
    def big_chunk(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        conn.sendall(b"%x\r\n" % (150 * 2**20) + b"x" * 2**20)
        hold(conn)

    fails_as_maybe_applied(transport(server(big_chunk).url), how)


@HOW
def test_many_chunks_past_the_cap_are_refused(how: str, server: Any) -> None:
    def chunks(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        conn.sendall((b"10000\r\n" + b"x" * 0x10000 + b"\r\n") * (MAX_BODY // 0x10000 + 8))
        hold(conn)

    fails_at_once_as_maybe_applied(transport(server(chunks).url), how)


@HOW
def test_junk_on_an_idle_connection_is_dropped_and_the_connection_not_reused(
    how: str, server: Any
) -> None:
    junk_sent = threading.Event()

    def answer_then_junk(conn: socket.socket, number: int) -> None:
        read_request(conn)
        conn.sendall(OK)
        if number == 1:
            time.sleep(0.1)
            conn.settimeout(2)
            with contextlib.suppress(OSError):  # the client closed it, as it should
                conn.sendall(b"J" * 8 * 2**20)  # far more than the socket buffers hold
            junk_sent.set()
            hold(conn, 2)
            return
        read_request(conn)  # a second request here would be an error
        raise AssertionError("a connection that sent junk carried another request")

    hostile = server(answer_then_junk)
    lean = transport(hostile.url)

    async def scenario() -> None:
        sender = sender_for(lean, how, timeout=READ_TIMEOUT_S)
        await sender("PutItem", PUT)
        # The loop path sees the junk as it arrives; the thread path when it takes the
        # connection. Wait until the server stopped sending either way.
        await asyncio.to_thread(junk_sent.wait, 5)
        # The idle connection is found readable when it is taken: dropped.
        await sender("PutItem", PUT)

    asyncio.run(scenario())
    assert hostile.connections == 2


# --- chunked parsing is quadratic -------------------------------------------------------


@HOW
def test_a_chunked_answer_in_many_small_chunks_is_read_in_linear_time(
    how: str, server: Any
) -> None:
    item = {"Item": {"key": {"S": "k"}, "blob": {"S": "y" * 1_000_000}}}
    body = json.dumps(item).encode()
    framed = b"".join(b"%x\r\n%s\r\n" % (len(body[at : at + 16]), body[at : at + 16])
                      for at in range(0, len(body), 16))  # fmt: skip

    def chunked(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for at in range(0, len(framed), 4096):  # one small read after another
            conn.sendall(framed[at : at + 4096])
            time.sleep(0.0005)
        conn.sendall(b"0\r\n\r\n")
        hold(conn)

    # CPU seconds, not wall time: a busy machine delays this process but does not make it
    # spend more. Linear parsing spends well under a second; re-reading every chunk at
    # each read spent ten or more.
    started = time.process_time()
    answer = send(transport(server(chunked).url), how, "GetItem", _get())
    assert answer["Item"] == item["Item"]
    assert time.process_time() - started < 3.0


# --- interim answers ----------------------------------------------------------------


@HOW
def test_interim_answers_are_skipped_and_the_applied_write_reported_applied(
    how: str, server: Any
) -> None:
    def continue_first(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        time.sleep(0.05)  # the interim answer arrives in a read of its own
        conn.sendall(b"HTTP/1.1 100 Continue\r\nX-Note: again\r\n\r\n" + OK)
        hold(conn)

    answer = send(transport(server(continue_first).url), how, "PutItem", PUT)
    assert answer["ConsumedCapacity"] == {"CapacityUnits": 1.0, "TableName": "locks"}


@HOW
def test_an_interim_answer_read_as_the_answer_may_have_been_applied(how: str, server: Any) -> None:
    # http.client skips only 100 Continue; another 1xx is its answer, which says
    # nothing about the write: never a definite failure.
    def early_hints(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + OK)
        hold(conn)

    fails_as_maybe_applied(transport(server(early_hints).url), how)


@HOW
def test_an_endless_stream_of_interim_answers_is_refused(how: str, server: Any) -> None:
    def interim_forever(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * 10_000)
        hold(conn)

    fails_as_maybe_applied(transport(server(interim_forever).url), how)


# --- malformed heads ----------------------------------------------------------------


@HOW
@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 0\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nx-amz-crc32: " + b"1" * 5000 + b"\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\nConnection: close\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 050 Odd\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=[
        "negative-length",
        "two-lengths",
        "crc-5000-digits",
        "unknown-coding",
        "negative-chunk",
        "space-before-colon",
        "empty-200",
        "204",
        "status-below-100",
    ],
)
def test_a_malformed_or_empty_answer_to_a_write_may_have_been_applied(
    how: str, head: bytes, server: Any
) -> None:
    def malformed(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.sendall(head)
        hold(conn)

    fails_as_maybe_applied(transport(server(malformed).url), how)


# --- one endpoint's unanswered requests and another's renewals --------------------------


def _blackhole(conn: socket.socket, _: int) -> None:
    """Accepts the request and never answers."""
    hold(conn, 30)


def _trickle(conn: socket.socket, _: int) -> None:
    """Answers a head, then a body byte every 50 ms, never reaching its length."""
    read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        conn.sendall(b" ")
        time.sleep(0.05)


@pytest.mark.parametrize("answer", [_blackhole, _trickle], ids=["blackhole", "trickle"])
def test_requests_unanswered_by_one_endpoint_never_starve_a_lock_on_another(
    answer: Serve, server: Any, client: Any
) -> None:
    # Review N2: eight wait_timeout=0 acquisitions on an endpoint that never answers (or
    # answers a byte at a time) filled the process's one pool with their late readers and
    # cleanups, and a lock held on a healthy endpoint could not renew: lost after its lease.
    from support.tables import fresh_lock_table

    from dynalease import DynamoDBClient
    from dynalease.exceptions import LockUnavailable
    from dynalease.lock import SyncDistributedLock

    lease = 3.0
    hostile = DynamoDBClient(
        region="us-east-1", endpoint_url=server(answer).url, access_key="a", secret_key="b"
    )
    table = fresh_lock_table(client, "starve")

    def try_hostile(number: int) -> None:
        with (
            pytest.raises(LockUnavailable),
            SyncDistributedLock(
                hostile, table="locks", key=f"k{number}", lease_duration=lease, wait_timeout=0
            ),
        ):
            pass

    with SyncDistributedLock(client, table=table, key="healthy", lease_duration=lease) as held:
        tries = [threading.Thread(target=try_hostile, args=(n,)) for n in range(8)]
        for each in tries:
            each.start()
        for each in tries:
            each.join(30)
        # Three leases: without a confirmed renewal in each, the lease would have ended.
        ends = time.monotonic() + 3 * lease
        while time.monotonic() < ends:
            assert not held.lost, f"the healthy lock was lost: {held.metrics}"
            time.sleep(0.1)
        assert held.metrics.renewals >= 3, held.metrics


def test_a_late_answer_that_never_ends_is_given_up_at_the_read_timeout(server: Any) -> None:
    # The head comes after the caller's wait, so the rest is read late, on the endpoint's
    # lane; then one body byte every 50 ms for 30 s. Each read got the whole read timeout
    # again, so the reader held its thread as long as bytes came.
    def late_then_trickle(conn: socket.socket, _: int) -> None:
        read_request(conn)
        time.sleep(1.0)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        ends = time.monotonic() + 30
        while time.monotonic() < ends:
            conn.sendall(b" ")
            time.sleep(0.05)

    lean = transport(server(late_then_trickle).url)
    late: list[Any] = []

    async def scenario() -> None:
        await lean.prepare()
        assert lean.blocking
        with pytest.raises(RequestFailedError):
            await asyncio.to_thread(lean.handle, Request("PutItem", PUT, 0.2, late.append))

    asyncio.run(scenario())
    (reading,) = late
    # It ends READ_TIMEOUT_S after the late reading began; the slack is for a loaded machine,
    # far from the 30 s the server would go on for.
    with pytest.raises(RequestFailedError) as raised:
        reading.result(timeout=READ_TIMEOUT_S + 10)
    assert raised.value.may_have_committed and raised.value.code == "ReadTimeoutError"
