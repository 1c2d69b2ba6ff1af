"""What every fault matrix test works with: see the ``matrix`` fixture.

A :class:`Matrix` holds the fault proxy, the client talking through it, a client
talking to moto directly (to create tables and read rows as they really are) and
the test's fresh lock table, and offers the operations the tests share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from dynalease import DynamoDBClient
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import SyncDistributedLock
from support.fault_proxy import FaultProxy

#: The matrix's lease: short, so the whole matrix runs in well under a minute.
LEASE = 1.0


@dataclass(frozen=True)
class Matrix:
    proxy: FaultProxy
    #: The client whose every request goes through ``proxy``, warmed up.
    client: DynamoDBClient
    #: A client talking to moto without the proxy.
    direct: DynamoDBClient
    table: str
    #: False when the test is marked ``no_retries``: ``client`` then has SDK
    #: retries off for item and transaction requests too.
    retries: bool = True

    @property
    def faulty(self) -> DynamoDBClient:
        """The client through the proxy, SDK retries as configured."""
        if not self.retries:
            raise RuntimeError("this test is marked no_retries: use matrix.no_retries")
        return self.client

    @property
    def no_retries(self) -> DynamoDBClient:
        """The client through the proxy with SDK retries off (mark the test ``no_retries``)."""
        if self.retries:
            raise RuntimeError("mark the test @pytest.mark.no_retries to use matrix.no_retries")
        return self.client

    def guard(
        self,
        *,
        key: str = "k",
        lease: float = LEASE,
        wait: float = 3.0,
        client: DynamoDBClient | None = None,
        table: str | None = None,
    ) -> SyncDistributedLock:
        """A lock on ``key`` in the test's table, through the proxy unless ``client`` is given."""
        return SyncDistributedLock(
            self.client if client is None else client,
            table=self.table if table is None else table,
            key=key,
            lease_duration=lease,
            wait_timeout=wait,
        )

    def row(self, key: str) -> dict[str, Any] | None:
        """A lock row read straight from moto with a strongly consistent read."""
        return self.direct.sync_get_item(self.table, {"key": key}, consistent_read=True)

    def abandon(self, key: str = "k", lease_ms: int = 500) -> None:
        """A row whose holder crashed: well formed, never renewed."""
        row = {"key": key, "owner": "crashed", "version": "v0", "lease_ms": lease_ms, "protocol": 1}
        self.direct.sync_put_item(self.table, row)

    def assert_owner(self, owner: str) -> None:
        current = self.row("k")
        assert current is not None and current["owner"] == owner

    def assert_turned_away(self) -> None:
        """No double owner: a zero-wait contender on a direct connection is refused."""
        with pytest.raises(LockNotAcquired, match="held by another owner"):
            with self.guard(client=self.direct, wait=0):
                pass

    def results_table(self) -> str:
        """Create ``<table>-results`` (partition key ``job_id`` S) directly on moto; its name."""
        results = f"{self.table}-results"
        self.direct.sync_create_table(results, partition_key=("job_id", "S"), wait=True)
        return results
