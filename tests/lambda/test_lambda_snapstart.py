"""SnapStart: dynalease's hooks, run from snapshot_restore_py's registry as the runtime does."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from typing import Any

import pytest
import snapshot_restore_py

import dynalease.middleware  # noqa: F401  (importing it registers the hooks)
from dynalease import DynamoDBClient
from dynalease._lambda import snapstart
from dynalease._lambda.snapstart import LockHeldAtSnapshot
from dynalease.constants import ENV_INITIALIZATION_TYPE, SNAP_START
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import SyncDistributedLock


def _run(registry: list[Any], *, reverse: bool) -> None:
    """Run a registry's hooks as awslambdaric's hooks runner does (before-snapshot ones
    last registered first), without emptying it for the next test."""
    for func, args, kwargs in reversed(registry) if reverse else list(registry):
        func(*args, **kwargs)


def _before_snapshot() -> None:
    _run(snapshot_restore_py.get_before_snapshot(), reverse=True)  # type: ignore[attr-defined]


def _after_restore() -> None:
    _run(snapshot_restore_py.get_after_restore(), reverse=False)  # type: ignore[attr-defined]


def test_importing_the_middleware_registers_both_hooks_once() -> None:
    befores = [func for func, _, _ in snapshot_restore_py.get_before_snapshot()]  # type: ignore[attr-defined]
    afters = [func for func, _, _ in snapshot_restore_py.get_after_restore()]  # type: ignore[attr-defined]
    assert befores.count(snapstart.before_snapshot) == 1
    assert afters.count(snapstart.after_restore) == 1
    assert snapstart.register()  # a second call registers nothing more
    assert [f for f, _, _ in snapshot_restore_py.get_before_snapshot()].count(  # type: ignore[attr-defined]
        snapstart.before_snapshot
    ) == 1


def test_a_snapshot_with_a_lock_held_is_refused_naming_the_key(
    lock_table: str, aws_env: str
) -> None:
    client = DynamoDBClient()
    key = f"snap-{uuid.uuid4().hex[:8]}"
    with SyncDistributedLock(client, table=lock_table, key=key, lease_duration=5):
        with pytest.raises(LockHeldAtSnapshot) as refused:
            _before_snapshot()
    assert repr(key) in str(refused.value)
    assert lock_table in str(refused.value)
    _before_snapshot()  # released: the snapshot may go ahead


def test_after_restore_reseeds_jitter_and_forgets_observations_and_connections(
    lock_table: str, aws_env: str, other_client: DynamoDBClient
) -> None:
    client = DynamoDBClient()
    key = f"snap-{uuid.uuid4().hex[:8]}"
    # A contended acquire leaves an observation (with monotonic times), and then a lock
    # cycle a kept-alive connection in the client's pool (its 30 s lease gives each
    # request 5 s: no answer is abandoned on a loaded machine). In the other order, the
    # contended acquire's last read could be cut off by its 1 s wait on a loaded machine,
    # closing the only pooled connection.
    with (
        SyncDistributedLock(other_client, table=lock_table, key=key, lease_duration=5),
        pytest.raises(LockNotAcquired),
        SyncDistributedLock(client, table=lock_table, key=key, wait_timeout=1),
    ):
        pass
    with SyncDistributedLock(client, table=lock_table, key=f"{key}-free"):
        pass
    assert len(client._observations) == 1
    route = client._lock_store.transport.route  # type: ignore[attr-defined]
    snapshot_idle = list(route.connections._idle)
    assert len(snapshot_idle) >= 1
    random.seed(7)
    state = random.getstate()
    _before_snapshot()
    _after_restore()
    assert all(connection.sock is None for connection in snapshot_idle)  # closed
    assert route.connections._idle == []
    assert len(client._observations) == 0
    assert random.getstate() != state
    with SyncDistributedLock(client, table=lock_table, key=key, wait_timeout=5) as guard:
        assert not guard.lost
    fresh = route.connections._idle  # the cycle ran on a new connection
    assert fresh and all(connection not in snapshot_idle for connection in fresh)


#: Init code that takes a lock with plain ``import dynalease`` (no middleware), then
#: awslambdaric's own hooks runner, as the runtime calls it when init ends.
_INIT_TAKES_A_LOCK = """
import json, sys
import dynalease
from dynalease import DynamoDBClient, SyncDistributedLock
from awslambdaric import lambda_runtime_hooks_runner

guard = SyncDistributedLock(DynamoDBClient(), table=sys.argv[1], key=sys.argv[2])
guard.__enter__()
try:
    lambda_runtime_hooks_runner.run_before_snapshot()
except Exception as error:
    refused = f"{type(error).__name__}: {error}"
else:
    refused = None
guard.__exit__(None, None, None)
print(json.dumps({"refused": refused}))
"""


@pytest.mark.parametrize("init_type", ["snap-start", "on-demand"])
def test_plain_import_dynalease_refuses_a_snapshot_of_a_lock_taken_at_init(
    lock_table: str, aws_env: str, init_type: str
) -> None:
    pytest.importorskip("awslambdaric")
    key = f"snap-init-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "AWS_LAMBDA_INITIALIZATION_TYPE": init_type}
    out = subprocess.run(
        [sys.executable, "-c", _INIT_TAKES_A_LOCK, lock_table, key],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    refused = json.loads(out)["refused"]
    if init_type == "snap-start":
        assert refused is not None
        assert refused.startswith("LockHeldAtSnapshot: SnapStart is taking a snapshot")
        assert repr(key) in refused
    else:  # nothing registered (and awslambdaric runs no hooks there anyway)
        assert refused is None


def test_import_dynalease_tests_for_snapstart_with_awslambdaric_s_own_names() -> None:
    bootstrap = pytest.importorskip("awslambdaric.bootstrap")
    assert ENV_INITIALIZATION_TYPE == bootstrap.AWS_LAMBDA_INITIALIZATION_TYPE
    assert SNAP_START == bootstrap.INIT_TYPE_SNAP_START
