"""AWS Signature Version 4 for the lean request path's DynamoDB POSTs.

botocore's ``SigV4Auth`` handles every AWS service and request shape; lock
requests are always a JSON POST to ``/`` with the same five or six headers, so
signing them is a few hashes. The signing key depends only on the secret, the
UTC date, the Region and the service, so it is derived once a day per secret
instead of four HMACs per request. ``tests/unit/transport/test_signing.py`` checks every
signature against ``botocore.auth.SigV4Auth`` for the same request and time.
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["CONTENT_TYPE", "SigV4Signer", "amz_date", "header_line", "headers_of", "host_header"]

CONTENT_TYPE = "application/x-amz-json-1.0"
_ALGORITHM = "AWS4-HMAC-SHA256"


def amz_date(epoch: float | None = None) -> str:
    """The ``X-Amz-Date`` form of a UTC time (``20260101T120000Z``); now by default."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if epoch is None else epoch))


def header_line(name: str, value: str) -> str:
    """One request header's line: ``name: value`` and its CRLF.

    A name or value holding a line break (a Region or a token read from a
    damaged setting) is refused: it would end the head early and smuggle in
    headers of its own.
    """
    line = f"{name}: {value}\r\n"
    if line.count("\n") != 1 or line.count("\r") != 1:
        raise ValueError("a request header holds a line break")
    return line


def headers_of(fields: str) -> dict[str, str]:
    """The header lines of :meth:`SigV4Signer.fields` as a mapping, in their order."""
    return dict(line.split(": ", 1) for line in fields[:-2].split("\r\n"))


def host_header(scheme: str, host: str, port: int | None) -> str:
    """The Host header (and signed host) for an endpoint, as botocore derives it."""
    name = host.lower()
    if ":" in name:
        name = f"[{name}]"
    if port is not None and port != {"http": 80, "https": 443}.get(scheme):
        name = f"{name}:{port}"
    return name


class SigV4Signer:
    """Signs DynamoDB JSON POST requests to one host and Region.

    ``host`` is the Host header value as botocore derives it from the endpoint
    URL (lower case, port only when it is not the scheme's default).

    Every request signs the same headers in the same order, so all that is
    fixed is joined once: per signer the canonical request's start, per
    identity (access key and session token) and operation the rest of it and
    the header lines. A request then costs two SHA-256 hashes, one HMAC and
    three string joins. Each value from outside (host, Region, key, token,
    operation) passes :func:`header_line`'s check once, where it is
    first made into a line.
    """

    def __init__(self, host: str, region: str, service: str = "dynamodb") -> None:
        self.host = host
        self.region = region
        self.service = service
        self._keys: dict[tuple[str, str], hmac.HMAC] = {}
        self._host_line = header_line("Host", host) + header_line("Content-Type", CONTENT_TYPE)
        self._canonical_start = f"POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{host}\nx-amz-date:"
        self._scope_end = f"/{region}/{service}/aws4_request"
        header_line("Authorization", self._scope_end)  # the Region ends up in that line
        #: (access key, token, target) -> the parts of one identity and operation.
        self._parts: dict[tuple[str, str | None, str], _Parts] = {}

    def _signing_key(self, secret: str, day: str) -> hmac.HMAC:
        """The day's signing key for ``secret``, as an HMAC to copy (derived once a day)."""
        mac = self._keys.get((secret, day))
        if mac is None:
            key = _hmac(("AWS4" + secret).encode(), day)
            for part in (self.region, self.service, "aws4_request"):
                key = _hmac(key, part)
            if len(self._keys) > 8:  # old days and rotated secrets
                self._keys.clear()
            mac = self._keys[(secret, day)] = hmac.new(key, digestmod=hashlib.sha256)
        return mac

    def _parts_of(self, access_key: str, token: str | None, target: str) -> _Parts:
        """The parts of one identity and operation (made once)."""
        parts = self._parts.get((access_key, token, target))
        if parts is None:
            if len(self._parts) > 64:  # rotated keys and tokens
                self._parts.clear()
            parts = self._parts[(access_key, token, target)] = _Parts(access_key, token, target)
        return parts

    def fields(
        self,
        target: str,
        body: bytes,
        access_key: str,
        secret_key: str,
        token: str | None,
        date: str | None = None,
    ) -> str:
        """The signed header lines to send (Host first, ``Authorization`` last).

        ``target`` is the ``X-Amz-Target`` value and ``date`` the ``X-Amz-Date``
        value (now when None); the caller adds the unsigned ones (Content-Length,
        User-Agent).
        """
        if date is None:
            date = amz_date()
        parts = self._parts_of(access_key, token or None, target)
        day = date[:8]
        key = self._signing_key(secret_key, day)
        scope = day + self._scope_end
        canonical = (
            f"{self._canonical_start}{date}{parts.canonical_rest}{hashlib.sha256(body).hexdigest()}"
        )
        to_sign = f"{_ALGORITHM}\n{date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        mac = key.copy()
        mac.update(to_sign.encode())
        signature = mac.hexdigest()
        return (
            f"{self._host_line}{parts.target_line}X-Amz-Date: {date}\r\n{parts.token_line}"
            f"{parts.credential}{scope}, {parts.signed}{signature}\r\n"
        )


class _Parts:
    """What one identity's requests of one operation share: checked once, joined once."""

    __slots__ = ("canonical_rest", "credential", "signed", "target_line", "token_line")

    def __init__(self, access_key: str, token: str | None, target: str) -> None:
        self.target_line = header_line("X-Amz-Target", target)
        header_line("Authorization", access_key)
        if token:
            self.token_line = header_line("X-Amz-Security-Token", token)
            canonical_token = f"x-amz-security-token:{' '.join(token.split())}\n"
            signed = "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
        else:
            self.token_line = canonical_token = ""
            signed = "content-type;host;x-amz-date;x-amz-target"
        #: The canonical request after the date, up to the body's hash.
        self.canonical_rest = f"\n{canonical_token}x-amz-target:{target}\n\n{signed}\n"
        self.credential = f"Authorization: {_ALGORITHM} Credential={access_key}/"
        self.signed = f"SignedHeaders={signed}, Signature="


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.digest(key, message.encode(), "sha256")
