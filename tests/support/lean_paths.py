"""The two ways the lean path sends, for tests that run each case over both.

A guard's requests go out from the runtime loop (async guards, renewals) or from a
sync caller's own thread (its first create and its release); a test marked ``HOW``
runs once each way and sends through :func:`sender_for`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import botocore.session
import pytest
from botocore.config import Config

from dynalease._engine.store import Request
from dynalease._transport.boto import lock_config
from dynalease._transport.lean import LeanTransport

#: Runs a test from the runtime loop ("loop") and from a caller's thread ("thread").
HOW = pytest.mark.parametrize("how", ["loop", "thread"])

Send = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

_SESSION = botocore.session.get_session()  # one session: its service model loads once


def botocore_client(url: str, config: Config | None = None, verify: str | None = None) -> Any:
    """A botocore DynamoDB client on ``url`` with test credentials (the lock client's
    settings unless ``config`` is given)."""
    return _SESSION.create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=url,
        config=config or lock_config(None),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        verify=verify,
    )


def sender_for(transport: LeanTransport, how: str, *, timeout: float = 5.0) -> Send:
    """Send through ``transport`` the way ``how`` names, awaitable from the test's loop."""
    if how == "loop":

        async def on_loop(operation: str, params: dict[str, Any]) -> dict[str, Any]:
            return await transport.handle_async(Request(operation, params))

        return on_loop

    async def send(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        await transport.prepare()
        assert transport.blocking
        late: list[Any] = []
        try:
            # In a thread: the test's server answers on this loop meanwhile.
            return await asyncio.to_thread(
                transport.handle, Request(operation, params, timeout, late.append)
            )
        finally:
            # A create not answered in time goes on in the runtime's pool (its answer
            # could say it landed); the test's server closes it when the test ends.
            for request in late:
                request.cancel()

    return send
