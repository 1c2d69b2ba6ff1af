"""DynamoDB failures as dynalease errors: one mapping for every transport, so a lock sees
the same error for the same failure whichever path carried the request.
"""

import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from .._engine.store import TLS_REFUSED, ConditionFailed
from .._redact import escaped, shown_url
from ..exceptions import (
    AccessDeniedError,
    DynamoDBError,
    RequestFailedError,
    TableNotFoundError,
    ThrottledError,
    TransactionCanceledException,
    ValidationError,
)
from .connections import NoAnswer

if TYPE_CHECKING:
    import botocore.exceptions

__all__ = [
    "map_client_error",
    "map_error_code",
    "map_no_answer",
    "map_transport_error",
    "no_credentials",
    "throttling_reasons",
    "transport_failures",
    "unreadable_answer",
]


def _botocore_exceptions() -> Any:
    # Until something imports botocore none of its exceptions can have been raised: the
    # lean path never imports it just to check.
    return sys.modules.get("botocore.exceptions")


def transport_failures() -> tuple[type[Exception], ...]:
    """For ``except transport_failures():``, evaluated only when something was raised."""
    exceptions = _botocore_exceptions()
    return (OSError,) if exceptions is None else (exceptions.BotoCoreError, OSError)


_THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
}
#: Not applied, safe to retry (neither contention nor an outage).
REPLICATED_WRITE_CONFLICT = "ReplicatedWriteConflictException"
_ACCESS = {
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "ExpiredTokenException",
    "IncompleteSignature",
    "IncompleteSignatureException",
}
_VALIDATION = {"ValidationException", "SerializationException"}


def throttling_reasons(response: dict[str, Any]) -> list[dict[str, str]]:
    found = response.get("ThrottlingReasons")
    if not isinstance(found, list):
        return []
    return [
        {"reason": str(r.get("reason", "")), "resource": str(r.get("resource", ""))}
        for r in found
        if isinstance(r, dict)
    ]


def map_client_error(error: "botocore.exceptions.ClientError", operation: str) -> Exception:
    response: dict[str, Any] = dict(error.response or {})
    err = response.get("Error", {}) or {}
    code = str(err.get("Code", "")).rsplit("#", 1)[-1]
    message = escaped(str(err.get("Message", "")) or str(error))  # a server's text, as codec
    metadata = response.get("ResponseMetadata") or {}
    status = int(metadata.get("HTTPStatusCode", 0) or 0)
    request_id = metadata.get("RequestId") or None
    return map_error_code(code, message, operation, status, response, request_id=request_id)


class _Meaning(NamedTuple):
    """What an error code means: the error raised, its words (a template over
    ``operation``, ``code``, ``message``, ``status`` and the throttling ``reasons``,
    ``advice`` and ``permits`` below), and for a ``RequestFailedError`` whether it may
    have been applied."""

    error: type[DynamoDBError]
    words: str
    may_have_committed: bool | None = None


_TABLE_MISSING = _Meaning(
    TableNotFoundError,
    "{operation} failed: the table does not exist in this account, Region and endpoint "
    "({message}). If it exists elsewhere, the Region or endpoint is wrong "
    "(`dynalease doctor --table NAME` checks where requests go); if not, create it first, "
    "e.g. client.sync_create_table(name, partition_key=('key', 'S'), wait=True)",
)
_REFUSED = _Meaning(
    AccessDeniedError,
    "{operation} was refused ({code}: {message}); check the credentials and that the IAM "
    "policy allows this action on the table{permits}",
)
_THROTTLED = _Meaning(
    ThrottledError, "{operation} was throttled ({code}{reasons}); it was not applied. {advice}"
)
_CONFLICTED = _Meaning(
    RequestFailedError,
    "{operation} conflicted with a concurrent write to the same item from another Region of "
    "this multi-Region strongly consistent global table ({message}); it was not applied and "
    "is safe to retry",
    may_have_committed=False,
)
_INVALID = _Meaning(ValidationError, "{operation} was rejected as invalid: {message}")
#: Codes not in :data:`_MEANINGS`: by the answer's status.
_SERVER_FAILED = _Meaning(
    RequestFailedError,
    "{operation} failed on the server ({status} {code}: {message}); it may have been applied",
    may_have_committed=True,
)
_FAILED = _Meaning(DynamoDBError, "{operation} failed ({code}: {message})")

_MEANINGS: dict[str, _Meaning] = {
    "ResourceNotFoundException": _TABLE_MISSING,
    **dict.fromkeys(_ACCESS, _REFUSED),
    **dict.fromkeys(_THROTTLING, _THROTTLED),
    REPLICATED_WRITE_CONFLICT: _CONFLICTED,
    **dict.fromkeys(_VALIDATION, _INVALID),
}
#: Said after an access error on a semaphore's poll.
_PERMITS = (
    " (a semaphore polls its permits with it: LockTable.grant_semaphore grants it besides "
    "the lock's actions)"
)


def map_error_code(
    code: str,
    message: str,
    operation: str,
    status: int,
    response: dict[str, Any],
    *,
    request_id: str | None = None,
) -> Exception:
    """DynamoDB's error answer as the error a lock raises: a failed condition and a cancelled
    transaction are the protocol's outcomes; every other code is looked up in a table."""
    if code == "ConditionalCheckFailedException":
        return ConditionFailed(response.get("Item"), request_id)
    if code == "TransactionCanceledException":
        return TransactionCanceledException(
            f"DynamoDB cancelled the transaction: {message}",
            reasons=response.get("CancellationReasons") or [],
            request_id=request_id,
        )
    meaning = _MEANINGS.get(code) or (_SERVER_FAILED if status >= 500 else _FAILED)
    reasons = throttling_reasons(response) if meaning is _THROTTLED else []
    text = meaning.words.format(
        operation=operation,
        code=code,
        message=message,
        status=status,
        reasons="".join(f", {r['reason']}" for r in reasons),
        advice=ThrottledError.advice_for(reasons),
        permits=_PERMITS if operation == "BatchGetItem" else "",
    )
    fields: dict[str, Any] = {"code": code, "operation": operation, "request_id": request_id}
    if meaning.may_have_committed is not None:
        fields["may_have_committed"] = meaning.may_have_committed
    if reasons:
        fields["reasons"] = reasons
    return meaning.error(text, **fields)


def map_transport_error(error: Exception, operation: str) -> Exception:
    _hide_url_secrets(error)
    exceptions = _botocore_exceptions()
    if exceptions is not None and isinstance(
        error, exceptions.NoCredentialsError | exceptions.PartialCredentialsError
    ):
        return no_credentials(operation, error)
    check = _untrusted_certificate(error)
    if check is not None:
        fields = getattr(error, "kwargs", None)
        url = fields.get("endpoint_url") if isinstance(fields, dict) else None
        return _tls_refused(check, operation, url if isinstance(url, str) else None)
    never_sent = False
    if exceptions is not None and isinstance(error, exceptions.BotoCoreError):
        # A failed connect, or anything botocore raised before sending (a setting it
        # refuses, an endpoint it cannot resolve): nothing went out.
        network = exceptions.HTTPClientError | exceptions.ConnectionError
        connect = (
            exceptions.EndpointConnectionError
            | exceptions.ConnectTimeoutError
            | exceptions.ProxyConnectionError
        )
        never_sent = isinstance(error, connect) or not isinstance(error, network)
    return _not_completed(operation, str(error), type(error).__name__, sent=not never_sent)


#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH.
_NAME_MISMATCH = frozenset({62, 64})
#: OpenSSL's verify codes for a chain that ends at no trusted authority: an issuer not
#: found (2, 20), a self-signed certificate or chain (18, 19), a leaf it cannot check (21).
_UNKNOWN_ISSUER = frozenset({2, 18, 19, 20, 21})


def _untrusted_certificate(error: object) -> Exception | None:
    """The certificate check that failed somewhere in ``error``'s causes, or None.

    botocore keeps urllib3's error in ``kwargs``, which keeps the ``ssl`` one in its args;
    urllib3 checks an IP address against the certificate itself, with its own class.
    """
    ssl = sys.modules.get("ssl")
    if ssl is None:
        return None  # no TLS was ever attempted
    checks: tuple[type[BaseException], ...] = (ssl.SSLCertVerificationError,)
    urllib3_check = sys.modules.get("urllib3.util.ssl_match_hostname")
    if urllib3_check is not None:
        checks += (urllib3_check.CertificateError,)
    seen: set[int] = set()
    pending: list[object] = [error]
    while pending and len(seen) < 16:
        found = pending.pop()
        if not isinstance(found, BaseException) or id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, checks):
            return found  # type: ignore[return-value]  # both are Exception subclasses
        fields = getattr(found, "kwargs", None)
        if isinstance(fields, dict):
            pending.append(fields.get("error"))
        pending += [*found.args, found.__cause__, found.__context__]
    return None


def _tls_refused(check: Exception, operation: str, url: str | None) -> RequestFailedError:
    """A certificate that failed verification: not an outage, and never sent.

    The check runs as the connection is made, before any byte of the request is written,
    on both paths: ``http.client`` in the handshake, urllib3 in the handshake or just
    after it (a name it checks itself), and either closes the socket on failure.
    """
    reason = str(getattr(check, "verify_message", None) or check).rstrip(".")
    name = getattr(check, "reason", None)
    if name:  # OpenSSL's name for it, as people search for it
        reason += f" ({name})"
    code = getattr(check, "verify_code", None)
    where = f" for {url}" if url is not None else ""
    if code in _NAME_MISMATCH or "match" in reason:
        advice = (
            "The certificate does not name the host in the endpoint URL: set endpoint_url "
            "(or AWS_ENDPOINT_URL_DYNAMODB) to a host name the certificate is issued for. "
            "If that is DynamoDB's own endpoint, something on the network path (a proxy "
            "or a middlebox) answered in its place"
        )
    elif code is None or code in _UNKNOWN_ISSUER:
        advice = (
            "The authority that issued the certificate is not trusted: point "
            "AWS_CA_BUNDLE (or verify= on a boto3 client given to "
            "DynamoDBClient.from_client) at a bundle that holds it. An intercepting "
            "proxy's authority belongs in that bundle too"
        )
    else:
        advice = (
            "The certificate itself was refused for the reason given: the endpoint must "
            "present a valid one (an expired or not yet valid one may also mean this "
            "machine's clock is wrong)"
        )
    return RequestFailedError(
        f"{operation} did not complete: TLS verification failed{where}: {reason}; it was "
        f"not sent. {advice}",
        code=TLS_REFUSED,
        operation=operation,
        may_have_committed=False,
    )


def _hide_url_secrets(error: Exception) -> None:
    """Rewrite a botocore error's endpoint URL as :func:`shown_url` shows it, in its text and
    its fields: it stays the cause of the mapped error, so tracebacks and spans print it."""
    fields = getattr(error, "kwargs", None)
    if not isinstance(fields, dict):
        return
    url = fields.get("endpoint_url")
    if not isinstance(url, str) or shown_url(url) == url:
        return
    fields["endpoint_url"] = shown_url(url)
    error.args = tuple(
        part.replace(url, shown_url(url)) if isinstance(part, str) else part for part in error.args
    )


#: A failed lean exchange, named and worded as botocore's error for the same failure:
#: (sent, timed out) -> (code, what happened).
_NO_ANSWER = {
    (False, True): ("ConnectTimeoutError", 'Connect timeout on endpoint URL: "{url}"'),
    (False, False): ("EndpointConnectionError", 'Could not connect to the endpoint URL: "{url}"'),
    (True, True): ("ReadTimeoutError", 'Read timeout on endpoint URL: "{url}"'),
    (True, False): (
        "ConnectionClosedError",
        'Connection was closed before we received a valid response from endpoint URL: "{url}".',
    ),
}


def map_no_answer(failure: NoAnswer, url: str, operation: str) -> RequestFailedError:
    """A request that got no whole answer, as botocore names and words the same failure."""
    url = shown_url(url)
    check = None if failure.sent else _untrusted_certificate(failure.cause)
    if check is not None:
        return _tls_refused(check, operation, url)
    code, what = _NO_ANSWER[failure.sent, failure.timeout]
    return _not_completed(operation, what.format(url=url), code, sent=failure.sent)


def unreadable_answer(url: str, operation: str) -> RequestFailedError:
    """An answer that came back whole but cannot be read: it may have been applied."""
    return map_no_answer(NoAnswer(None, sent=True, timeout=False), url, operation)


def no_credentials(operation: str, why: object) -> AccessDeniedError:
    """No credentials to sign ``operation`` with (``why``: what was missing)."""
    return AccessDeniedError(
        f"{operation}: no usable AWS credentials ({why}); configure credentials "
        "(environment, profile or role) or pass access_key/secret_key",
        code="NoCredentials",
        operation=operation,
    )


def _not_completed(operation: str, what: str, code: str, *, sent: bool) -> RequestFailedError:
    return RequestFailedError(
        f"{operation} did not complete: {what}"
        + ("; it may have been applied" if sent else "; it was not sent"),
        code=code,
        operation=operation,
        may_have_committed=sent,
    )
