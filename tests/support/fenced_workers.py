"""A lock holder in its own process that writes to PostgreSQL, for the paused-holder tests.

The target of a process started with multiprocessing's ``spawn`` method: it
builds its own DynamoDBClient and PostgreSQL connection in the child and talks
to the test only through the queue and event it is given (see workers.py).
"""

from __future__ import annotations

import os
from typing import Any

from dynalease.exceptions import LockLost
from dynalease.fencing import fenced_update
from dynalease.lock import SyncDistributedLock
from support.workers import WORKER_LIMIT_S, Target


def write_row(connection: Any, table: str, state: str, token: int | None) -> bool:
    """Write row 1 of ``table``: fenced with ``token``, or (None) as unfenced code does."""
    if token is None:
        cursor = connection.cursor()
        cursor.execute(f"UPDATE {table} SET state = %s WHERE id = 1", (state,))
        accepted = bool(cursor.rowcount == 1)
        cursor.close()
    else:
        accepted = fenced_update(
            connection, table, set={"state": state}, where={"id": 1}, token=token
        )
    connection.commit()
    return accepted


def hold_pause_then_write(
    target: Target, fencing: bool, dsn: str, pg_table: str, events: Any, resume: Any
) -> None:
    """Acquire, report ``("held", owner, token, pid)``, wait for ``resume``, then write.

    The test SIGSTOPs this process while it waits, lets its lease run out, takes
    the lock over and writes; once resumed this holder writes as if nothing
    happened (the classic stale write) and reports ``("outcome", {...})``.
    """
    import psycopg

    client = target.client()
    outcome: dict[str, Any] = {}
    with psycopg.connect(dsn) as connection:
        guard = SyncDistributedLock(
            client,
            table=target.table,
            key=target.key,
            lease_duration=target.lease,
            wait_timeout=30,
            fencing=fencing,
        )
        try:
            with guard:
                token = guard.fencing_token if fencing else None
                events.put(("held", guard.owner, token, os.getpid()))
                resume.wait(WORKER_LIMIT_S)
                outcome["accepted"] = write_row(connection, pg_table, "late write by A", token)
            outcome["release"] = "released"
        except LockLost:
            outcome["release"] = "LockLost"
    events.put(("outcome", outcome))
