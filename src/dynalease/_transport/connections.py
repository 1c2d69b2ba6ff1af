"""The lean path's HTTP exchanges with one endpoint, over ``http.client`` directly: urllib3's
import and pool cost more than the one list of idle connections it would add
(docs/benchmarks.md).

What botocore decides around the exchange is decided here its way: the proxy
(:func:`proxy_for`), the trusted certificates, and what a failure means (:class:`NoAnswer`:
whether anything reached the server).
"""

import base64
import functools
import http.client
import importlib.util
import os
import select
import socket
import ssl  # loaded with http.client already: no cost of its own
import sys
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, cast
from urllib.parse import unquote, urlsplit

from .bounded import Bounded, DeadlineTLSSocket, HTTPConnection, HTTPSConnection, time_left
from .heads import Response

__all__ = ["MAX_BODY", "Answer", "Connections", "Dialing", "NoAnswer", "proxy_for"]

#: The largest answer read: a lock answer is a few hundred bytes, an item helper's at most
#: DynamoDB's 400 KB item (a transaction's cancellation reasons: 100 of them).
MAX_BODY = 4 * 1024 * 1024
_UNSIGNED = {"User-Agent": "dynalease-lean/3", "Accept-Encoding": "identity"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: What reusing a connection the server closed while it was idle raises.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class NoAnswer(Exception):
    """No whole answer came back.

    ``sent``: the request may have reached the server (False: it never did: refused,
    unresolvable, a connect timeout). ``timeout``: time ran out; ``cause``: what failed.
    """

    def __init__(self, cause: BaseException | None, *, sent: bool, timeout: bool) -> None:
        super().__init__(str(cause) if cause else f"{'read' if sent else 'connect'} timed out")
        self.cause = cause
        self.sent = sent
        self.timeout = timeout


class Answer(NamedTuple):
    """One HTTP answer: its status, body, ``x-amz-crc32`` and AWS request id."""

    status: int
    payload: bytes
    crc: int | None
    request_id: str | None


class Dialing(NamedTuple):
    """How connections to one endpoint are made and bounded: botocore's client settings
    (``verify``: False, a CA file or directory, or True/None for the default bundle)."""

    connect_timeout: float
    read_timeout: float
    max_connections: int
    verify: bool | str | None = None
    proxies: dict[str, str] | None = None


def proxy_for(url: str, configured: dict[str, str] | None = None) -> str | None:
    """The proxy botocore would send ``url`` through: the configured ones, else the
    environment's and the system's, unless ``NO_PROXY`` or the bypass list names the host."""
    scheme = urlsplit(url).scheme
    if configured:
        proxies = configured
    elif not _proxies_may_be_set():
        return None
    else:
        import urllib.request  # costly on a cold start: only where a proxy may be set

        try:
            bypass = bool(urllib.request.proxy_bypass(urlsplit(url).netloc))
        except (TypeError, socket.gaierror):
            bypass = False
        proxies = {} if bypass else urllib.request.getproxies()
    proxy = proxies.get(scheme)
    if not proxy:
        return None
    # As botocore completes one: a URL without a scheme is an http:// proxy.
    if proxy.startswith(("http:", "https:")):
        return proxy
    return f"http:{proxy}" if proxy.startswith("//") else f"http://{proxy}"


def _proxies_may_be_set() -> bool:
    # Outside macOS and Windows, getproxies() reads only variables ending in _proxy (any case).
    if sys.platform in ("darwin", "win32"):
        return True
    return any(name.lower().endswith("_proxy") for name in os.environ)


class Connections:
    """Keep-alive connections to one endpoint; thread-safe. A connection goes back to the
    idle list (at most ``max_connections``) only once its answer is read whole."""

    def __init__(self, url: str, dialing: Dialing) -> None:
        parts = urlsplit(url)
        self.connect_timeout = dialing.connect_timeout
        self.read_timeout = dialing.read_timeout
        self.proxy = proxy_for(url, dialing.proxies)
        self._target = (parts.hostname or "", parts.port or _DEFAULT_PORTS[parts.scheme])
        self._tls = _tls_context(dialing.verify) if parts.scheme == "https" else None
        self._max_idle = dialing.max_connections
        self._idle: list[Bounded] = []
        self._lock = threading.Lock()
        # Through a proxy, an http:// endpoint is asked for by its absolute URL and an
        # https:// one through a CONNECT tunnel; each carries the proxy's credentials.
        self._proxy_headers: dict[str, str] = {}
        self._path = "/"
        if self.proxy is not None:
            self._proxy_headers = _proxy_authorization(self.proxy)
            if self._tls is None:
                self._path = url

    def drop(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def post(
        self,
        headers: dict[str, str],
        body: bytes,
        *,
        timeout: float,
        retry_stale: bool,
        late: Callable[[Callable[[], Answer]], object] | None = None,
    ) -> Answer:
        """One POST within ``timeout`` seconds in all.

        ``retry_stale`` (only for requests that change nothing): resend once on a new
        connection if the server had closed the kept-alive one. ``late``: an answer not
        come by ``timeout`` (or an interrupted wait) gets a function that reads the rest on
        another thread; the caller still gets :class:`NoAnswer` (or its interrupt).
        """
        deadline = time.monotonic() + max(timeout, 1e-3)
        headers = {**headers, **_UNSIGNED}
        if self._tls is None:
            headers.update(self._proxy_headers)  # forwarded: the proxy reads them on the request
        connection = self._take_idle()
        while True:
            reused = connection is not None
            if connection is None:
                connection = self._connect(deadline)
            connection.until(deadline)
            try:
                connection.post(self._path, headers, body)
                response = self._head(connection, late)
                if response is None:  # handed to ``late``
                    raise NoAnswer(None, sent=True, timeout=True)
                answer = _read(response)
            except (http.client.HTTPException, OSError, ValueError) as error:
                # ValueError: http.client's reading of a malformed chunk size.
                connection.close()
                if reused and retry_stale and isinstance(error, _STALE):
                    connection = None  # the server had closed it while idle: once more
                    continue
                raise _unanswered(error) from None
            self._give_back(connection, response)
            return answer

    def _head(
        self,
        connection: Bounded,
        late: Callable[[Callable[[], Answer]], object] | None,
    ) -> Response | None:
        """The answer's status line and headers, or None once the rest is ``late``'s.

        A timeout in ``getresponse()`` leaves the request outstanding: another call reads
        the answer from its start (one cut off inside its head is garbled: unanswered).
        """
        try:
            return cast(Response, connection.getresponse())  # Bounded's response_class
        except TimeoutError:
            if late is None:
                raise
            late(functools.partial(self._rest, connection))
            return None
        except BaseException as stop:
            if late is not None and not isinstance(stop, Exception):  # Ctrl-C, exit
                late(functools.partial(self._rest, connection))
            raise

    def _rest(self, connection: Bounded) -> Answer:
        # A late answer gets read_timeout in all, not per read: one that keeps bytes
        # coming would otherwise hold its thread for as long as it likes.
        connection.until(time.monotonic() + self.read_timeout)
        try:
            response = cast(Response, connection.getresponse())
            answer = _read(response)
        except (http.client.HTTPException, OSError, ValueError) as error:
            connection.close()
            raise _unanswered(error) from None
        self._give_back(connection, response)
        return answer

    def _connect(self, deadline: float) -> Bounded:
        host, port = self._target
        if self.proxy is not None:
            proxy = urlsplit(self.proxy)
            host, port = proxy.hostname or "", proxy.port or _DEFAULT_PORTS[proxy.scheme]
        limit = min(self.connect_timeout, time_left(deadline))
        connection: Bounded
        if self._tls is None:
            connection = HTTPConnection(host, port, timeout=limit)
        else:
            connection = HTTPSConnection(host, port, timeout=limit, context=self._tls)
            if self.proxy is not None:
                connection.set_tunnel(*self._target, headers=self._proxy_headers)
        connection.deadline = deadline  # the CONNECT answer and the TLS handshake too
        connection.read_timeout = self.read_timeout
        try:
            connection.connect()
        except (OSError, http.client.HTTPException) as error:
            # OSError covers refusal, name resolution, TLS failures and a refused CONNECT.
            connection.close()
            if isinstance(error, TimeoutError):
                raise NoAnswer(None, sent=False, timeout=True) from None
            raise NoAnswer(error, sent=False, timeout=False) from None
        assert connection.sock is not None
        # http.client turns off Nagle's delay; TCP keep-alive as botocore sets it for locks.
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return connection

    def _take_idle(self) -> Bounded | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if connection.sock is not None and not _readable(connection.sock):
                return connection
            connection.close()  # closed by the server, or unasked-for bytes: never read them

    def _give_back(self, connection: Bounded, response: http.client.HTTPResponse) -> None:
        if response.will_close or not response.isclosed() or connection.sock is None:
            connection.close()
            return
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(connection)
                return
        connection.close()


def _read(response: Response) -> Answer:
    lengths = set(response.fields.get("content-length", ()))
    if len(lengths) > 1:  # http.client would read by the first; the framing is unknowable
        raise ConnectionResetError("answer with conflicting Content-Length headers")
    length = lengths.pop() if lengths else ""
    if length.strip().isdigit() and int(length) > MAX_BODY:
        raise ConnectionResetError("answer larger than dynalease reads")  # never read 100 MB
    payload = response.read(MAX_BODY + 1)
    if len(payload) > MAX_BODY:
        raise ConnectionResetError("answer larger than dynalease reads")
    crc = response.field("x-amz-crc32")
    return Answer(
        response.status,
        payload,
        # A checksum that is not a 32-bit number matches no body: the answer is garbled.
        None if crc is None else int(crc) if crc.isdigit() and len(crc) <= 10 else -1,
        response.field("x-amzn-requestid") or None,
    )


def _unanswered(error: BaseException) -> NoAnswer:
    if isinstance(error, TimeoutError):
        return NoAnswer(None, sent=True, timeout=True)
    return NoAnswer(_without_answer(error), sent=True, timeout=False)


def _without_answer(error: BaseException) -> BaseException:
    """``error`` holding nothing of the answer it refused.

    The error outlives the request (as a ``__cause__``, kept by the engine's errors), and
    its traceback keeps the frames it left with their locals: a refused answer's bytes (up
    to ``MAX_BODY`` each) would live as long as the error, one more for every request.
    """
    if isinstance(error, http.client.IncompleteRead):
        # It holds what it read (``partial``, ``args``); its text says how much.
        return ConnectionResetError(f"answer cut short: {error!r}")
    return error.with_traceback(None)


def _readable(sock: socket.socket) -> bool:
    if hasattr(select, "poll"):  # not on Windows; select() cannot watch descriptors >= 1024
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


def _tls_context(verify: bool | str | None) -> ssl.SSLContext:
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        # botocore: True (or unset) means its default bundle; a string is a CA file or
        # directory.
        path = verify if isinstance(verify, str) else _default_ca_bundle()
        if os.path.isdir(path):
            context = ssl.create_default_context(capath=path)
        else:
            context = ssl.create_default_context(cafile=path)
    context.sslsocket_class = DeadlineTLSSocket  # each read of an answer ends by its deadline
    return context


def _default_ca_bundle() -> str:
    # As botocore.httpsession.get_cert_path(True), without importing botocore.
    try:
        import certifi

        return str(certifi.where())
    except ImportError:
        spec = importlib.util.find_spec("botocore")
        assert spec is not None and spec.origin is not None
        return os.path.join(os.path.dirname(spec.origin), "cacert.pem")


def _proxy_authorization(proxy: str) -> dict[str, str]:
    parts = urlsplit(proxy)
    if not (parts.username and parts.password):
        return {}
    pair = f"{unquote(parts.username)}:{unquote(parts.password)}".encode()
    return {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}
