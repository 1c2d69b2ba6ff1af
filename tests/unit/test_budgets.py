"""Deterministic budgets: what an import loads, how many requests a cycle sends, which
threads a held lock needs. Counts, never times (times are the benchmarks' job).

Each import budget runs in a fresh interpreter, which reads its own ``sys.modules``.
"""

from __future__ import annotations

import json
import os
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


def _loaded_after(statement: str, env: dict[str, str] | None = None) -> dict[str, object]:
    code = (
        "import sys, threading, json\n"
        f"{statement}\n"
        "print(json.dumps({'modules': sorted(sys.modules), "
        "'threads': threading.active_count()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    loaded: dict[str, object] = json.loads(out)
    return loaded


@pytest.mark.parametrize(
    "init_type", ["", "on-demand", "provisioned-concurrency", "lambda-managed-instances"]
)
def test_import_dynalease_loads_no_sdk_no_event_loop_and_no_tooling(init_type: str) -> None:
    env = {**os.environ, "AWS_LAMBDA_INITIALIZATION_TYPE": init_type}
    loaded = _loaded_after("import dynalease", env)
    modules = loaded["modules"]
    assert isinstance(modules, list)
    unwanted = [m for m in (*NEVER_AT_IMPORT, "botocore", "asyncio") if m in modules]
    assert unwanted == []
    assert _heavy(modules) == []
    # The package alone: its names load on first use, and SnapStart's hooks only there.
    assert [m for m in modules if m.startswith("dynalease")] == ["dynalease"]
    assert "snapshot_restore_py" not in modules
    assert loaded["threads"] == 1


def test_import_dynalease_on_snapstart_registers_its_hooks_and_still_starts_nothing() -> None:
    env = {**os.environ, "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"}
    loaded = _loaded_after("import dynalease", env)
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert "dynalease._lambda.snapstart" in modules
    assert "snapshot_restore_py" in modules
    unwanted = [m for m in (*NEVER_AT_IMPORT, "botocore", "asyncio") if m in modules]
    assert unwanted == []
    assert loaded["threads"] == 1


#: Never loaded by ``import dynalease.middleware`` on top of what Powertools' own package
#: loads (it loads botocore's top-level package, for its user agent, and jmespath, for its
#: Logger): the event loop, the SDK, the system proxy reader, TLS, tracing, the CLI's and
#: the CDK's libraries. A lock's first request loads what it needs.
NEVER_AT_MIDDLEWARE_IMPORT = (
    "asyncio",
    "concurrent.futures",
    "botocore",
    "boto3",
    "urllib.request",
    "ssl",
    "opentelemetry",
    "jmespath",
    "rich",
    "aws_cdk",
)

#: Every dynalease module the middleware's cold import loads (on demand): the cold
#: path as a list, so that a module joins it only by a change to this test.
MIDDLEWARE_COLD_MODULES = [
    "dynalease",
    "dynalease._compute_modes",
    "dynalease._engine",
    "dynalease._engine.deadline",
    "dynalease._engine.invocation_id",
    "dynalease._engine.protocol",
    "dynalease._engine.states",
    "dynalease._keyset",
    "dynalease._lambda",
    "dynalease._lambda.budget",
    "dynalease._lambda.fields",
    "dynalease._lambda.invocation",
    "dynalease._lambda.plan",
    "dynalease._lambda.report",
    "dynalease._lambda.snapstart",
    "dynalease._redact",
    "dynalease.constants",
    "dynalease.exceptions",
    "dynalease.keys",
    "dynalease.metrics",
    "dynalease.middleware",
]


def _heavy(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return [
        m
        for m in modules
        if any(m == h or m.startswith(h + ".") for h in NEVER_AT_MIDDLEWARE_IMPORT)
    ]


def test_import_dynalease_middleware_loads_no_sdk_client_and_starts_no_thread() -> None:
    # Powertools' own package imports botocore's top-level package (for its user
    # agent); nothing of botocore's sessions or clients, and no boto3.
    env = {**os.environ}
    env.pop("AWS_LAMBDA_INITIALIZATION_TYPE", None)
    env.pop("AWS_LAMBDA_MAX_CONCURRENCY", None)
    loaded = _loaded_after("import dynalease.middleware", env)
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert [m for m in NEVER_AT_IMPORT if m in modules] == []
    assert loaded["threads"] == 1  # no runtime thread, so no event loop, before a lock
    # What the middleware adds to Powertools' own import: none of the heavy modules,
    # and exactly the listed dynalease modules.
    powertools = _loaded_after("import aws_lambda_powertools", env)["modules"]
    assert isinstance(powertools, list)
    added = sorted(set(modules) - set(powertools))
    assert _heavy(added) == []
    assert [m for m in added if m.startswith("dynalease")] == MIDDLEWARE_COLD_MODULES
    # Of these, Powertools itself loads only botocore's top-level package and jmespath.
    assert sorted({m.split(".")[0] for m in _heavy(modules)}) == ["botocore", "jmespath"]
    assert [m for m in _heavy(modules) if m.startswith("botocore.")] == []


@pytest.mark.parametrize(
    ("init_type", "max_concurrency"),
    [
        ("", None),
        ("on-demand", None),
        ("provisioned-concurrency", None),
        ("snap-start", None),
        ("lambda-managed-instances", "4"),
        ("on-demand", "4"),  # Managed Instances by awslambdaric's own signal
    ],
)
def test_middleware_imports_the_lock_request_path_at_init_only_where_init_runs_ahead(
    init_type: str, max_concurrency: str | None
) -> None:
    # On demand the first invoke imports it (init and invoke are one wait); where init
    # runs before any request is routed, it is imported then, and still nothing is made.
    env = {**os.environ, "AWS_LAMBDA_INITIALIZATION_TYPE": init_type}
    env.pop("AWS_LAMBDA_MAX_CONCURRENCY", None)
    if max_concurrency is not None:
        env["AWS_LAMBDA_MAX_CONCURRENCY"] = max_concurrency
    loaded = _loaded_after("import dynalease.middleware", env)
    modules = loaded["modules"]
    assert isinstance(modules, list)
    ahead = init_type not in ("", "on-demand") or max_concurrency is not None
    lock_path = ["http.client", "dynalease._transport.lean", "dynalease._transport.items"]
    assert [m for m in lock_path if m in modules] == (lock_path if ahead else [])
    assert [m for m in NEVER_AT_IMPORT if m in modules] == []
    assert loaded["threads"] == 1


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


_TRACED_CYCLE = """
from dynalease import DynamoDBClient, SyncDistributedLock
import dynalease.middleware
client = DynamoDBClient(region="us-east-1", endpoint_url={endpoint!r}, transport="lean")
with SyncDistributedLock(client, table={table!r}, key="budget") as guard:
    pass
assert guard.metrics.write_requests == 2
"""


@pytest.mark.parametrize("installed", [False, True], ids=["hidden", "installed"])
def test_a_lock_cycle_without_a_tracer_provider_imports_no_opentelemetry(
    client: DynamoDBClient, endpoint: str, installed: bool
) -> None:
    """Hidden (as if not installed) or installed but unconfigured: nothing of it is loaded."""
    table = fresh_lock_table(client, "budget")
    hide = "" if installed else "sys.modules['opentelemetry'] = None\n"
    loaded = _loaded_after(hide + _TRACED_CYCLE.format(endpoint=endpoint, table=table))
    modules = loaded["modules"]
    assert isinstance(modules, list)
    hidden = [] if installed else ["opentelemetry"]  # the None that hides it
    assert [m for m in modules if m.startswith("opentelemetry")] == hidden


def test_a_lean_lock_cycle_without_proxy_variables_imports_no_urllib3_and_no_urllib_request(
    client: DynamoDBClient, endpoint: str
) -> None:
    """The lean path's HTTP is the standard library's ``http.client``; ``urllib.request``
    (system proxy settings) is read only where a ``*_proxy`` variable is set (Linux)."""
    table = fresh_lock_table(client, "budget")
    env = {name: value for name, value in os.environ.items() if not name.lower().endswith("_proxy")}
    loaded = _loaded_after(_TRACED_CYCLE.format(endpoint=endpoint, table=table), env)
    modules = loaded["modules"]
    assert isinstance(modules, list)
    unwanted = ("urllib3", "urllib.request", "botocore.session", "botocore.client", "boto3")
    assert [m for m in unwanted if m in modules] == []
    env["HTTPS_PROXY"] = "http://proxy.internal:3128"  # http:// endpoint: not used, but read
    loaded = _loaded_after(_TRACED_CYCLE.format(endpoint=endpoint, table=table), env)
    assert "urllib.request" in loaded["modules"]  # type: ignore[operator]


_SHORT_HOLD = """
import time
from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine.runtime import get_runtime
from dynalease._engine.scheduling import WATCH_INTERVAL_S
client = DynamoDBClient(region="us-east-1", endpoint_url={endpoint!r}, transport="lean")
with SyncDistributedLock(client, table={table!r}, key="budget") as guard:
    time.sleep(WATCH_INTERVAL_S + 0.3)  # its validity is checked once meanwhile
assert guard.metrics.write_requests == 2
time.sleep(WATCH_INTERVAL_S)  # past the next wake-up the hold asked for
assert not get_runtime().started
"""


def test_a_sync_hold_ended_before_its_first_renewal_imports_no_asyncio(
    client: DynamoDBClient, endpoint: str
) -> None:
    """The runtime's event loop starts only when a lease needs it, so a sync hold
    that ends before its first renewal (a Lambda invoke's) never imports ``asyncio``:
    both requests go from the caller's thread, the runtime's thread checks the
    lease's validity each second and otherwise waits, also past the wake-up the
    hold asked for (it has ended by then). Its pool is not made either (nor a
    future for its lost signal), nor the acquire driver and its decision loaded
    (the first create simply succeeded), nor any loop-side module, nor the journal
    (without the recovery extension a client only asks whether to keep one), nor
    ``decimal``."""
    table = fresh_lock_table(client, "budget")
    loaded = _loaded_after(_SHORT_HOLD.format(endpoint=endpoint, table=table))
    unwanted = [
        "asyncio",
        "concurrent.futures",
        "dynalease._engine.driver",
        "dynalease._engine.attempts",
        "dynalease._engine.pacing",
        # The loop side: the event loop itself, requests sent from it, the release's tasks,
        # the renewals' watch.
        "dynalease._engine.loop",
        "dynalease._engine.requests",
        "dynalease._engine.release_loop",
        "dynalease._engine.watch",
        # The recovery extension's journal: not installed here, so nothing of it is kept.
        "dynalease._engine.journal",
        "dynalease._engine.journal_looks",
        # Exact numbers: a lock's rows hold integers only.
        "decimal",
    ]
    assert [m for m in unwanted if m in loaded["modules"]] == []  # type: ignore[operator]
    assert loaded["threads"] == 2  # the main thread and the runtime's, waiting


_LONG_HOLD = """
import time
from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine.runtime import get_runtime
client = DynamoDBClient(region="us-east-1", endpoint_url={endpoint!r}, transport="lean")
# A 1.5 s lease: each renewal may take 0.5 s of a moto server shared with busy workers.
with SyncDistributedLock(client, table={table!r}, key="budget", lease_duration=1.5) as guard:
    assert not get_runtime().started
    time.sleep(2.25)  # renewals are due at 0.5, 1.0, 1.5 and 2.0 s
    assert get_runtime().started
    assert not guard.lost
assert guard.metrics.renewals >= 2, guard.metrics
"""


def test_a_sync_hold_starts_the_event_loop_when_its_first_renewal_is_due(
    client: DynamoDBClient, endpoint: str
) -> None:
    table = fresh_lock_table(client, "budget")
    loaded = _loaded_after(_LONG_HOLD.format(endpoint=endpoint, table=table))
    assert "asyncio" in loaded["modules"]  # type: ignore[operator]


_THREADS_OF_SHORT_HOLDS = """
import threading, time
from dynalease import DynamoDBClient, SyncDistributedLock
from dynalease._engine.runtime import get_runtime
client = DynamoDBClient(region="us-east-1", endpoint_url={endpoint!r}, transport="lean")
writes = []

def worker(n):
    for i in range(30):
        with SyncDistributedLock(client, table={table!r}, key=f"t{{n}}-{{i}}") as guard:
            time.sleep(0.05)  # 30 holds take 1.5 s: across a validity sweep
        writes.append(guard.metrics.write_requests)

workers = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
for w in workers:
    w.start()
for w in workers:
    w.join()
assert writes == [2] * 240, writes
assert not get_runtime().started
"""


def test_many_threads_of_short_sync_holds_never_start_the_event_loop(
    client: DynamoDBClient, endpoint: str
) -> None:
    """As on Lambda Managed Instances: eight threads take and release locks at once
    while the runtime's thread checks their validity; none needs the loop."""
    table = fresh_lock_table(client, "budget")
    loaded = _loaded_after(_THREADS_OF_SHORT_HOLDS.format(endpoint=endpoint, table=table))
    assert "asyncio" not in loaded["modules"]  # type: ignore[operator]
    assert loaded["threads"] == 2
