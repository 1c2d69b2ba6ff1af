"""The lock client's botocore settings and the botocore transport."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._engine.store import LoopTransport, Request
from .errors import map_client_error, map_transport_error, unreadable_answer

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.config import Config

__all__ = [
    "LOCK_CONNECT_TIMEOUT_S",
    "LOCK_POOL_CONNECTIONS",
    "LOCK_READ_TIMEOUT_S",
    "BotoTransport",
    "lock_config",
]

#: The lock protocol bounds and retries its own requests; these are ceilings.
LOCK_CONNECT_TIMEOUT_S = 5.0
LOCK_READ_TIMEOUT_S = 5.0
LOCK_POOL_CONNECTIONS = 64


def lock_config(user: Config | None) -> Config:
    """The user's config with SDK retries off and bounded timeouts."""
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


class BotoTransport(LoopTransport):
    """Requests through a botocore client made on first use: making it may call the metadata
    service, and decorating or constructing a lock must make no request."""

    def __init__(self, factory: Callable[[], BaseClient]) -> None:
        self._factory = factory
        self._client: BaseClient | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> BaseClient:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
                client = self._client
        return client

    async def prepare(self) -> None:
        import asyncio

        if self._client is None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, lambda: self.client)
            except Exception:  # the first request tries again and reports it, mapped
                return

    def handle(self, request: Request) -> dict[str, Any]:
        """Through the client's public method, so hooks and tracers (X-Ray, OpenTelemetry)
        see the call; botocore's own timeouts bound it (``blocking`` is False)."""
        import botocore.exceptions  # loaded by the time a client exists (binds botocore)

        operation = request.operation
        try:
            method = getattr(self.client, botocore.xform_name(operation))
            response: dict[str, Any] = method(**request.params)
        except botocore.exceptions.ClientError as error:
            raise map_client_error(error, operation) from error
        except (botocore.exceptions.BotoCoreError, OSError) as error:
            raise map_transport_error(error, operation) from error
        except RecursionError as error:
            # botocore's parser recurses: an answer nested past the limit is one it could
            # not read, as the lean path's codec treats it.
            raise unreadable_answer(self.client.meta.endpoint_url, operation) from error
        return response
