"""Locks across processes: spawned workers on one moto server, and fork rejection."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pathlib
import time

import pytest

from dynalease import DynamoDBClient
from dynalease.exceptions import ForkedProcessError
from dynalease.lock import SyncDistributedLock


def _worker(endpoint: str, table: str, rounds: int, log: str) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
    for _ in range(rounds):
        with SyncDistributedLock(client, table=table, key="shared", wait_timeout=30):
            start = time.time()
            time.sleep(0.02)
            with open(log, "a") as out:
                out.write(f"{os.getpid()} {start} {time.time()}\n")


def test_spawned_processes_take_turns(endpoint: str, client: DynamoDBClient, tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = "processes"
    if not client.sync_table_exists(table):
        client.sync_create_table(table, partition_key=("key", "S"), wait=True)
    log = str(tmp_path / "log.txt")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_worker, args=(endpoint, table, 3, log)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    lines = pathlib.Path(log).read_text().splitlines()
    spans = sorted(tuple(map(float, line.split()[1:])) for line in lines)
    assert len(spans) == 9
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, "two processes were inside the lock at once"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_client_used_after_fork_is_rejected(client: DynamoDBClient) -> None:
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            SyncDistributedLock(client, table="processes", key="f")
        except ForkedProcessError:
            code = 0
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
