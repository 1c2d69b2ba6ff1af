"""A fair waiter in its own process (started with ``spawn``): it queues for the key, and
reports ``("acquired", name, time.monotonic())`` once it holds it."""

from __future__ import annotations

import os
import time
from typing import Any

from dynalease import DynamoDBClient
from dynalease.fair import SyncFairLock


def fair_waiter(endpoint: str, table: str, lease: float, name: str, events: Any) -> None:
    """Wait for the key (generously: up to 60 s), report, hold it 50 ms."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
    events.put(("started", name, os.getpid()))
    with SyncFairLock(client, table=table, key="hot", lease_duration=lease, wait_timeout=60):
        events.put(("acquired", name, time.monotonic()))
        time.sleep(0.05)
