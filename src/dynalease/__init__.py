"""dynalease: distributed locks (leases) on one DynamoDB table, built first for AWS Lambda.

For example:

    from dynalease import DynamoDBClient
    from dynalease.lock import SyncDistributedLock

    client = DynamoDBClient()
    with SyncDistributedLock(client, table="locks", key="import:daily") as lease:
        run_import()

Names are imported on first use, so ``import dynalease`` stays cheap for
Lambda cold starts. On SnapStart it also registers the runtime hooks that refuse a
snapshot while a lock is held (docs/lambda.md, "SnapStart").
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .client import DynamoDBClient
    from .exceptions import (
        DynaleaseError,
        LockLost,
        LockNotAcquired,
        LockReleaseError,
        LockUnavailable,
        TransactionCanceledError,
        TransactionCanceledException,
    )
    from .lock import DistributedLock, SyncDistributedLock, distributed_lock
    from .metrics import LockMetrics
    from .rwlock import (
        ReadLock,
        SyncReadLock,
        SyncWriteLock,
        WriteLock,
        distributed_read_lock,
        distributed_write_lock,
    )
    from .semaphore import DistributedSemaphore, SyncDistributedSemaphore, distributed_semaphore
    from .transaction import SyncTransaction, Transaction

__all__ = [
    "DistributedLock",
    "DistributedSemaphore",
    "DynaleaseError",
    "DynamoDBClient",
    "LockLost",
    "LockMetrics",
    "LockNotAcquired",
    "LockReleaseError",
    "LockUnavailable",
    "ReadLock",
    "SyncDistributedLock",
    "SyncDistributedSemaphore",
    "SyncReadLock",
    "SyncTransaction",
    "SyncWriteLock",
    "Transaction",
    "TransactionCanceledError",
    "TransactionCanceledException",
    "WriteLock",
    "__version__",
    "distributed_lock",
    "distributed_read_lock",
    "distributed_semaphore",
    "distributed_write_lock",
]

_HOMES = {
    "DynamoDBClient": "client",
    "DistributedLock": "lock",
    "SyncDistributedLock": "lock",
    "distributed_lock": "lock",
    "DistributedSemaphore": "semaphore",
    "SyncDistributedSemaphore": "semaphore",
    "distributed_semaphore": "semaphore",
    "LockMetrics": "metrics",
    "Transaction": "transaction",
    "SyncTransaction": "transaction",
    "DynaleaseError": "exceptions",
    "LockLost": "exceptions",
    "LockNotAcquired": "exceptions",
    "LockReleaseError": "exceptions",
    "LockUnavailable": "exceptions",
    "TransactionCanceledError": "exceptions",
    "TransactionCanceledException": "exceptions",
    "ReadLock": "rwlock",
    "SyncReadLock": "rwlock",
    "WriteLock": "rwlock",
    "SyncWriteLock": "rwlock",
    "distributed_read_lock": "rwlock",
    "distributed_write_lock": "rwlock",
}

logging.getLogger(__name__).addHandler(logging.NullHandler())


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dynalease' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


# SnapStart clones whatever init made into every restored environment, a held lock too:
# register the hooks now, before the importer can take one. The test is awslambdaric's own
# (it runs the hooks only then), spelled out rather than imported from .constants so that
# everywhere else ``import dynalease`` loads no module more.
if os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") == "snap-start":
    from ._lambda import snapstart

    snapstart.register()
