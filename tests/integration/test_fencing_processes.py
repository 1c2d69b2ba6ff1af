"""The paused holder against PostgreSQL, with real processes: fenced, its late write is refused.

Holder A (its own process) acquires and is SIGSTOPped past its lease; B takes
the lock over and writes row 1 of a PostgreSQL table; A is resumed and writes
the same row as if it still held the lock. Without fencing A's late write
lands over B's (the failure a lease alone cannot prevent, shown); with
``fencing=True`` PostgreSQL refuses it and nothing of A's lands.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.fenced_workers import hold_pause_then_write, write_row
from support.postgres import Cluster
from support.worker_messages import expect
from support.workers import Target, new_target

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock

LEASE_S = 2.0
SLACK_S = 3.0  # room for a loaded machine on top of protocol timing

spawn = multiprocessing.get_context("spawn")


@pytest.fixture
def pg_table(postgres: Cluster) -> Iterator[tuple[str, Any]]:
    import psycopg

    name = f"ledger_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn) as connection:
        connection.execute(
            f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, state TEXT, fence BIGINT)"
        )
        connection.execute(f"INSERT INTO {name} (id, state) VALUES (1, 'new')")
        connection.commit()
        yield name, connection


#: What one run came to: A's outcome, the final row, A's token, B's token.
Scenario = tuple[dict[str, Any], tuple[Any, ...], int | None, int | None]


def paused_holder_scenario(
    client: DynamoDBClient,
    target: Target,
    fencing: bool,
    dsn: str,
    pg_table: tuple[str, Any],
    processes: list[Any],
) -> Scenario:
    """Run the scenario; (A's outcome, the final row, A's token, B's token)."""
    table, connection = pg_table
    events, resume = spawn.Queue(), spawn.Event()
    holder = spawn.Process(
        target=hold_pause_then_write, args=(target, fencing, dsn, table, events, resume)
    )
    processes.append(holder)
    holder.start()
    _, a_owner, a_token, pid = expect(events, "held")
    os.kill(pid, signal.SIGSTOP)  # A stops: no renewals, no code, until SIGCONT
    try:
        with SyncDistributedLock(
            client,
            table=target.table,
            key=target.key,
            lease_duration=LEASE_S,
            wait_timeout=LEASE_S + SLACK_S + 5,
            fencing=fencing,
        ) as b:
            assert b.owner != a_owner
            b_token = b.fencing_token if fencing else None
            assert write_row(connection, table, "write by B", b_token)
    finally:
        os.kill(pid, signal.SIGCONT)
        resume.set()
    _, outcome = expect(events, "outcome")
    holder.join(30)
    assert holder.exitcode == 0
    cursor = connection.cursor()
    cursor.execute(f"SELECT state, fence FROM {table} WHERE id = 1")
    row = tuple(cursor.fetchone())
    return outcome, row, a_token, b_token


@pytest.fixture
def paused_holder(
    client: DynamoDBClient,
    endpoint: str,
    postgres: Cluster,
    pg_table: tuple[str, Any],
    processes: list[Any],
) -> Callable[..., Scenario]:
    """The scenario on a fresh lock table, run with ``fencing=True`` or ``False``."""

    def run(*, fencing: bool) -> Scenario:
        target = new_target(client, endpoint, lease=LEASE_S)
        return paused_holder_scenario(client, target, fencing, postgres.dsn, pg_table, processes)

    return run


def test_unfenced_the_paused_holders_late_write_lands_over_the_new_owners(
    paused_holder: Callable[..., Scenario],
) -> None:
    outcome, row, _, _ = paused_holder(fencing=False)
    # The failure: A's write is accepted and B's is gone. The lease alone cannot stop it.
    assert outcome == {"accepted": True, "release": "LockLost"}
    assert row == ("late write by A", None)


def test_fenced_postgresql_refuses_the_paused_holders_late_write(
    paused_holder: Callable[..., Scenario],
) -> None:
    outcome, row, a_token, b_token = paused_holder(fencing=True)
    assert a_token is not None and b_token is not None and b_token > a_token
    assert outcome == {"accepted": False, "release": "LockLost"}
    assert row == ("write by B", b_token)  # nothing of A's landed
