"""Leader election's cost and failover on the local moto server: `python -m benchmarks.election`.

``cost`` (the default) holds, side by side for ``--minutes`` on one lease: a plain
lock, an election's leader, a standby campaigning behind it and an observer, each on
a client of its own behind a counting proxy, and prints each one's requests per
minute (a plain lock's renewals are the baseline). ``failover`` runs the history of
the tests (5 candidate processes, 2 observers) with ``--lease`` (30 s by default) and
``--kills`` leaders SIGKILLed or SIGSTOPped, and prints failover min, median and max.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from dynalease import DynamoDBClient, LockNotAcquired, SyncDistributedLock
from dynalease._engine.protocol import poll_cap
from dynalease._tooling.local_server import LocalServer
from dynalease.election import SyncElection
from tests.support.counting_proxy import CountingProxy  # a test tool: not in the wheel

TESTS = Path(__file__).resolve().parents[1] / "tests"


def _client(url: str) -> DynamoDBClient:
    return DynamoDBClient(region="us-east-1", endpoint_url=url)


def cost(server: LocalServer, lease: float, minutes: float) -> None:
    """Requests per minute of each role over ``minutes``, on ``lease``."""
    setup = _client(server.url)
    table = f"locks-{uuid.uuid4().hex[:8]}"
    setup.sync_create_table(table, wait=True)
    window = minutes * 60
    roles = ("plain lock", "leader", "standby", "observer")
    proxies = {role: CountingProxy(server.url) for role in roles}
    for proxy in proxies.values():
        proxy.__enter__()
    try:
        clients = {role: _client(proxy.url) for role, proxy in proxies.items()}

        def election(role: str) -> SyncElection:
            return SyncElection(clients[role], table=table, name="svc", lease_duration=lease)

        lock = SyncDistributedLock(
            clients["plain lock"], table=table, key="job", lease_duration=lease
        )
        done = threading.Event()

        def standby() -> None:
            with contextlib.suppress(LockNotAcquired):
                election("standby").campaign(wait_timeout=window)

        with lock, election("leader").campaign(value="10.0.0.7:8080"):
            threads = [
                threading.Thread(target=standby),
                threading.Thread(
                    target=election("observer").observe,
                    args=(lambda leader: None,),
                    kwargs={"stop": done},
                ),
            ]
            for thread in threads:
                thread.start()
            done.wait(window)
            done.set()
            for thread in threads:
                thread.join(lease + 60)
    finally:
        for proxy in proxies.values():
            proxy.__exit__(None, None, None)
    print(
        f"lease {lease:g} s, poll {poll_cap(lease):g} s, over {window:g} s (nproc {os.cpu_count()})"
    )
    for role in roles:
        counts = proxies[role].counts
        per_minute = sum(counts.values()) / minutes
        detail = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
        print(f"  {role:<11} {per_minute:7.1f} requests/minute  ({detail})")


def failover(server: LocalServer, lease: float, kills: int) -> None:
    """The tests' history on ``lease``: failover min, median and max over ``kills``."""
    sys.path.insert(0, str(TESTS))  # the workers' module, as the tests import it
    from support.election_history import report, run_history

    processes: list[Any] = []
    try:
        history = run_history(_client(server.url), server.url, processes, lease=lease, kills=kills)
    finally:
        for process in processes:
            process.kill()
    print(report(history, lease).strip())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.election")
    parser.add_argument("what", nargs="?", choices=("cost", "failover"), default="cost")
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--minutes", type=float, default=1.0, help="cost: how long to hold")
    parser.add_argument("--kills", type=int, default=3, help="failover: leaders killed")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with LocalServer() as server:
        if args.what == "cost":
            cost(server, args.lease, args.minutes)
        else:
            failover(server, args.lease, args.kills)


if __name__ == "__main__":
    main()
