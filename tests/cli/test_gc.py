"""``dynalease gc``: of 1,000 rows, the 100 abandoned are deleted and the 900 live kept.

The 900 live rows are held by nine multi-key guards of 100 keys each (one renewal
transaction per guard every lease/3), so the table renews like 900 holders at nine
holders' cost, and the test stays light on a loaded 2-core machine. Their 9 s lease is
long beside any delay here: a renewal every 3 s, and a guard is lost only after 8.1 s
without one; gc's own delete is conditioned on the version read, which a renewal changes.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

import pytest
from support.cli_runner import Result

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease.admin import read_lock_row

LIVE_LEASE_S = 9.0


def abandon(client: DynamoDBClient, table: str, keys: list[str]) -> None:
    """Rows whose holders died: a pydynox-shaped row each, with a 1 s lease."""
    for key in keys:
        client.sync_put_item(
            table,
            {
                "key": key,
                "owner": str(uuid.uuid4()),
                "version": str(uuid.uuid4()),
                "lease_ms": 1000,
                "protocol": 1,
            },
        )


@pytest.mark.timeout(300)
def test_of_a_thousand_rows_exactly_the_hundred_abandoned_are_deleted(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    dead = [f"dead:{i:03}" for i in range(100)]
    abandon(client, lock_table, dead)
    with contextlib.ExitStack() as stack:
        guards = [
            stack.enter_context(
                SyncDistributedLock(
                    client,
                    table=lock_table,
                    keys=[f"live:{g}:{i:02}" for i in range(100)],
                    lease_duration=LIVE_LEASE_S,
                    wait_timeout=60,
                )
            )
            for g in range(9)
        ]
        dry = dynalease("gc", "--table", lock_table, "--endpoint", endpoint, "--dry-run")
        assert dry.code == 0, dry.err
        assert (
            sorted(line.split("'")[1] for line in dry.out.splitlines() if "abandoned:" in line)
            == dead
        )
        assert all(read_lock_row(client, lock_table, key) is not None for key in dead[:3])

        result = dynalease("gc", "--table", lock_table, "--endpoint", endpoint)
        assert result.code == 0, result.err
        deleted = sorted(
            line.split("'")[1] for line in result.out.splitlines() if "deleted:" in line
        )
        assert deleted == dead
        assert "1000 rows read twice" in result.out and "100 abandoned, deleted 100" in result.out
        for guard in guards:
            guard.raise_if_lost()
            for key in guard.keys:
                item = read_lock_row(client, lock_table, key)
                assert item is not None and item["owner"] == {"S": guard.owner}
    assert all(read_lock_row(client, lock_table, key) is None for key in dead)
    assert all(guard.metrics.renewals >= 2 for guard in guards)  # live all along
