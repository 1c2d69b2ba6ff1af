"""The test side of a worker process's messages (tests/support/workers.py sends them).

Kept apart from the workers themselves so that spawned workers never import pytest.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

#: How long the test waits for one message: generous, two cores shared by many tests.
MESSAGE_TIMEOUT_S = 60.0


def expect(events: Any, name: str) -> tuple[Any, ...]:
    """The next message on ``events``, which must be ``name``; the test fails otherwise."""
    try:
        message: tuple[Any, ...] = events.get(timeout=MESSAGE_TIMEOUT_S)
    except queue.Empty:
        pytest.fail(f"no {name!r} message from a worker within {MESSAGE_TIMEOUT_S:g} s")
    assert message[0] == name, f"expected {name!r} from a worker, got {message!r}"
    return message
