from dynalease.exceptions import LockNotAcquired
from dynalease.lock import SyncDistributedLock
from dynalease.testing import MemoryBackend

with MemoryBackend() as backend:  # tables in this process; cleared when the block ends
    backend.client.sync_create_table("locks", partition_key=("key", "S"))
    with SyncDistributedLock(backend.client, table="locks", key="job"):
        try:
            with SyncDistributedLock(backend.client, table="locks", key="job", wait_timeout=0):
                raise AssertionError("two holders at once")
        except LockNotAcquired:
            print("the second guard found job held")
