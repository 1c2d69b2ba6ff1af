"""AWS Signature Version 4 for the lean path's DynamoDB JSON POSTs to ``/``
(``tests/unit/transport/test_signing.py`` checks it against botocore's ``SigV4Auth``).
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["CONTENT_TYPE", "SigV4Signer", "amz_date", "host_header"]

CONTENT_TYPE = "application/x-amz-json-1.0"
_ALGORITHM = "AWS4-HMAC-SHA256"


def amz_date(epoch: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if epoch is None else epoch))


def host_header(scheme: str, host: str, port: int | None) -> str:
    """As botocore derives it: lower case, the port only when not the scheme's default."""
    name = host.lower()
    if ":" in name:
        name = f"[{name}]"
    if port is not None and port != {"http": 80, "https": 443}.get(scheme):
        name = f"{name}:{port}"
    return name


def _one_line(value: str) -> str:
    """A line break would end the request's head early and smuggle in headers of its own
    (a Region or token read from a damaged setting)."""
    if "\r" in value or "\n" in value:
        raise ValueError("a request header holds a line break")
    return value


class SigV4Signer:
    def __init__(self, host: str, region: str, service: str = "dynamodb") -> None:
        self.host = _one_line(host)
        self.region = _one_line(region)
        self.service = service
        self._keys: dict[tuple[str, str], bytes] = {}

    def _signing_key(self, secret: str, day: str) -> bytes:
        # It depends only on the secret, the day, the Region and the service.
        key = self._keys.get((secret, day))
        if key is None:
            key = _hmac(("AWS4" + secret).encode(), day)
            for part in (self.region, self.service, "aws4_request"):
                key = _hmac(key, part)
            if len(self._keys) > 8:  # old days and rotated secrets
                self._keys.clear()
            self._keys[(secret, day)] = key
        return key

    def headers(
        self,
        target: str,
        body: bytes,
        access_key: str,
        secret_key: str,
        token: str | None,
        date: str | None = None,
    ) -> dict[str, str]:
        """``Authorization`` last; the caller adds the unsigned headers."""
        date = date or amz_date()
        headers = {
            "Host": self.host,
            "Content-Type": CONTENT_TYPE,
            "X-Amz-Target": _one_line(target),
            "X-Amz-Date": date,
        }
        if token:
            headers["X-Amz-Security-Token"] = _one_line(token)
        signed = sorted((name.lower(), _folded(value)) for name, value in headers.items())
        lines = "".join(f"{name}:{value}\n" for name, value in signed)
        names = ";".join(name for name, _ in signed)
        payload = hashlib.sha256(body).hexdigest()
        canonical = f"POST\n/\n\n{lines}\n{names}\n{payload}"
        scope = f"{date[:8]}/{self.region}/{self.service}/aws4_request"
        to_sign = f"{_ALGORITHM}\n{date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = _hmac(self._signing_key(secret_key, date[:8]), to_sign).hex()
        headers["Authorization"] = (
            f"{_ALGORITHM} Credential={_one_line(access_key)}/{scope}, "
            f"SignedHeaders={names}, Signature={signature}"
        )
        return headers


def _folded(value: str) -> str:
    """A header value as SigV4 signs it: inner runs of white space folded to one space."""
    return " ".join(value.split())


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.digest(key, message.encode(), "sha256")
