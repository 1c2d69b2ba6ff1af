from functools import partial

from dynalease.exceptions import LockNotAcquired
from dynalease.lock import SyncDistributedLock
from dynalease.testing import MemoryBackend

with MemoryBackend() as backend:  # tables in this process, cleared at the end
    client = backend.client
    client.sync_create_table("locks", partition_key=("key", "S"))
    job_lock = partial(SyncDistributedLock, client, table="locks", key="job")
    with job_lock():
        try:
            with job_lock(wait_timeout=0):
                raise AssertionError("two holders at once")
        except LockNotAcquired:
            print("the second guard found job held")
