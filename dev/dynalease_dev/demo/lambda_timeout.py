"""The demo's Lambda timeout: a handler killed while it holds a lock, and the next one's wait.

Run once by the demo's Lambda process before its regular invocations, under the
local control plane (``dynalease_dev.lambda_plane``, with ``awslambdaric``
from the dev extra) and with the recovery extension: :func:`handler` takes
``demo:lambda-timeout`` (3 s lease) and sleeps past its 2 s timeout; the plane
kills the runtime and sends ``SHUTDOWN``; the extension deletes the row; a
second invocation for the same key says how long it waited for the lock.

This file is also the handler module: the runtime imports it as the top-level
module ``lambda_timeout``, so its imports are absolute.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

LEASE_S = 3.0
TIMEOUT_S = 2.0
KEY = "demo:lambda-timeout"


def handler(event: dict[str, Any], context: Any) -> dict[str, float]:
    """Take the key (for ``lease_s``, default 3 s); with ``sleep``, hold it past the timeout."""
    from dynalease.client import DynamoDBClient
    from dynalease.lock import SyncDistributedLock

    lease_s = float(event.get("lease_s", LEASE_S))
    started = time.monotonic()
    with SyncDistributedLock(
        DynamoDBClient(),
        table=os.environ["DYNALEASE_TABLE"],
        key=event["key"],
        lease_duration=lease_s,
        wait_timeout=lease_s + 5,
    ):
        waited = time.monotonic() - started
        if event.get("sleep"):
            time.sleep(600)
    return {"waited_s": waited}


def scenario(
    table: str, key: str = KEY, lease_s: float = LEASE_S, shutdown_window_ms: int | None = None
) -> str:
    """Run the timeout and the next invocation; one line saying what happened.

    ``shutdown_window_ms``: the extensions' time after SHUTDOWN (default Lambda's 2,000 ms).
    """
    import importlib.util

    if importlib.util.find_spec("awslambdaric") is None:
        return "Lambda timeout skipped: awslambdaric (dev extra) is not installed"
    from dynalease_dev.lambda_plane import SHUTDOWN_WINDOW_MS, ControlPlane
    from dynalease_dev.lifecycle import layer_directory

    with tempfile.TemporaryDirectory(prefix="dynalease-demo-lambda-") as temporary:
        directory = Path(temporary)
        plane = ControlPlane(
            task=Path(__file__).resolve().parent,
            handler="lambda_timeout.handler",
            layer=layer_directory(directory / "layer", extension=True),
            environment={**os.environ, "DYNALEASE_TABLE": table},
            timeout=TIMEOUT_S,
            journal=directory / "journal",
            logs=directory / "logs",
            shutdown_window_ms=shutdown_window_ms or SHUTDOWN_WINDOW_MS,
        )
        try:
            first = plane.invoke({"key": key, "sleep": True, "lease_s": lease_s})
            second = plane.invoke({"key": key, "lease_s": lease_s}, timeout=lease_s + 10)
        finally:
            plane.close()
    if first.status != "timeout" or second.status != "ok" or not isinstance(second.payload, dict):
        return f"Lambda timeout: unexpected outcomes {first.status}, {second.status}"
    return (
        f"a Lambda handler holding {key} was killed at its {TIMEOUT_S:g} s timeout; the "
        f"recovery extension deleted its row; the next invocation waited "
        f"{second.payload['waited_s']:.2f} s for the lock (without it: the {lease_s:g} s lease)"
    )
