"""``python -m benchmarks.sigterm``: how long a stopped container's lock stays taken.

A child process holds a lock (30 s lease by default) as an ECS task would, and is
sent SIGTERM; a successor in this process starts waiting for the same key at that
moment. Printed: seconds from the SIGTERM to the successor's acquisition, with
``release_locks_on_sigterm()`` in the child and without it, on one moto server.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid

from dynalease import DynamoDBClient
from dynalease._tooling.local_server import LocalServer
from dynalease.lock import SyncDistributedLock

from .libs import create_table, use_test_credentials

CHILD = """
import sys, threading
from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock
from dynalease.shutdown import release_locks_on_sigterm

endpoint, table, key, lease, opt_in = sys.argv[1:]
if opt_in == "1":
    release_locks_on_sigterm()
client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
with SyncDistributedLock(client, table=table, key=key, lease_duration=float(lease)):
    print("held", flush=True)
    threading.Event().wait(600)
"""


def successor_wait(endpoint: str, table: str, lease: float, opt_in: bool) -> tuple[float, int]:
    """Seconds from SIGTERM to the successor's lock, and the child's exit status."""
    key = f"task-{uuid.uuid4().hex[:8]}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, endpoint, table, key, str(lease), "1" if opt_in else "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
    sent = time.monotonic()
    child.send_signal(signal.SIGTERM)
    with SyncDistributedLock(
        client, table=table, key=key, lease_duration=lease, wait_timeout=lease * 2 + 10
    ):
        acquired = time.monotonic()
    return acquired - sent, child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease", type=float, default=30.0, help="the child's lease (s)")
    args = parser.parse_args()
    use_test_credentials()
    with LocalServer() as server:
        table = f"sigterm-{uuid.uuid4().hex[:8]}"
        create_table(server.url, table)
        print(f"lease {args.lease:g} s; SIGTERM to the holder, then a successor waits for the key")
        for opt_in in (True, False):
            seconds, status = successor_wait(server.url, table, args.lease, opt_in)
            label = "release_locks_on_sigterm()" if opt_in else "Python's default SIGTERM"
            print(f"{label:<28} successor acquired {seconds:6.2f} s after SIGTERM (child {status})")


if __name__ == "__main__":
    main()
