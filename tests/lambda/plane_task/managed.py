"""Handlers the Managed Instances tests run under the local control plane's multi-concurrent mode.

Each writes ``event["mark"]`` once it holds its lock: the guard's owner, the worker's
pid, ``at`` (wall time) and ``deadline`` (the invocation's deadline, wall time, from
the context). Files are the handlers' only way to talk to the test while they run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from dynalease.exceptions import LockLost
from dynalease.middleware import current_lock, lock_handler


def _write(path: str, body: dict[str, Any]) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(body, handle)
    os.replace(path + ".tmp", path)


def _mark(event: dict[str, Any], context: Any) -> None:
    guard = current_lock()
    deadline = time.time() + context.get_remaining_time_in_millis() / 1000
    _write(
        event["mark"],
        {"owner": guard.owner, "pid": os.getpid(), "at": time.time(), "deadline": deadline},
    )


def _wait_for(path: str, limit_s: float = 60.0) -> None:
    give_up = time.monotonic() + limit_s
    while not Path(path).exists() and time.monotonic() < give_up:
        time.sleep(0.01)


@lock_handler(key="{key}", lease_duration=1.0, wait_timeout=5)
def overrun(event: dict[str, Any], context: Any) -> str:
    """Hold past the timeout, checking ``raise_if_lost`` as careful work does; then wait
    for ``event["go"]`` (the test's other invocation has the key) before returning.
    Without ``event["lost"]``: return at once (that other invocation)."""
    _mark(event, context)
    if "lost" not in event:
        return "held"
    guard = current_lock()
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        try:
            guard.raise_if_lost()
        except LockLost as lost:
            remaining = context.get_remaining_time_in_millis()
            _write(event["lost"], {"at": time.time(), "remaining_ms": remaining, "why": str(lost)})
            break
        time.sleep(0.01)
    _wait_for(event["go"])
    _write(event["done"], {"at": time.time()})
    return "overran"


@lock_handler(key="{key}", lease_duration=3.0, wait_timeout=5)
def hold(event: dict[str, Any], context: Any) -> str:
    """Hold until ``event["go"]`` exists (or at once without one), then return."""
    _mark(event, context)
    if "go" in event:
        _wait_for(event["go"])
    return "held"
