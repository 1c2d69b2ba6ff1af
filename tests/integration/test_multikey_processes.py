"""Multi-key locks across processes: overlapping key sets never hold at once, and the
rows of a holder killed with SIGKILL are all taken over by observation."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pathlib
import signal
import time
from typing import Any

from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock

#: Pairwise overlapping key sets, in orders that deadlock one-by-one acquisition.
KEY_SETS = [("a", "b"), ("b", "c"), ("c", "a"), ("b",)]
ROUNDS = 4


def _client(endpoint: str) -> DynamoDBClient:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    return DynamoDBClient(region="us-east-1", endpoint_url=endpoint)


def _take_turns(endpoint: str, table: str, keys: tuple[str, ...], log: str) -> None:
    client = _client(endpoint)
    for _ in range(ROUNDS):
        with SyncDistributedLock(client, table=table, keys=list(keys), wait_timeout=60):
            start = time.time()
            time.sleep(0.02)
            with open(log, "a") as out:
                out.write(f"{','.join(keys)} {start} {time.time()}\n")


def _hold_until_killed(endpoint: str, table: str, keys: list[str], held: Any) -> None:
    client = _client(endpoint)
    with SyncDistributedLock(client, table=table, keys=keys, lease_duration=1.0) as lease:
        held.put(lease.owner)
        time.sleep(120)


def test_guards_with_overlapping_key_sets_never_hold_at_once(
    endpoint: str, client: DynamoDBClient, tmp_path: pathlib.Path
) -> None:
    table = fresh_lock_table(client, "multikey-history")
    log = str(tmp_path / "history.txt")
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_take_turns, args=(endpoint, table, keys, log)) for keys in KEY_SETS
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(180)
        assert worker.exitcode == 0
    history = []
    for line in pathlib.Path(log).read_text().splitlines():
        keys, start, end = line.split()
        history.append((set(keys.split(",")), float(start), float(end)))
    assert len(history) == ROUNDS * len(KEY_SETS)
    overlaps = [
        (one, other)
        for one, other in itertools.combinations(history, 2)
        if one[0] & other[0] and one[1] < other[2] and other[1] < one[2]
    ]
    assert overlaps == []


def test_a_holder_killed_while_holding_n_keys_is_recovered_by_observation_for_all(
    endpoint: str, client: DynamoDBClient
) -> None:
    table = fresh_lock_table(client, "multikey-kill")
    keys = [f"row:{index}" for index in range(20)]
    context = multiprocessing.get_context("spawn")
    held = context.Queue()
    holder = context.Process(target=_hold_until_killed, args=(endpoint, table, keys, held))
    holder.start()
    try:
        dead_owner = held.get(timeout=60)
        os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
    finally:
        holder.join(10)
        if holder.is_alive():
            holder.kill()
    rows = [client.sync_get_item(table, {"key": key}, consistent_read=True) for key in keys]
    assert {row["owner"] for row in rows if row} == {dead_owner} and all(rows)
    started = time.monotonic()
    with SyncDistributedLock(client, table=table, keys=keys, wait_timeout=15) as lease:
        waited = time.monotonic() - started
        owners = {
            client.sync_get_item(table, {"key": key}, consistent_read=True)["owner"]  # type: ignore[index]
            for key in keys
        }
        assert owners == {lease.owner}
    assert waited >= 0.9  # not before the stored lease (1 s) was observed unchanged
    assert all(client.sync_get_item(table, {"key": key}) is None for key in keys)
