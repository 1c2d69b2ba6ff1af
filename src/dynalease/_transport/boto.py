"""botocore clients for dynalease: building them from the AWS configuration chain,
deriving the lock client, and mapping botocore failures to dynalease errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import botocore.exceptions

from .._engine.store import ConditionFailed

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.config import Config

from ..exceptions import (
    AccessDeniedError,
    DynamoDBError,
    RequestFailedError,
    TableNotFoundError,
    ThrottledError,
    TransactionCanceledException,
    ValidationError,
)

_THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
}
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

#: The lock protocol bounds and retries its own requests; these are ceilings.
LOCK_CONNECT_TIMEOUT_S = 5.0
LOCK_READ_TIMEOUT_S = 5.0
LOCK_POOL_CONNECTIONS = 64


def lock_config(user: Config | None) -> Config:
    """The lock client's config: the user's, with SDK retries off and bounded timeouts."""
    from botocore.config import Config

    overrides = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=min(
            LOCK_CONNECT_TIMEOUT_S,
            float(getattr(user, "connect_timeout", None) or LOCK_CONNECT_TIMEOUT_S),
        ),
        read_timeout=LOCK_READ_TIMEOUT_S,
        max_pool_connections=LOCK_POOL_CONNECTIONS,
        tcp_keepalive=True,
    )
    return user.merge(overrides) if user is not None else overrides


def map_client_error(error: botocore.exceptions.ClientError, operation: str) -> Exception:
    """Translate a DynamoDB error answer into the dynalease error it means."""
    response: dict[str, Any] = dict(error.response or {})
    err = response.get("Error", {}) or {}
    code = str(err.get("Code", "")).rsplit("#", 1)[-1]
    message = str(err.get("Message", "")) or str(error)
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return map_error_code(code, message, operation, status, response)


def map_error_code(
    code: str, message: str, operation: str, status: int, response: dict[str, Any]
) -> Exception:
    """Map a DynamoDB error code (from any transport) to a dynalease error."""
    if code == "ConditionalCheckFailedException":
        return ConditionFailed(response.get("Item"))
    if code == "TransactionCanceledException":
        return TransactionCanceledException(
            f"DynamoDB cancelled the transaction: {message}",
            reasons=response.get("CancellationReasons") or [],
        )
    if code == "ResourceNotFoundException":
        return TableNotFoundError(
            f"{operation} failed: the table does not exist in this account and Region "
            f"({message}). Create it first, e.g. "
            "client.sync_create_table(name, partition_key=('key', 'S'), wait=True)",
            code=code,
            operation=operation,
        )
    if code in _ACCESS:
        return AccessDeniedError(
            f"{operation} was refused ({code}: {message}); check the credentials and that "
            "the IAM policy allows this action on the table",
            code=code,
            operation=operation,
        )
    if code in _THROTTLING:
        return ThrottledError(
            f"{operation} was throttled ({code}); it was not applied. Retry later or raise "
            "the table's capacity",
            code=code,
            operation=operation,
        )
    if code in _VALIDATION:
        return ValidationError(
            f"{operation} was rejected as invalid: {message}", code=code, operation=operation
        )
    if status >= 500:
        return RequestFailedError(
            f"{operation} failed on the server ({status} {code}: {message}); it may have "
            "been applied",
            code=code,
            operation=operation,
            may_have_committed=True,
        )
    return DynamoDBError(f"{operation} failed ({code}: {message})", code=code, operation=operation)


def map_transport_error(error: Exception, operation: str) -> Exception:
    """Translate a botocore transport failure."""
    if isinstance(
        error, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError
    ):
        return AccessDeniedError(
            f"{operation}: no usable AWS credentials ({error}); configure credentials "
            "(environment, profile or role) or pass access_key/secret_key",
            code="NoCredentials",
            operation=operation,
        )
    never_sent = isinstance(
        error,
        botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError,
    )
    return RequestFailedError(
        f"{operation} did not complete: {error}"
        + ("" if never_sent else "; it may have been applied"),
        code=type(error).__name__,
        operation=operation,
        may_have_committed=not never_sent,
    )


class BotoTransport:
    """Low-level DynamoDB requests through a botocore client made on first use.

    Making the client is deferred because it may resolve credentials (which can
    mean a metadata-service call): decorating or constructing a lock must make
    no request. ``send`` runs the blocking call on the runtime's thread pool, so
    the lock protocol never blocks the runtime loop.
    """

    def __init__(self, factory: Callable[[], BaseClient]) -> None:
        self._factory = factory
        self._client: BaseClient | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> BaseClient:
        """The botocore client, created on first use."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
                client = self._client
        return client

    async def prepare(self) -> None:
        """Make the client (which may resolve credentials) on the blocking pool."""
        if self._client is None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, lambda: self.client)
            except Exception:  # the first request tries again and reports it, mapped
                return

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request from this thread."""
        try:
            client: Any = self.client
            response: dict[str, Any] = client._make_api_call(operation, params)
        except botocore.exceptions.ClientError as error:
            raise map_client_error(error, operation) from error
        except (botocore.exceptions.BotoCoreError, OSError) as error:
            raise map_transport_error(error, operation) from error
        return response

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request from the runtime loop, on its blocking pool."""
        return await asyncio.get_running_loop().run_in_executor(None, self.call, operation, params)
