"""The supervisor side of the election history (its processes are election_workers.py).

Starts 5 candidate processes and 2 observers, SIGKILLs or SIGSTOPs the leader of the
moment again and again, and checks what they reported and what the fenced ledger holds:
terms strictly increasing, no stale write accepted, every term seen by every observer
in order. For tests/integration/test_election_processes.py and
``python -m benchmarks.election failover`` (a 30 s lease); never imported by the library.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import signal
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from dynalease import DynamoDBClient
from dynalease._engine.protocol import poll_cap
from support.election_workers import LEDGER_ID, Arena, candidate, observer
from support.tables import fresh_lock_table

__all__ = ["SLACK_S", "History", "report", "run_history"]

spawn = multiprocessing.get_context("spawn")

CANDIDATES = 5
OBSERVERS = 2
#: Room for two shared cores (and five other test runs) on top of lease + poll: a
#: failover bound the machine's load can break is a broken test.
SLACK_S = 3.0
#: How long a new leader leads before the next kill: observers (poll lease/10) and the
#: ledger (a write every 50 ms) see every term.
LEAD_S = 0.6


@dataclass
class History:
    """What the processes reported: (pid, term, time) per win, refused writes, sightings."""

    leadings: list[tuple[int, int, float]] = field(default_factory=list)
    refused: list[tuple[int, int]] = field(default_factory=list)
    seen: dict[int, list[int | None]] = field(default_factory=dict)
    failovers: list[float] = field(default_factory=list)


class Reports:
    """Each process reports on a queue of its own: a killed or stopped process holding a
    shared queue's lock would block every other writer."""

    def __init__(self) -> None:
        self.queues: list[Any] = []
        self.history = History()

    def new_queue(self) -> Any:
        events = spawn.Queue()
        self.queues.append(events)
        return events

    def drain(self) -> None:
        for events in self.queues:
            while True:
                try:
                    message = events.get_nowait()
                except (queue.Empty, OSError, EOFError, ValueError):
                    break
                self._record(message)

    def _record(self, message: tuple[Any, ...]) -> None:
        history = self.history
        if message[0] == "leading":
            history.leadings.append((message[1], message[2], message[3]))
        elif message[0] == "refused":
            history.refused.append((message[1], message[2]))
        elif message[0] == "seen":
            history.seen.setdefault(message[1], []).append(message[2])

    def next_leader(self, *, after: float, timeout: float) -> tuple[int, int, float]:
        """The first win at or after monotonic time ``after``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.drain()
            wins = [win for win in self.history.leadings if win[2] >= after]
            if wins:
                return min(wins, key=lambda win: win[2])
            time.sleep(0.02)
        raise AssertionError(f"no leader within {timeout:g} s")


def run_history(
    client: DynamoDBClient, endpoint: str, processes: list[Any], *, lease: float, kills: int
) -> History:
    table = fresh_lock_table(client, "election")
    ledger = f"ledger-{uuid.uuid4().hex[:10]}"
    client.sync_create_table(ledger, partition_key=("id", "S"), wait=True)
    arena = Arena(endpoint, table, ledger, lease)
    reports = Reports()

    def start(target: Any, *args: Any) -> None:
        process = spawn.Process(target=target, args=(arena, reports.new_queue(), *args))
        process.start()
        processes.append(process)

    for index in range(OBSERVERS):
        start(observer, index)
    for _ in range(CANDIDATES):
        start(candidate)
    bound = lease + poll_cap(lease) + SLACK_S
    leader = reports.next_leader(after=0.0, timeout=120)  # the spawns import for a while
    for kill in range(kills):
        time.sleep(LEAD_S)
        reports.drain()  # the latest leader: a lease lost to a starved process moved it on
        pid = max(reports.history.leadings, key=lambda win: win[2])[0]
        how = signal.SIGKILL if kill % 2 == 0 else signal.SIGSTOP
        killed_at = time.monotonic()
        os.kill(pid, how)
        leader = reports.next_leader(after=killed_at, timeout=bound + 60)
        assert leader[0] != pid
        reports.history.failovers.append(leader[2] - killed_at)
        if how == signal.SIGKILL:
            start(candidate)  # five candidates again
        else:
            os.kill(pid, signal.SIGCONT)  # it writes late with its old term: refused
    time.sleep(LEAD_S + lease)  # the last resumed leader writes; observers catch up
    reports.drain()
    for process in processes:
        process.kill()
    item = client.sync_get_item(ledger, {"id": LEDGER_ID}, consistent_read=True)
    assert item is not None
    check_history(reports.history, [tuple(int(x) for x in entry) for entry in item["writes"]])
    return reports.history


def check_history(history: History, writes: list[tuple[int, ...]]) -> None:
    wins = sorted(history.leadings, key=lambda win: win[2])
    terms = [term for _, term, _ in wins]
    assert terms == sorted(set(terms)), f"terms not strictly increasing: {terms}"
    # The ledger in commit order: its terms never go back, so no write of a deposed
    # leader landed after its successor's, and each term is one process's.
    ledger_terms = [term for term, _, _ in writes]
    stale = sum(1 for a, b in itertools.pairwise(ledger_terms) if b < a)
    assert stale == 0, f"{stale} stale writes accepted"
    writers = {term: pid for term, pid, _ in writes}
    assert all(writers[term] == pid for term, pid, _ in writes)
    assert {term: pid for pid, term, _ in wins if term in writers} == writers
    for index in range(OBSERVERS):
        seen = [term for term in history.seen.get(index, []) if term is not None]
        in_order = [term for i, term in enumerate(seen) if i == 0 or seen[i - 1] != term]
        assert in_order == terms, f"observer {index} saw {in_order}, the leaders were {terms}"


def report(history: History, lease: float) -> str:
    failovers = history.failovers
    return (
        f"\nlease {lease:g} s, poll {poll_cap(lease):g} s, {len(failovers)} failovers: "
        f"min {min(failovers):.2f} s, median {statistics.median(failovers):.2f} s, "
        f"max {max(failovers):.2f} s; {len(history.refused)} late writes refused, 0 accepted "
        f"(nproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f})"
    )
