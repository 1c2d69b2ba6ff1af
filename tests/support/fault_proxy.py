"""A fault-injecting HTTP proxy for DynamoDB-compatible servers.

The proxy listens on a free loopback port and forwards every request to an
upstream server (the moto server the tests start). Rules installed from the test
pick requests by operation (the ``X-Amz-Target`` header, e.g.
``DynamoDB_20120810.PutItem``) and optionally by a predicate on the JSON body,
and then change what happens to them:

* lose the response after the server committed (reset, silence, a 500 or a 200 whose
  JSON nests deeper than any reader recurses),
* hold a request until the test lets it go, then forward it (late commit),
  optionally cutting the client off at once so it never learns the outcome,
* answer 503 or reset the connection without forwarding (partition),
* answer ProvisionedThroughputExceededException, a 5xx or any other DynamoDB
  error without forwarding,
* add latency before forwarding,
* close idle keep-alive connections, as a server's idle timeout does.

Every request is logged on arrival (:class:`Seen`) with the status answered.
docs/faults.md lists the builders and the fault matrix built on them.

A rule counts how often it fired and can be limited to N requests. Client
connections are HTTP/1.1 keep-alive; each forwarded request uses a fresh
upstream connection, so a fault on one request never leaks into the next.

Example::

    with FaultProxy(moto_url) as proxy:
        client = DynamoDBClient(region="us-east-1", endpoint_url=proxy.url)
        rule = proxy.lose_response("PutItem", times=1)
        ...
        assert rule.fired == 1
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

__all__ = [
    "FaultProxy",
    "Rule",
    "Seen",
    "is_create",
    "is_takeover",
    "key_is",
]

TARGET_PREFIX = "DynamoDB_20120810."
_JSON = "application/x-amz-json-1.0"
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
}
_MAX_LINE = 65_536

# Error bodies in the shape DynamoDB sends them (``__type`` is namespace#Code).
THROTTLED = (
    400,
    {
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": "The level of configured provisioned throughput for the table was exceeded. "
        "Consider increasing your provisioning level with the UpdateTable API.",
    },
)
INTERNAL_ERROR = (
    500,
    {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "Internal error"},
)
UNAVAILABLE = (
    503,
    {"__type": "com.amazon.coral.availability#ServiceUnavailableException", "message": ""},
)
#: A 200 whose item is a map nested 50,000 levels deep (100,000 JSON objects, 0.6 MB):
#: more than ``json.loads`` (or botocore's parser) can read on any Python. 600 levels was
#: enough for 3.11 but 3.12 read them, and 3.13 reads 2,000 plain objects.
NESTED_DEPTH = 50_000
TOO_DEEP = (
    200,
    b'{"Attributes":{"a":'
    + b'{"M":{"a":' * NESTED_DEPTH
    + b'{"S":"x"}'
    + b"}}" * NESTED_DEPTH
    + b"}}",
)

Predicate = Callable[[dict[str, Any]], bool]


# --- body predicates ----------------------------------------------------------


def _keys_in(body: dict[str, Any]) -> Iterator[Any]:
    for holder in (body.get("Item"), body.get("Key")):
        if isinstance(holder, dict):
            yield holder.get("key", {}).get("S")
    for entry in body.get("TransactItems") or ():
        for part in entry.values():
            if isinstance(part, dict):
                yield from _keys_in(part)


def key_is(key: str) -> Predicate:
    """Match requests about the lock row ``key`` (also inside a transaction)."""
    return lambda body: key in set(_keys_in(body))


def is_create(body: dict[str, Any]) -> bool:
    """An acquire: a PutItem that requires the row to be absent."""
    return "attribute_not_exists" in str(body.get("ConditionExpression", ""))


def is_takeover(body: dict[str, Any]) -> bool:
    """A takeover: a PutItem conditioned on the observed owner and version."""
    return "Item" in body and ":v" in (body.get("ExpressionAttributeValues") or {})


# --- rules and the log --------------------------------------------------------


@dataclass(eq=False)
class Rule:
    """What to do with matching requests; returned by the :class:`FaultProxy` builders.

    ``fired`` counts matching requests the rule acted on; ``forwarded`` counts
    those that reached the server (for held or delayed requests: after the wait).
    """

    name: str
    operations: frozenset[str] | None
    when: Predicate | None = None
    times: int | None = None
    delay: float = 0.0
    hold: bool = False
    detach: bool = False
    max_hold: float = 30.0
    forward: bool = True
    #: (status, an error body, or the raw bytes of any body)
    reply: tuple[int, dict[str, Any] | bytes] | None = None
    after: str = "respond"  # respond | reset | silence | replace
    fired: int = 0
    forwarded: int = 0
    _released: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def matches(self, operation: str, body: dict[str, Any]) -> bool:
        """True when this rule wants the request (ignores its remaining budget)."""
        if self.operations is not None and operation not in self.operations:
            return False
        return self.when is None or bool(self.when(body))

    def release(self) -> None:
        """Let held requests (and later ones) through to the server."""
        self._released.set()

    def wait_fired(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until the rule fired ``count`` times; False on timeout."""
        return self._wait(lambda: self.fired >= count, timeout)

    def wait_forwarded(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``count`` of its requests reached the server; False on timeout."""
        return self._wait(lambda: self.forwarded >= count, timeout)

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(done, timeout)

    def _bump(self, attribute: str) -> None:
        with self._changed:
            setattr(self, attribute, getattr(self, attribute) + 1)
            self._changed.notify_all()


@dataclass
class Seen:
    """One request the proxy received (logged on arrival), which rule acted, what the client got."""

    at: float
    operation: str
    body: dict[str, Any]
    rule: str | None
    status: int | None = None  # the status answered to the client; None: nothing (yet)

    @property
    def owner(self) -> str | None:
        """The lock owner the request writes or conditions on, when it names one."""
        item = self.body.get("Item") or {}
        owner = item.get("owner", {}).get("S")
        if owner is None:
            owner = (self.body.get("ExpressionAttributeValues") or {}).get(":o", {}).get("S")
        return owner if isinstance(owner, str) else None


def _operations(operations: str | Iterable[str] | None) -> frozenset[str] | None:
    if operations is None:
        return None
    names = [operations] if isinstance(operations, str) else list(operations)
    return frozenset(name.removeprefix(TARGET_PREFIX) for name in names)


# --- the proxy ----------------------------------------------------------------


@dataclass
class _Request:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool

    @property
    def operation(self) -> str:
        for name, value in self.headers:
            if name.lower() == "x-amz-target":
                return value.removeprefix(TARGET_PREFIX)
        return ""

    def json(self) -> dict[str, Any]:
        try:
            parsed = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}


class FaultProxy:
    """A threaded HTTP/1.1 proxy in front of ``upstream`` that injects faults by rule."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self._upstream = (parsed.hostname, parsed.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._clients: set[socket.socket] = set()
        self._idle: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self.log: list[Seen] = []
        self.connections = 0
        self.errors: list[BaseException] = []
        self._acceptor = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._acceptor.start()

    # --- the test's API -----------------------------------------------------

    def add(self, rule: Rule) -> Rule:
        """Install a rule; the earliest installed matching rule with budget left acts."""
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        """Uninstall one rule (requests it is holding stay held until released)."""
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Uninstall every rule and let any held request through."""
        with self._lock:
            rules, self._rules = self._rules, []
        for rule in rules:
            rule.release()

    def lose_response(
        self,
        operations: str | Iterable[str] | None,
        *,
        when: Predicate | None = None,
        times: int | None = None,
        how: str = "reset",
    ) -> Rule:
        """Forward, let the server commit, then lose the answer.

        ``how``: ``reset`` the client connection, stay ``silent`` until the client
        gives up (the proxy resets the connection when it closes), answer ``500``, or
        answer a 200 whose JSON is ``nested`` too deep to be read.
        """
        after = {"reset": "reset", "silence": "silence", "500": "replace", "nested": "replace"}
        if how not in after:
            raise ValueError(f"how must be 'reset', 'silence', '500' or 'nested', got {how!r}")
        return self.add(
            Rule(
                f"lose-response-{how}",
                _operations(operations),
                when,
                times,
                after=after[how],
                reply={"500": INTERNAL_ERROR, "nested": TOO_DEEP}.get(how),
            )
        )

    def hold(
        self,
        operations: str | Iterable[str] | None,
        *,
        when: Predicate | None = None,
        times: int | None = None,
        respond: bool = True,
        detach: bool = False,
        max_hold: float = 30.0,
    ) -> Rule:
        """Hold matching requests until ``rule.release()``, then forward them (late commit).

        With ``respond=False`` the client's connection is reset after the late
        commit, so the client never learns that it succeeded. With ``detach`` the
        client's connection is reset as soon as the request arrives, while the
        request itself stays queued: a write delivered after its sender gave up.
        """
        return self.add(
            Rule(
                "hold-detached" if detach else "hold",
                _operations(operations),
                when,
                times,
                hold=True,
                detach=detach,
                max_hold=max_hold,
                after="reset" if detach or not respond else "respond",
            )
        )

    def partition(
        self,
        operations: str | Iterable[str] | None = None,
        *,
        when: Predicate | None = None,
        times: int | None = None,
        how: str = "503",
    ) -> Rule:
        """Never reach the server: answer 503 or reset the connection."""
        if how not in ("503", "reset"):
            raise ValueError(f"how must be '503' or 'reset', got {how!r}")
        return self.add(
            Rule(
                f"partition-{how}",
                _operations(operations),
                when,
                times,
                forward=False,
                reply=UNAVAILABLE if how == "503" else None,
                after="respond" if how == "503" else "reset",
            )
        )

    def throttle(
        self,
        operations: str | Iterable[str] | None = None,
        *,
        when: Predicate | None = None,
        times: int | None = None,
    ) -> Rule:
        """Answer ProvisionedThroughputExceededException (400) without forwarding."""
        return self.add(
            Rule("throttle", _operations(operations), when, times, forward=False, reply=THROTTLED)
        )

    def answer(
        self,
        operations: str | Iterable[str] | None,
        status: int,
        code: str,
        message: str = "",
        *,
        when: Predicate | None = None,
        times: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Rule:
        """Answer any DynamoDB error (e.g. 400 AccessDeniedException) without forwarding.

        ``extra`` adds members to the error body (e.g. ``ThrottlingReasons``).
        """
        if not 400 <= status <= 599:
            raise ValueError(f"status must be a 4xx or 5xx code, got {status}")
        body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message}
        reply = (status, {**body, **(extra or {})})
        return self.add(
            Rule(f"answer-{code}", _operations(operations), when, times, forward=False, reply=reply)
        )

    def server_error(
        self,
        operations: str | Iterable[str] | None = None,
        *,
        when: Predicate | None = None,
        times: int | None = None,
        status: int = 500,
    ) -> Rule:
        """Answer a 5xx error (InternalServerError shape) without forwarding."""
        if not 500 <= status <= 599:
            raise ValueError(f"status must be a 5xx code, got {status}")
        reply = (status, INTERNAL_ERROR[1])
        return self.add(
            Rule(
                f"error-{status}", _operations(operations), when, times, forward=False, reply=reply
            )
        )

    def latency(
        self,
        operations: str | Iterable[str] | None,
        seconds: float,
        *,
        when: Predicate | None = None,
        times: int | None = None,
    ) -> Rule:
        """Wait ``seconds`` before forwarding matching requests."""
        if seconds < 0:
            raise ValueError(f"seconds must be 0 or more, got {seconds}")
        return self.add(Rule("latency", _operations(operations), when, times, delay=seconds))

    def seen(self, operation: str | None = None, *, owner: str | None = None) -> list[Seen]:
        """Logged requests, optionally only one operation and/or one lock owner's."""
        with self._lock:
            entries = list(self.log)
        return [
            entry
            for entry in entries
            if (operation is None or entry.operation == operation)
            and (owner is None or entry.owner == owner)
        ]

    def drop_idle_connections(self) -> int:
        """Close (FIN, as a server's idle timeout does) every client connection waiting
        for its next request; returns how many were closed."""
        with self._lock:
            idle = list(self._idle)
        for client in idle:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
        return len(idle)

    def close(self) -> None:
        """Stop accepting, reset open client connections, abandon held requests."""
        self._closing.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() at once
        self._acceptor.join(5)
        with self._lock:
            clients = list(self._clients)
            threads = list(self._threads)
        for client in clients:
            _reset(client)
        for thread in threads:
            thread.join(5)
        self._listener.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- serving ------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(
                target=self._serve, args=(client,), name="fault-proxy-conn", daemon=True
            )
            with self._lock:
                self.connections += 1
                self._clients.add(client)
                self._threads.add(thread)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        try:
            with client.makefile("rb") as stream:
                while not self._closing.is_set():
                    with self._lock:
                        self._idle.add(client)
                    request = _read_request(stream)
                    with self._lock:
                        self._idle.discard(client)
                    if request is None or not self._handle(client, request):
                        break
        except (OSError, ValueError, http.client.HTTPException):
            pass  # the client went away or sent garbage: drop the connection
        except BaseException as error:  # a bug in the proxy or a test predicate
            self.errors.append(error)
        finally:
            with self._lock:
                self._clients.discard(client)
                self._idle.discard(client)
                self._threads.discard(threading.current_thread())
            with contextlib.suppress(OSError):
                client.close()

    def _pick(self, operation: str, body: dict[str, Any]) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                if rule.matches(operation, body):
                    rule._bump("fired")
                    return rule
        return None

    def _handle(self, client: socket.socket, request: _Request) -> bool:
        """Serve one request; False when the connection must end."""
        operation, body = request.operation, request.json()
        rule = self._pick(operation, body)
        seen = Seen(time.monotonic(), operation, body, rule.name if rule else None)
        with self._lock:
            self.log.append(seen)
        if rule is None:
            self._respond(client, request, self._forward(request), seen)
            return request.keep_alive
        return self._apply(rule, client, request, seen)

    def _apply(self, rule: Rule, client: socket.socket, request: _Request, seen: Seen) -> bool:
        """Act on a request a rule picked; False when the connection must end."""
        if rule.delay:
            self._closing.wait(rule.delay)
        if rule.detach:
            _reset(client)
        if rule.hold:
            deadline = time.monotonic() + rule.max_hold
            while not rule._released.wait(0.02):
                if self._closing.is_set() or time.monotonic() > deadline:
                    _reset(client)
                    return False
        answer: tuple[int, str, list[tuple[str, str]], bytes] | None = None
        if rule.forward:
            answer = self._forward(request)
            rule._bump("forwarded")
        if rule.after == "reset":
            _reset(client)
            return False
        if rule.after == "silence":
            self._closing.wait()
            _reset(client)
            return False
        if rule.reply is not None and (rule.after == "replace" or answer is None):
            answer = _error_answer(*rule.reply)
        assert answer is not None
        self._respond(client, request, answer, seen)
        return request.keep_alive

    def _forward(self, request: _Request) -> tuple[int, str, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            connection.putrequest(
                request.method, request.path, skip_host=True, skip_accept_encoding=True
            )
            for name, value in request.headers:
                if name.lower() not in _HOP_BY_HOP:
                    connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(request.body)))
            connection.putheader("Connection", "close")
            connection.endheaders(request.body)
            response = connection.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            connection.close()

    @staticmethod
    def _respond(
        client: socket.socket,
        request: _Request,
        answer: tuple[int, str, list[tuple[str, str]], bytes],
        seen: Seen,
    ) -> None:
        status, reason, headers, data = answer
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{name}: {value}" for name, value in headers if name.lower() not in _HOP_BY_HOP]
        lines.append(f"Content-Length: {len(data)}")
        lines.append("Connection: " + ("keep-alive" if request.keep_alive else "close"))
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        seen.status = status  # before sending: a test may look as soon as the client has it
        client.sendall(head + data)


def _error_answer(
    status: int, payload: dict[str, Any] | bytes
) -> tuple[int, str, list[tuple[str, str]], bytes]:
    reason = http.client.responses.get(status, "Error")
    headers = [("Content-Type", _JSON), ("x-amzn-RequestId", "fault-proxy")]
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return status, reason, headers, body


def _reset(sock: socket.socket) -> None:
    """Abort a connection with a TCP reset, as a dying load balancer would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def _read_request(stream: BinaryIO) -> _Request | None:
    """Read one HTTP/1.x request; None at a clean end of the connection."""
    line = stream.readline(_MAX_LINE)
    while line in (b"\r\n", b"\n"):  # tolerate stray blank lines between requests
        line = stream.readline(_MAX_LINE)
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x request line: {line!r}")
    method, path, version = parts
    headers: list[tuple[str, str]] = []
    while True:
        raw = stream.readline(_MAX_LINE)
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    fields = {name.lower(): value for name, value in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = _read_chunked(stream)
    else:
        body = stream.read(int(fields.get("content-length", "0") or 0))
    connection = fields.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    return _Request(method, path, headers, body, keep_alive)


def _read_chunked(stream: BinaryIO) -> bytes:
    chunks = []
    while True:
        size = int(stream.readline(_MAX_LINE).split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        chunks.append(stream.read(size))
        stream.readline(_MAX_LINE)
