"""``dynalease-dev demo --paused-holder``: the paused holder, without and with fencing.

Holder A, a process of its own, takes the lock and is stopped (``SIGSTOP``) past
its lease; B takes the lock over and writes row 1 of a SQLite ledger; A is
resumed (``SIGCONT``) and writes the same row as if it still held the lock.
Without fencing A's late write lands over B's: the failure a lease alone cannot
prevent. With ``fencing=True`` both write through
:func:`dynalease.fencing.fenced_update` and the ledger refuses A's stale token.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from dynalease.client import DynamoDBClient
from dynalease.exceptions import LockLost
from dynalease.fencing import fenced_update
from dynalease.lock import SyncDistributedLock

from .plan import DemoError

LEASE_S = 1.0
WAIT_S = 60.0
#: The environment a holder process needs to reach the server (credentials, Region).
_PASSED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def _write(ledger: str, writer: str, token: int | None) -> bool:
    """Write row 1 of the ledger: fenced with ``token``, or (None) as unfenced code does."""
    with sqlite3.connect(ledger, timeout=30) as db:
        if token is None:
            return db.execute("UPDATE ledger SET state = ? WHERE id = 1", (writer,)).rowcount == 1
        return fenced_update(db, "ledger", set={"state": writer}, where={"id": 1}, token=token)


def holder(config: dict[str, Any], events: Any, resume: Any) -> None:
    """Holder A (a spawned process): acquire, report, wait to be resumed, write late."""
    os.environ.update(config["env"])
    client = DynamoDBClient(region=config["region"], endpoint_url=config["endpoint"])
    fencing = config["fencing"]
    guard = SyncDistributedLock(
        client, table=config["table"], key=config["key"], lease_duration=LEASE_S, fencing=fencing
    )
    outcome: dict[str, Any] = {}
    try:
        with guard:
            token = guard.fencing_token if fencing else None
            events.put(("held", token, os.getpid()))
            resume.wait(WAIT_S)
            outcome["accepted"] = _write(config["ledger"], "A (late)", token)
    except LockLost:
        outcome["released"] = "LockLost"
    events.put(("outcome", outcome))


def _expect(events: Any, name: str) -> tuple[Any, ...]:
    try:
        message: tuple[Any, ...] = events.get(timeout=WAIT_S)
    except queue.Empty:
        raise DemoError(f"the paused holder sent no {name!r} within {WAIT_S:g} s") from None
    return message


def scenario(client: DynamoDBClient, config: dict[str, Any], fencing: bool) -> tuple[bool, str]:
    """Run it once; (as expected, the line that says what happened)."""
    with tempfile.TemporaryDirectory(prefix="dynalease-paused-") as folder:
        ledger = str(Path(folder) / "ledger.db")
        with sqlite3.connect(ledger) as db:
            db.execute("CREATE TABLE ledger (id INTEGER PRIMARY KEY, state TEXT, fence INTEGER)")
            db.execute("INSERT INTO ledger (id, state) VALUES (1, 'new')")
        key = f"paused-{'fenced' if fencing else 'unfenced'}"
        spawn = multiprocessing.get_context("spawn")
        events, resume = spawn.Queue(), spawn.Event()
        process = spawn.Process(
            target=holder,
            args=({**config, "key": key, "fencing": fencing, "ledger": ledger}, events, resume),
            daemon=True,
        )
        process.start()
        try:
            _, a_token, pid = _expect(events, "held")
            os.kill(pid, signal.SIGSTOP)
            try:
                with SyncDistributedLock(
                    client,
                    table=config["table"],
                    key=key,
                    lease_duration=LEASE_S,
                    wait_timeout=WAIT_S,
                    fencing=fencing,
                ) as b:
                    b_token = b.fencing_token if fencing else None
                    _write(ledger, "B", b_token)
            finally:
                os.kill(pid, signal.SIGCONT)
                resume.set()
            _, outcome = _expect(events, "outcome")
        finally:
            process.join(WAIT_S)
            if process.is_alive():
                process.kill()
        with sqlite3.connect(ledger) as db:
            state, fence = db.execute("SELECT state, fence FROM ledger WHERE id = 1").fetchone()
    if not fencing:
        landed = bool(outcome.get("accepted")) and state == "A (late)"
        return landed, (
            "without fencing: A, paused past its lease, resumed and wrote over B's row: "
            f"the ledger says {state!r} (the failure a lease alone cannot prevent)"
        )
    refused = outcome.get("accepted") is False and (state, fence) == ("B", b_token)
    return refused, (
        f"with fencing=True: A's late write (token {a_token}) was refused; the ledger keeps "
        f"B's write (token {b_token}): {state!r}"
    )


def run_paused_holder(client: DynamoDBClient, endpoint: str | None, region: str | None,
                      table: str, env: dict[str, str]) -> bool:  # fmt: skip
    """Both runs, printed; True when each ended as it must."""
    config = {
        "endpoint": endpoint,
        "region": region,
        "table": table,
        "env": {name: env[name] for name in _PASSED if name in env},
    }
    print(
        f"the paused holder: A holds a lock (lease {LEASE_S:g} s), is stopped with SIGSTOP, "
        "B takes over and writes, A is resumed and writes late",
        flush=True,
    )
    ok = True
    for fencing in (False, True):
        expected, line = scenario(client, config, fencing)
        print(("  " if expected else "  UNEXPECTED ") + line, flush=True)
        ok = ok and expected
    return ok
