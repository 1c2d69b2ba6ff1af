"""A lock holder with the recovery journal on, as a runtime worker of a sandbox with the
extension: ``python journal_holder.py ENDPOINT TABLE KEY``.

It acquires one lock (its journal entry is written first), prints its owner token and its
pid as it sees it, then holds the lock until its standard input closes or it is killed.
"""

from __future__ import annotations

import os
import sys

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock


def main(endpoint: str, table: str, key: str) -> None:
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
    with SyncDistributedLock(client, table=table, key=key, lease_duration=30) as lock:
        print(lock.owner, os.getpid(), flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main(*sys.argv[1:4])
