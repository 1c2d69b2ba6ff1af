"""A read/write lock with 8 reader and 2 writer processes, SIGKILLs among both, on moto.

Every worker reports when it holds the key and when it lets go (both inside its
lease's validity); holders killed while holding end at the kill. The history check:
never a writer with anyone else, never a reader with a writer; both roles got the key
again after the kills (the abandoned rows were recovered by observation); readers
overlapped.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import time
import uuid

import pytest
from support.rw_workers import RwHistory, rw_worker, wait_for
from support.workers import reaped

from dynalease import DynamoDBClient
from dynalease.rwlock import SyncReadLock, SyncWriteLock

READERS = 8
WRITERS = 2
#: Two readers and one writer stay on their 2nd hold until killed.
STAYING = {"r0": 2, "r1": 2, "w0": 2}
#: Long enough for each request (lease/3) on a loaded machine.
LEASE_S = 2.0
CONTEND_S = 8.0

spawn = multiprocessing.get_context("spawn")


@pytest.mark.process_history
def test_never_a_writer_with_anyone_across_processes_with_killed_holders(
    client: DynamoDBClient, endpoint: str
) -> None:
    table = f"locks-{uuid.uuid4().hex[:10]}"
    client.sync_create_table(table, partition_key=("key", "S"), wait=True)
    events, stop = spawn.Queue(), spawn.Event()
    history = RwHistory()
    names = [f"r{i}" for i in range(READERS)] + [f"w{i}" for i in range(WRITERS)]
    with reaped([]) as started:
        for name in names:
            role = "read" if name.startswith("r") else "write"
            process = spawn.Process(
                target=rw_worker,
                args=(endpoint, table, role, LEASE_S, name, events, stop),
                kwargs={"stay_on": STAYING.get(name)},
            )
            started.append(process)
            process.start()
        killed_at: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while len(killed_at) < len(STAYING):
            _, _name, owner, pid = wait_for(events, history, "staying", deadline - time.monotonic())
            time.sleep(LEASE_S / 2)  # renewing, as a live holder would
            os.kill(pid, signal.SIGKILL)
            killed_at[owner] = time.monotonic()
            history.end(owner, killed_at[owner])
        last_kill = max(killed_at.values())
        end = time.monotonic() + CONTEND_S
        while time.monotonic() < end:
            with contextlib.suppress(queue.Empty):
                history.record(events.get(timeout=0.5))
        stop.set()
        finished = 0
        while finished < len(names) - len(STAYING):
            if wait_for(events, history, "done", 60)[0] == "done":
                finished += 1
        for process in started:
            process.join(10)
    assert sorted(p.exitcode for p in started) == [-signal.SIGKILL] * len(STAYING) + [0] * (
        len(names) - len(STAYING)
    )
    assert history.open_holds() == []
    violations = history.violations()
    after = {
        role: sum(1 for r, s, _ in history.holds.values() if r == role and s > last_kill)
        for role in ("read", "write")
    }
    print(
        f"\nrw history: {history.count('read')} reads and {history.count('write')} writes by "
        f"{READERS} reader and {WRITERS} writer processes ({len(STAYING)} SIGKILLed holding), "
        f"most readers at once {history.most_readers()}, violations {len(violations)}, "
        f"after the last kill {after['read']} reads and {after['write']} writes, refused "
        f"{history.refused}, lost {history.lost}"
    )
    assert violations == []
    assert history.most_readers() >= 2
    assert after["read"] and after["write"], "the key was not recovered after the kills"

    # Nothing leaked: a writer gets the key (free, or abandoned and taken over by observation).
    with SyncWriteLock(client, table=table, key="cfg", lease_duration=LEASE_S, wait_timeout=20):
        pass
    with SyncReadLock(client, table=table, key="cfg", lease_duration=LEASE_S, wait_timeout=20):
        pass
