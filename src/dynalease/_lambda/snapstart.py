"""Lambda SnapStart: what dynalease does before the snapshot and after each restore.

SnapStart snapshots the process after init and restores that snapshot into many
execution environments. Whatever dynalease has made by then is cloned into each:
a held lock would be held by every copy at once, pooled connections point at
sockets that no longer exist, the ``random`` state that spreads retries would be
the same everywhere, and the observation cache holds monotonic times that mean
nothing after a restore. So, through the runtime hooks of ``snapshot_restore_py``
(shipped with the Lambda runtime interface client):

- before the snapshot: refuse (:class:`LockHeldAtSnapshot`, naming the key) if any
  guard holds or is acquiring a lock; then close every client's pooled connections;
- after a restore: reseed ``random``, drop every client's pooled connections and
  its observations, and name the process afresh in its journal entries (the
  recovery extension tells a live writer by its start time). Nothing here sends a
  request, so the hook ends well within the 10 s Lambda gives after-restore hooks,
  and the first lock request opens a new connection.

:func:`register` is called when ``dynalease.middleware`` is imported; where
``snapshot_restore_py`` is not installed it does nothing.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from typing import TypeVar

from .._engine.base import LeaseCore
from .._engine.clock import SystemClock
from .._engine.states import State
from ..client import DynamoDBClient
from ..exceptions import DynaleaseError

__all__ = ["LockHeldAtSnapshot", "after_restore", "before_snapshot", "register"]

T = TypeVar("T")

_registered = False


class LockHeldAtSnapshot(DynaleaseError, RuntimeError):
    """A lock was held (or being acquired) when SnapStart was about to take its snapshot."""


def _live(kind: type[T]) -> Iterator[T]:
    # Once per snapshot and per restore: a scan of the heap costs nothing per lock cycle,
    # where keeping a registry of guards and clients would.
    return (value for value in gc.get_objects() if isinstance(value, kind))


def _holding(lease: LeaseCore) -> bool:
    """A guard that holds a valid lease, or is acquiring one, on the real clock."""
    if not isinstance(lease.clock, SystemClock):
        return False  # a test's own clock: no lock any copy could hold
    return lease.state is State.ACQUIRING or (lease.state is State.HELD and lease.time_left() > 0)


def before_snapshot() -> None:
    """Refuse a snapshot while a lock is held; close every client's pooled connections."""
    held = sorted({(lease.table, lease.key) for lease in _live(LeaseCore) if _holding(lease)})
    if held:
        named = ", ".join(f"{key!r} in table {table!r}" for table, key in held[:3])
        more = f" and {len(held) - 3} more" if len(held) > 3 else ""
        raise LockHeldAtSnapshot(
            f"SnapStart is taking a snapshot while dynalease holds lock {named}{more}: "
            "every environment restored from it would hold the lock at once. Release "
            "locks before init ends (take them in the handler, not at import time)"
        )
    for client in _live(DynamoDBClient):
        client._drop_connections()


def after_restore() -> None:
    """Reseed ``random``, drop pooled connections and observations: fresh for this copy."""
    random.seed()  # from os.urandom: retries and polls spread differently in each copy
    for client in _live(DynamoDBClient):
        client._drop_connections()
        client._observations.forget_all()
        if client._journal is not None:  # the recovery extension checks writers by start time
            client._journal.reidentify()


def register() -> bool:
    """Register the hooks with ``snapshot_restore_py`` once; False when it is not installed."""
    global _registered
    if _registered:
        return True
    try:
        import snapshot_restore_py  # type: ignore[import-untyped]
    except ImportError:
        return False
    snapshot_restore_py.register_before_snapshot(before_snapshot)
    snapshot_restore_py.register_after_restore(after_restore)
    _registered = True
    return True
