"""Deterministic budgets: what an import loads, how many requests a cycle sends, which
threads a held lock needs. Counts, never times (times are the benchmarks' job).

Each import budget runs in a fresh interpreter, which reads its own ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease.testing import MemoryBackend

#: Never loaded by the library's imports: the AWS SDK's sessions and clients (the lock
#: path reads its configuration itself), the CLI's, the demo's and the CDK's tooling.
NEVER_AT_IMPORT = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "rich",
    "aws_cdk",
    "moto",
    "dynalease.cli",
    "dynalease_dev",
    "dynalease.cdk",
    "dynalease.testing",
    "dynalease._tooling",
)


def _loaded_after(statement: str) -> dict[str, object]:
    code = (
        "import sys, threading, json\n"
        f"{statement}\n"
        "print(json.dumps({'modules': sorted(sys.modules), "
        "'threads': threading.active_count()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded: dict[str, object] = json.loads(out)
    return loaded


def test_import_dynalease_loads_no_sdk_no_event_loop_and_no_tooling() -> None:
    loaded = _loaded_after("import dynalease")
    modules = loaded["modules"]
    assert isinstance(modules, list)
    unwanted = [m for m in (*NEVER_AT_IMPORT, "botocore", "asyncio") if m in modules]
    assert unwanted == []
    assert loaded["threads"] == 1


def test_import_dynalease_middleware_loads_no_sdk_client_and_starts_no_thread() -> None:
    # Powertools' own package imports botocore's top-level package (for its user
    # agent); nothing of botocore's sessions or clients, and no boto3.
    loaded = _loaded_after("import dynalease.middleware")
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert [m for m in NEVER_AT_IMPORT if m in modules] == []
    assert loaded["threads"] == 1  # no runtime thread, so no event loop, before a lock


@pytest.fixture(params=["memory", "http"])
def locks(request: pytest.FixtureRequest) -> Iterator[tuple[DynamoDBClient, str]]:
    """A client and a lock table: MemoryBackend's, and the moto server's over HTTP."""
    if request.param == "http":
        client: DynamoDBClient = request.getfixturevalue("client")
        yield client, fresh_lock_table(client, "budget")
        return
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks")
        yield backend.client, "locks"


def test_an_uncontended_cycle_is_exactly_two_requests(
    locks: tuple[DynamoDBClient, str],
) -> None:
    client, table = locks
    with SyncDistributedLock(client, table=table, key="budget") as guard:
        pass
    assert guard.metrics.write_requests == 2
    assert guard.metrics.read_requests == 0


def test_holding_more_locks_adds_no_thread(locks: tuple[DynamoDBClient, str]) -> None:
    client, table = locks
    with SyncDistributedLock(client, table=table, key="warm-up"):
        pass
    before = threading.active_count()
    with ExitStack() as held:
        for n in range(20):
            held.enter_context(SyncDistributedLock(client, table=table, key=f"held-{n}"))
        assert threading.active_count() == before
