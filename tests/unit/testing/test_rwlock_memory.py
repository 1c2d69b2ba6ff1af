"""Read/write locks on the MemoryBackend (users' test double): readers share, a writer
is alone, in one process without a server."""

from __future__ import annotations

import pytest

from dynalease.exceptions import LockNotAcquired
from dynalease.rwlock import SyncReadLock, SyncWriteLock
from dynalease.testing import MemoryBackend


def test_readers_share_and_a_writer_waits_for_them_on_the_memory_backend() -> None:
    with MemoryBackend() as backend:
        client = backend.client
        client.sync_create_table("locks", partition_key=("key", "S"))
        with (
            SyncReadLock(client, table="locks", key="cfg"),
            SyncReadLock(client, table="locks", key="cfg"),
        ):
            with pytest.raises(LockNotAcquired):
                with SyncWriteLock(client, table="locks", key="cfg", wait_timeout=0):
                    pass
        with SyncWriteLock(client, table="locks", key="cfg") as writer:
            assert writer.fencing_token == 2  # the refused writer's row counted 1
        assert backend.tables()["locks"] == [
            {"key": "dynalease-writer:cfg", "protocol": 2, "fence": 2}
        ]
