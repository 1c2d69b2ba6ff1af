"""Hostile endpoints: the lean path's peak memory against a server that floods it.

A malicious or broken server on 127.0.0.1 (a child process) answers a PutItem
with a 100 MB body (with ``Content-Length``, then without it), with one 150 MB
chunk, or answers properly and then sends 300 MB of junk on the idle keep-alive
connection. Each scenario runs from the runtime loop and from a sync caller's
thread, each in a fresh client process, and reports the client's peak RSS
growth over the exchange (VmHWM after, VmRSS before, the peak reset through
``/proc/self/clear_refs``) and what the request raised.

Then a whole acquisition (``SyncDistributedLock``) against a server that answers
every request with one 150 MB chunk, or with a 2 MB body that is not JSON,
waiting 1, 15 and 35 s: every request is refused and the engine tries again
until the wait runs out, so a refused answer kept alive by anything would show
as growth with the number of requests.

    python -m benchmarks.hostile            # the sizes and waits above
    python -m benchmarks.hostile --quick    # a tenth of the sizes, the 1 s wait (the smoke test)

Exits 1 when a single request's growth is 32 MiB or more, an acquisition's is 8 MiB
or more, or a request reported success. See docs/hostile-endpoints.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

MB = 1000 * 1000
MIB = 1024 * 1024
#: A growth at or above this fails the run (a 128 MB Lambda must survive every scenario).
LIMIT_MIB = 32
#: An acquisition's growth at or above this fails the run: one refused answer at a time
#: (``MAX_BODY``, 4 MiB) and its reading, whatever the number of requests.
LOCK_LIMIT_MIB = 8
SCENARIOS = {
    "100 MB body, Content-Length": ("length", 100 * MB),
    "100 MB body, no length": ("close", 100 * MB),
    "one 150 MB chunk": ("chunk", 150 * MB),
    "300 MB junk on an idle connection": ("junk", 300 * MB),
}
PATHS = ("loop", "thread")
LOCK_SCENARIOS = {
    "one 150 MB chunk per request": ("chunk", 150 * MB),
    "a 2 MB body, not JSON, per request": ("garbage", 2 * MB),
}
WAITS = (1.0, 15.0, 35.0)
_OK_BODY = b'{"ConsumedCapacity":{"CapacityUnits":1.0,"TableName":"locks"}}'
_OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(_OK_BODY), _OK_BODY)
_PIECE = b"x" * MIB


# --- the server (a child process) --------------------------------------------------------


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            raise ConnectionResetError
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)


def _flood(conn: socket.socket, size: int) -> None:
    """Send ``size`` bytes until the client stops reading (a 2 s stall) or closes."""
    conn.settimeout(2.0)
    sent = 0
    with contextlib.suppress(OSError):
        while sent < size:
            piece = _PIECE[: min(len(_PIECE), size - sent)]
            conn.sendall(piece)
            sent += len(piece)


def _serve_one(conn: socket.socket, kind: str, size: int) -> None:
    with conn, contextlib.suppress(OSError):
        _read_request(conn)
        if kind == "length":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        elif kind == "close":
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        elif kind == "chunk":
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % size)
        elif kind == "garbage":  # under the cap, read whole, then refused as no JSON object
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size
            )
        else:  # junk: a proper answer, then the flood on the idle connection
            conn.sendall(_OK)
            time.sleep(0.2)
        _flood(conn, size)
        if kind == "junk":
            with contextlib.suppress(OSError):
                _read_request(conn)  # a client that reused the connection gets an answer
                conn.sendall(_OK)


def serve(kind: str, size: int, ready: Any) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    ready.send(listener.getsockname()[1])
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve_one, args=(conn, kind, size), daemon=True).start()


# --- the client (a fresh child process per run) -----------------------------------------


def _status(field: str) -> int:
    """A /proc/self/status figure in bytes (VmRSS, VmHWM)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS (Linux 4.0+)
        return True
    except OSError:
        return False


def client(port: int, kind: str, path: str, results: Any) -> None:
    import botocore.session
    from botocore.config import Config

    from dynalease._engine.store import Request
    from dynalease._transport.boto import lock_config
    from dynalease._transport.lean import LeanTransport

    url = f"http://127.0.0.1:{port}"
    config = lock_config(None).merge(Config(connect_timeout=2, read_timeout=10))
    botocore_client = botocore.session.get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=url,
        config=config,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    transport = LeanTransport(lambda: botocore_client)
    params = {"TableName": "locks", "Item": {"key": {"S": "k"}}}

    async def put() -> Any:
        if path == "loop":
            return await transport.handle_async(Request("PutItem", params))
        late: list[Any] = []
        try:
            return await asyncio.to_thread(
                transport.handle, Request("PutItem", params, 10.0, late.append)
            )
        finally:
            for request in late:
                request.close()

    async def run() -> str:
        await transport.prepare()
        if kind != "junk":
            await put()
            return "success"
        await put()
        await asyncio.sleep(2.5)  # the loop runs meanwhile: the junk arrives while idle
        await put()
        return "success"  # on a new connection: test_hostile_endpoints.py counts them

    asyncio.run(_warm(transport, path))
    rss_before = _status("VmRSS")
    peak_reset = _reset_peak()
    started = time.perf_counter()
    try:
        outcome = asyncio.run(run())
    except Exception as error:  # what the request raised is the figure
        code = getattr(error, "code", None)
        outcome = f"{type(error).__name__}" + (f" ({code})" if code else "")
    elapsed = time.perf_counter() - started
    peak = _status("VmHWM")
    if not peak_reset:
        peak = max(peak, rss_before)
    results.send((peak - rss_before, outcome, elapsed))


def lock_client(port: int, kind: str, wait: float, results: Any) -> None:
    """One acquisition waiting ``wait`` seconds: peak growth, outcome, requests sent."""
    from dynalease import DynamoDBClient
    from dynalease.exceptions import DynaleaseError
    from dynalease.lock import SyncDistributedLock

    client = DynamoDBClient(
        "us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        access_key="testing",
        secret_key="testing",
    )
    lock = SyncDistributedLock(client, table="locks", key="k", wait_timeout=wait)
    import dynalease._engine.driver  # noqa: F401  (the loop's side, loaded before the baseline)

    rss_before = _status("VmRSS")
    peak_reset = _reset_peak()
    started = time.perf_counter()
    try:
        with lock:
            outcome = "success"
    except DynaleaseError as error:  # kept, as a caller may keep it
        outcome = type(error).__name__
    elapsed = time.perf_counter() - started
    peak = _status("VmHWM")
    if not peak_reset:
        peak = max(peak, rss_before)
    metrics = lock.metrics
    sent = metrics.read_requests + metrics.write_requests
    results.send((peak - rss_before, f"{outcome}, {sent} requests", elapsed))


async def _warm(transport: Any, path: str) -> None:
    """Import and build everything a request needs before the baseline is read."""
    await transport.prepare()
    if path == "thread":
        await asyncio.to_thread(lambda: None)


@contextlib.contextmanager
def _hostile_server(kind: str, size: int) -> Iterator[int]:
    """The flooding server in a child process, for as long as the block runs: its port."""
    context = multiprocessing.get_context("spawn")
    ready_recv, ready_send = context.Pipe(duplex=False)
    server = context.Process(target=serve, args=(kind, size, ready_send), daemon=True)
    server.start()
    try:
        yield ready_recv.recv()
    finally:
        server.kill()
        server.join(5)


def _in_child(target: Any, args: tuple[Any, ...], within: float) -> tuple[int, str, float]:
    """What ``target(*args, send)`` sends back from a fresh process, or a no-result row."""
    context = multiprocessing.get_context("spawn")
    results_recv, results_send = context.Pipe(duplex=False)
    run = context.Process(target=target, args=(*args, results_send))
    run.start()
    try:
        if not results_recv.poll(within):
            run.kill()
            return (-1, f"no result in {within:.0f} s", within)
        result: tuple[int, str, float] = results_recv.recv()
        return result
    finally:
        run.join(10)


def measure(kind: str, size: int) -> dict[str, tuple[int, str, float]]:
    with _hostile_server(kind, size) as port:
        return {path: _in_child(client, (port, kind, path), 120) for path in PATHS}


def measure_lock(kind: str, size: int, waits: tuple[float, ...]) -> dict[float, Any]:
    with _hostile_server(kind, size) as port:
        return {wait: _in_child(lock_client, (port, kind, wait), wait + 60) for wait in waits}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    started = time.perf_counter()
    print("# hostile endpoints: the client's peak RSS growth per scenario and path")
    print(f"python {sys.version.split()[0]}, pid {os.getpid()}, limit {LIMIT_MIB} MiB\n")
    print(
        "| scenario                                  | path   | peak RSS growth | time   | outcome"
    )
    print(
        "|-------------------------------------------|--------|-----------------|--------|--------"
    )
    failed = False
    for name, (kind, size) in SCENARIOS.items():
        label = name if scale == 1 else f"{name} (/{scale})"
        for path, (growth, outcome, elapsed) in measure(kind, size // scale).items():
            figure = f"{growth / MIB:9.1f} MiB"
            print(f"| {label:<41} | {path:<6} | {figure:>15} | {elapsed:5.2f}s | {outcome}")
            bad_outcome = outcome.startswith("success") and kind != "junk"
            if growth < 0 or growth >= LIMIT_MIB * MIB or bad_outcome:
                failed = True
    print("\n# an acquisition against a server refusing every answer: peak RSS growth per wait")
    print(f"limit {LOCK_LIMIT_MIB} MiB\n")
    print("| every answer                                   | wait  | peak RSS growth | outcome")
    print("|------------------------------------------------|-------|-----------------|--------")
    waits = WAITS if scale == 1 else WAITS[:1]
    for name, (kind, size) in LOCK_SCENARIOS.items():
        # The garbage body is read whole: at its size, whatever the scale.
        sized = size if kind == "garbage" else size // scale
        for wait, (growth, outcome, _) in measure_lock(kind, sized, waits).items():
            figure = f"{growth / MIB:9.1f} MiB"
            print(f"| {name:<46} | {wait:4.0f}s | {figure:>15} | {outcome}")
            if growth < 0 or growth >= LOCK_LIMIT_MIB * MIB or outcome.startswith("success"):
                failed = True
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    print("all under the limit, no success reported" if not failed else "FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
