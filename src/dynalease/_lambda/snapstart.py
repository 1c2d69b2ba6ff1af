"""Lambda SnapStart's runtime hooks: whatever dynalease made before the snapshot is cloned
into every restored copy, so no lock may be held then, and each copy gets fresh connections,
``random`` state, observations and journal identity. The hooks send no request (after-restore
hooks get 10 s).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from .._engine.states import State
from ..exceptions import LockHeldAtSnapshot

if TYPE_CHECKING:
    from .._engine.base import LeaseCore
    from ..client import DynamoDBClient

__all__ = ["LockHeldAtSnapshot", "after_restore", "before_snapshot", "register"]

_registered = False


def _holding(lease: LeaseCore) -> bool:
    """A guard that holds a valid lease, or is acquiring one."""
    return lease.state is State.ACQUIRING or (lease.state is State.HELD and lease.time_left() > 0)


def _clients() -> list[DynamoDBClient]:
    """Every client of this process still referred to."""
    # Imported by the hooks, not with this module: the middleware registers them on import
    # and loads the client only with the first hold (whoever made a client has loaded it).
    from ..client import live_clients

    return live_clients()


def before_snapshot() -> None:
    """Refuse a snapshot while a lock is held; close every client's pooled connections."""
    clients = _clients()
    leases = [lease for client in clients for lease in list(client._leases)]
    held = sorted({(lease.table, lease.key) for lease in leases if _holding(lease)})
    if held:
        named = ", ".join(f"{key!r} in table {table!r}" for table, key in held[:3])
        more = f" and {len(held) - 3} more" if len(held) > 3 else ""
        raise LockHeldAtSnapshot(
            f"SnapStart is taking a snapshot while dynalease holds lock {named}{more}: "
            "every environment restored from it would hold the lock at once. Release "
            "locks before init ends (take them in the handler, not at import time)"
        )
    for client in clients:
        client._drop_connections()


def after_restore() -> None:
    """Reseed ``random``, drop pooled connections and observations: fresh for this copy."""
    random.seed()  # from os.urandom: retries and polls spread differently in each copy
    for client in _clients():
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
