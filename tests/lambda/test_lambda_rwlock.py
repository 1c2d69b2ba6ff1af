"""The middleware's read/write locks: ``lock_handler(mode="read" | "write")``."""

from __future__ import annotations

from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext

from dynalease import DynamoDBClient
from dynalease.exceptions import LockNotAcquired
from dynalease.middleware import current_lock, lock_handler
from dynalease.rwlock import SyncReadLock, SyncWriteLock


def test_readers_and_writers_take_the_key_from_the_event(lock_table: str) -> None:
    @lock_handler(key="config:{tenant}", mode="write")
    def write(event: Any, context: Any) -> tuple[str, int]:
        guard = current_lock()
        assert isinstance(guard, SyncWriteLock)
        return guard.key, guard.fencing_token

    @lock_handler(key="config:{tenant}", mode="read", wait_timeout=0)
    def read(event: Any, context: Any) -> str:
        guard = current_lock()
        assert isinstance(guard, SyncReadLock)
        return guard.key

    assert write({"tenant": "t1"}, CountdownContext(60)) == ("config:t1", 1)
    assert write({"tenant": "t1"}, CountdownContext(60)) == ("config:t1", 2)
    assert read({"tenant": "t1"}, CountdownContext(60)) == "config:t1"


def test_a_reader_handler_runs_beside_readers_and_not_beside_a_writer(lock_table: str) -> None:
    client = DynamoDBClient()

    @lock_handler(key="config:{tenant}", mode="read", wait_timeout=0)
    def read(event: Any, context: Any) -> int:
        return current_lock().metrics.write_requests

    with SyncReadLock(client, table=lock_table, key="config:t2"):
        assert read({"tenant": "t2"}, CountdownContext(60)) == 1  # the join, so far
    with SyncWriteLock(client, table=lock_table, key="config:t2"):
        with pytest.raises(LockNotAcquired):
            read({"tenant": "t2"}, CountdownContext(60))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "exclusive"}, "mode must be"),
        ({"mode": "read", "permits": 2}, "not with keys"),
        ({"mode": "write", "fencing": True}, "not with keys"),
    ],
)
def test_a_mode_is_checked_at_decoration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        lock_handler(key="k", **options)
