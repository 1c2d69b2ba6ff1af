"""The lean path's HTTP exchanges with one endpoint, through urllib3.

urllib3 frames the requests, parses the answers (chunked ones included), keeps
connections alive, speaks TLS and reaches HTTPS endpoints through a proxy with
``CONNECT``. What stays ours is what botocore decides around it, decided the same
way: which proxy an endpoint goes through (the configured ones, else the
environment's and the system's, ``NO_PROXY`` included: :func:`proxy_for`), which
certificates are trusted (``verify``), and how much of an answer we read
(:data:`MAX_BODY`). A failed exchange is either :class:`NotSent` (nothing reached
the server) or :class:`Unanswered` (the request may have been applied).
"""

from __future__ import annotations

import os
import socket
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = ["MAX_BODY", "Answer", "Connections", "NotSent", "Unanswered", "proxy_for"]

#: The largest answer read: a lock answer is a few hundred bytes, an item helper's at most
#: DynamoDB's 400 KB item (a transaction's cancellation reasons: 100 of them).
MAX_BODY = 4 * 1024 * 1024
_UNSIGNED = {"User-Agent": "dynalease-lean/2", "Accept-Encoding": "identity"}


class NotSent(Exception):
    """The request never reached the server (refused, unresolvable, connect timeout)."""

    def __init__(self, cause: BaseException | None, *, timeout: bool) -> None:
        super().__init__(str(cause) if cause else "connect timed out")
        self.cause = cause
        self.timeout = timeout


class Unanswered(Exception):
    """The request may have reached the server but no whole answer came back."""

    def __init__(self, cause: BaseException | None, *, timeout: bool) -> None:
        super().__init__(str(cause) if cause else "read timed out")
        self.cause = cause
        self.timeout = timeout


class Answer(NamedTuple):
    """One HTTP answer: its status, body, ``x-amz-crc32`` and AWS request id."""

    status: int
    payload: bytes
    crc: int | None
    request_id: str | None


def proxy_for(url: str, configured: dict[str, str] | None = None) -> str | None:
    """The proxy botocore would send ``url`` through, or None.

    Proxies configured on the client win; otherwise the standard library's reading
    of the environment and the system's settings (macOS, Windows), unless
    ``NO_PROXY`` or the system's bypass list names the host, as botocore reads them.
    """
    import urllib.request

    scheme = urlsplit(url).scheme
    if configured:
        proxies = configured
    else:
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


class Connections:
    """Keep-alive connections to one endpoint (through its proxy, if any); thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        verify: bool | str | None,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
        proxies: dict[str, str] | None = None,
    ) -> None:
        import urllib3

        self.url = url
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        # urllib3's default socket options (no Nagle delay), plus TCP keep-alive, as
        # botocore sets for the lock client (``tcp_keepalive``).
        keepalive = (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        options: dict[str, Any] = {
            "maxsize": max_connections,
            "block": False,
            "socket_options": [
                *urllib3.connection.HTTPConnection.default_socket_options,
                keepalive,
            ],
        }
        if urlsplit(url).scheme == "https":
            options.update(_tls_options(verify))
        proxy = proxy_for(url, proxies)
        manager: urllib3.PoolManager
        if proxy is None:
            manager = urllib3.PoolManager(num_pools=2, **options)
        else:
            headers = urllib3.util.make_headers(proxy_basic_auth=_proxy_auth(proxy))
            manager = urllib3.ProxyManager(proxy, num_pools=2, proxy_headers=headers, **options)
        self.proxy = proxy
        self._manager = manager
        # Without a proxy, the endpoint's own pool: no URL parsing or pool look-up per request.
        self._pool = None if proxy else manager.connection_from_url(url)
        self._urllib3 = urllib3

    def drop(self) -> None:
        """Close every idle connection; the next request connects anew."""
        pools = self._manager.pools  # urllib3 2 forgets pools on clear() without closing them
        for key in list(pools.keys()):
            pool = pools.get(key)
            if pool is not None:
                pool.close()
        self._manager.clear()
        if self._pool is not None:
            self._pool = self._manager.connection_from_url(self.url)

    def post(
        self, headers: dict[str, str], body: bytes, *, timeout: float, retry_stale: bool
    ) -> Answer:
        """Send one POST and read its answer, within ``timeout`` seconds in all.

        With ``retry_stale``, a request whose kept-alive connection the server had
        closed is sent once more on a new one (only for requests that change nothing).
        """
        urllib3 = self._urllib3
        bound = max(timeout, 1e-3)
        limits = urllib3.Timeout(
            total=bound,
            connect=min(self.connect_timeout, bound),
            read=min(self.read_timeout, bound),
        )
        retries: Any = False
        if retry_stale:
            retries = urllib3.Retry(
                total=1, connect=0, read=1, other=0, status=0, redirect=0,
                allowed_methods=frozenset({"POST"}), raise_on_redirect=False,
            )  # fmt: skip
        try:
            send = self._manager.urlopen if self._pool is None else self._pool.urlopen
            response = send(
                "POST",
                self.url if self._pool is None else "/",
                body=body,
                headers={**headers, **_UNSIGNED},
                timeout=limits,
                retries=retries,
                redirect=False,
                preload_content=False,
            )
        except urllib3.exceptions.MaxRetryError as error:  # a resent read failed again
            raise _failure(urllib3, error.reason) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise _failure(urllib3, error) from None
        try:
            return _read(urllib3, response)
        finally:
            response.release_conn()


def _read(urllib3: Any, response: Any) -> Answer:
    """The whole answer, refused as soon as it is known to pass :data:`MAX_BODY`."""
    length = response.headers.get("content-length")
    if length is not None and length.strip().isdigit() and int(length) > MAX_BODY:
        response.close()  # never read 100 MB to keep a connection
        raise Unanswered(ConnectionResetError("answer larger than dynalease reads"), timeout=False)
    try:
        payload = response.read(MAX_BODY + 1, decode_content=False)
        if len(payload) > MAX_BODY:
            response.close()
            raise Unanswered(
                ConnectionResetError("answer larger than dynalease reads"), timeout=False
            )
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
        # ValueError: http.client's reading of a malformed chunk size.
        response.close()
        raise _failure(urllib3, error, sent=True) from None
    crc = response.headers.get("x-amz-crc32")
    return Answer(
        response.status,
        payload,
        # A checksum that is not a 32-bit number matches no body: the answer is garbled.
        None if crc is None else int(crc) if crc.isdigit() and len(crc) <= 10 else -1,
        response.headers.get("x-amzn-RequestId") or None,
    )


def _failure(urllib3: Any, error: BaseException | None, *, sent: bool = False) -> Exception:
    """What a urllib3 failure means: never sent, or sent with its outcome unknown."""
    exceptions = urllib3.exceptions
    if not sent and isinstance(error, exceptions.ProxyError):
        return NotSent(error, timeout=False)
    if not sent and isinstance(error, exceptions.ConnectTimeoutError | exceptions.SSLError):
        # NewConnectionError and NameResolutionError are ConnectTimeoutErrors too.
        timeout = not isinstance(error, exceptions.NewConnectionError)
        return NotSent(error, timeout=timeout)
    timeout = isinstance(error, exceptions.ReadTimeoutError | TimeoutError)
    return Unanswered(None if timeout else error, timeout=timeout)


def _tls_options(verify: bool | str | None) -> dict[str, Any]:
    """urllib3's TLS settings for botocore's ``verify``: False, a CA file or directory, or True."""
    if verify is False:
        return {"cert_reqs": "CERT_NONE", "assert_hostname": False}
    # botocore: True (or unset) means its default bundle; a string is a CA file or directory.
    path = verify if isinstance(verify, str) else _default_ca_bundle()
    if os.path.isdir(path):
        return {"cert_reqs": "CERT_REQUIRED", "ca_cert_dir": path}
    return {"cert_reqs": "CERT_REQUIRED", "ca_certs": path}


def _default_ca_bundle() -> str:
    # As botocore.httpsession.get_cert_path(True), without importing botocore.
    try:
        import certifi

        return str(certifi.where())
    except ImportError:
        import importlib.util

        spec = importlib.util.find_spec("botocore")
        assert spec is not None and spec.origin is not None
        return os.path.join(os.path.dirname(spec.origin), "cacert.pem")


def _proxy_auth(proxy: str) -> str | None:
    """``user:password`` from a proxy URL, as botocore sends it (Basic), else None."""
    from urllib.parse import unquote

    parts = urlsplit(proxy)
    if parts.username and parts.password:
        return f"{unquote(parts.username)}:{unquote(parts.password)}"
    return None
