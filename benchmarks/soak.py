"""Soak: worker processes contend for a few locks while holders are killed and paused.

Each worker process loops: pick a key, acquire it, record the acquisition,
commit a few history records through ``check_in`` transactions, record the
release and let go. Meanwhile the supervisor SIGKILLs or SIGSTOPs (and later
resumes) a current holder every few seconds, so leases are taken over from
dead and from paused owners. At the end the history checker
(``dynalease_dev.demo.history``) proves, from what DynamoDB committed, that no owner
committed after it was taken over and that no two owners' writes interleaved.

    python -m benchmarks.soak --processes 8 --minutes 10
    python -m benchmarks.soak --fencing     # fenced locks, tokens checked

With ``--fencing`` the locks are fenced: every history record carries its
guard's token (``note="token=N"``), and each write also updates a ledger item
per key through ``dynalease.fencing.fence_dynamodb_write``, outside the lock's
transaction, as a write to another table or account would be. At the end the
tokens are checked against the history: along each key's records a token never
goes down, a new owner always brings a larger one, an owner keeps its own; and
the ledger must hold the highest token it was sent.

It prints the figures (runs, acquisitions, commits, takeovers, kills, pauses,
lost guards, rejected commits, violations) and exits 1 on any violation, or if
no work was done. Without ``--endpoint`` it starts its own moto server.
See docs/soak.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from dynalease_dev.demo.checks import plural
from dynalease_dev.demo.history import (
    ACQUIRED,
    HEAD_SEQ,
    KEY_ATTR,
    RELEASED,
    SEQ_ATTR,
    append,
    check_history,
    check_records,
    commit,
    create_history_table,
    read_head,
)

from dynalease import DynamoDBClient
from dynalease._engine.store import Request
from dynalease._tooling.local_server import LocalServer
from dynalease._values import from_item
from dynalease.exceptions import (
    DynaleaseError,
    LockLost,
    LockNotAcquired,
    LockOwnershipLost,
    LockReleaseError,
    TransactionCanceledException,
)
from dynalease.lock import SyncDistributedLock
from dynalease.transaction import SyncTransaction

STAT_NAMES = (
    "lost",
    "rejected",
    "not_acquired",
    "release_errors",
    "conflicts",
    "errors",
    "fenced_writes",
    "fence_refused",
)
#: How often a run prints a progress line (``--progress-every``).
PROGRESS_EVERY_S = 30.0
#: The order figures are printed in.
FIGURES = (
    "runs",
    "acquisitions",
    "commits",
    "takeovers",
    "kills",
    "pauses",
    *STAT_NAMES,
    "overlaps",
    "stale_commits",
    "bad_tokens",
    "violations",
    "seconds",
)


@dataclass(frozen=True)
class Plan:
    """What one soak run does; passed to every worker."""

    endpoint: str
    region: str
    table: str
    history: str
    keys: int
    lease: float
    #: Fenced locks, tokens in the history, fenced writes to this ledger table ("": off).
    ledger: str = ""

    def client(self) -> DynamoDBClient:
        return DynamoDBClient(region=self.region, endpoint_url=self.endpoint)

    def ledger_writer(self) -> Any:
        """A plain boto3 client for the ledger: a write outside the lock's transactions."""
        import boto3

        return boto3.client("dynamodb", region_name=self.region, endpoint_url=self.endpoint)


def fenced_ledger_write(ledger: Any, table: str, key: str, owner: str, token: int) -> bool:
    """Record ``owner`` on the ledger item of ``key`` with ``token``; False if refused."""
    from botocore.exceptions import ClientError

    from dynalease.fencing import fence_dynamodb_write

    request = {
        "TableName": table,
        "Key": {"key": {"S": key}},
        "UpdateExpression": "SET #w = :w",
        "ExpressionAttributeNames": {"#w": "writer"},
        "ExpressionAttributeValues": {":w": {"S": owner}},
    }
    try:
        ledger.update_item(**fence_dynamodb_write(request, token))
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


def worker(plan: Plan, seed: int, channel: Connection) -> None:
    """One contender.

    Sends ``("ready",)`` and waits for the run's deadline (a ``time.monotonic()``
    value: one clock for every process on the machine); then sends
    ``("held", key, owner)`` while it holds a lock, and ``("stats", {...})``
    (cumulative) after each guard.
    """
    rng = random.Random(seed)
    client = plan.client()
    fencing = bool(plan.ledger)
    ledger = plan.ledger_writer() if fencing else None
    stats = dict.fromkeys(STAT_NAMES, 0)
    channel.send(("ready",))
    deadline: float = channel.recv()
    while time.monotonic() < deadline:
        key = f"key-{rng.randrange(plan.keys)}"
        guard = SyncDistributedLock(
            client,
            table=plan.table,
            key=key,
            lease_duration=plan.lease,
            wait_timeout=2 * plan.lease,
            fencing=fencing,
        )
        try:
            with guard:
                note = f"token={guard.fencing_token}" if fencing else ""
                commit(client, guard, table=plan.history, kind=ACQUIRED, note=note)
                channel.send(("held", key, guard.owner))
                for _ in range(rng.randint(1, 4)):
                    guard.raise_if_lost()
                    sequence = read_head(client, plan.history, key) + 1
                    with SyncTransaction(client) as transaction:
                        append(transaction, guard, table=plan.history, sequence=sequence, note=note)
                        # The work happens between check_in and commit, so a pause
                        # here meets a takeover and DynamoDB must reject the commit.
                        time.sleep(rng.uniform(0, plan.lease / 3))
                        if ledger is not None:  # a paused holder resumes here, late
                            stats["fenced_writes"] += 1
                            token = guard.fencing_token
                            if not fenced_ledger_write(
                                ledger, plan.ledger, key, guard.owner, token
                            ):
                                stats["fence_refused"] += 1
                commit(client, guard, table=plan.history, kind=RELEASED, note=note)
        except LockNotAcquired:
            stats["not_acquired"] += 1
        except LockOwnershipLost:
            stats["rejected"] += 1
        except LockLost:
            stats["lost"] += 1
        except TransactionCanceledException:
            stats["conflicts"] += 1  # the head moved under a valid guard: the checker judges
        except LockReleaseError:
            stats["release_errors"] += 1  # the row stays until observed for a lease
        except DynaleaseError:
            stats["errors"] += 1
        channel.send(("stats", dict(stats)))


@dataclass
class Worker:
    process: Any
    channel: Connection | None
    stats: dict[str, int] = field(default_factory=dict)
    ready: bool = False
    holding: tuple[str, str] | None = None
    resume_at: float | None = None


class Supervisor:
    """Starts workers, reads their reports, kills and pauses holders, collects figures."""

    def __init__(
        self,
        plan: Plan,
        processes: int,
        chaos_every: float,
        seed: int,
        progress_every: float = PROGRESS_EVERY_S,
    ) -> None:
        self.plan = plan
        self.progress_every = progress_every
        self.deadline: float | None = None  # set once the first workers are ready
        self.seconds = 0.0  # the run time, set with the deadline
        self.chaos_every = chaos_every
        self.rng = random.Random(seed)
        self.context = multiprocessing.get_context("spawn")
        self.client = plan.client()
        self.workers: list[Worker] = []
        self.finished: list[Worker] = []  # killed ones, kept for their last stats
        self.figures = {"runs": 0, "kills": 0, "pauses": 0}
        # For the progress lines: acquisitions announced, and the worker that last
        # announced each key (a new holder while it still holds is a takeover).
        self.announced = 0
        self.takeovers_seen = 0
        self.last_holder: dict[str, Worker] = {}
        # The history read so far for the progress lines, and each key's last sequence.
        self.history_rows: dict[tuple[str, int], dict[str, Any]] = {}
        self.history_seen: dict[str, int] = {}
        for _ in range(processes):
            self.spawn()

    def spawn(self) -> None:
        ours, theirs = self.context.Pipe()
        process = self.context.Process(
            target=worker, args=(self.plan, self.rng.randrange(2**32), theirs), daemon=True
        )
        process.start()
        theirs.close()  # so a killed worker's channel reports EOF instead of blocking
        self.workers.append(Worker(process, ours))
        self.figures["runs"] += 1

    def read(self, timeout: float) -> None:
        channels = {w.channel: w for w in self.workers if w.channel is not None}
        for channel in wait(list(channels), timeout):
            assert isinstance(channel, Connection)
            owner = channels[channel]
            try:
                message = channel.recv()
            except Exception:  # EOF, or a message cut short by SIGKILL
                owner.channel, owner.holding = None, None
                continue
            if message[0] == "ready":
                owner.ready = True
                if self.deadline is not None:
                    channel.send(self.deadline)
            elif message[0] == "held":
                self._announced(owner, message[1])
                owner.holding = (message[1], message[2])
            else:
                owner.stats, owner.holding = message[1], None

    def _announced(self, worker: Worker, key: str) -> None:
        previous = self.last_holder.get(key)
        # A new holder while the last one still holds the key: it was killed or paused.
        if previous not in (None, worker) and previous.holding and previous.holding[0] == key:
            self.takeovers_seen += 1
        self.last_holder[key] = worker
        self.announced += 1

    def progress(self, elapsed: float, seconds: float) -> str:
        """One line of how the run is going, from the workers' messages."""
        counts = (
            (self.announced, "acquisition"),
            (self.takeovers_seen, "takeover"),
            (self.figures["kills"], "kill"),
            (self.figures["pauses"], "pause"),
        )
        return (
            f"soak: {elapsed:.0f}/{seconds:g} s, "
            + ", ".join(plural(number, noun) for number, noun in counts)
            + f", violations so far: {self.violations_so_far()}"
        )

    def violations_so_far(self) -> int:
        """Violations in the history written so far.

        Only each key's records since the last look are read (a consistent Query per
        key: a Scan of the whole history would hold the one-request-at-a-time server
        for seconds), then checked together with the ones read before.
        """
        for index in range(self.plan.keys):
            key = f"key-{index}"
            # The head (the key's last sequence) first, then the records up to it: a head
            # and its record commit together, so those records are all there.
            head = self.client.sync_get_item(
                self.plan.history, {KEY_ATTR: key, SEQ_ATTR: HEAD_SEQ}, consistent_read=True
            )
            seen = self.history_seen.get(key, HEAD_SEQ)
            if head is None or head.get("head", 0) <= seen:
                continue
            params: dict[str, Any] = {
                "TableName": self.plan.history,
                "ConsistentRead": True,
                "KeyConditionExpression": "#k = :k AND #s BETWEEN :first AND :last",
                "ExpressionAttributeNames": {"#k": KEY_ATTR, "#s": SEQ_ATTR},
                "ExpressionAttributeValues": {
                    ":k": {"S": key},
                    ":first": {"N": str(seen + 1)},
                    ":last": {"N": str(head["head"])},
                },
            }
            while True:
                page = self.client._items.handle(Request("Query", params))
                for item in page.get("Items", []):
                    record = from_item(item)
                    self.history_rows[(key, record[SEQ_ATTR])] = record
                if not page.get("LastEvaluatedKey"):
                    break
                params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            self.history_rows[(key, HEAD_SEQ)] = head
            self.history_seen[key] = head["head"]
        return len(check_records(self.history_rows.values()).violations)

    def chaos(self) -> None:
        """SIGKILL or SIGSTOP one worker that holds a lock right now."""
        holders = [w for w in self.workers if w.holding and w.resume_at is None]
        self.rng.shuffle(holders)
        for candidate in holders:
            assert candidate.holding is not None
            key, owner = candidate.holding
            row = self.client.sync_get_item(self.plan.table, {"key": key}, consistent_read=True)
            if row is None or row.get("owner") != owner or not candidate.process.is_alive():
                continue
            if self.rng.random() < 0.5:
                candidate.process.kill()
                candidate.process.join(10)
                self.figures["kills"] += 1
                self.workers.remove(candidate)
                self.finished.append(candidate)
                self.spawn()
            else:
                os.kill(candidate.process.pid, signal.SIGSTOP)
                pause = self.rng.uniform(self.plan.lease, 2 * self.plan.lease)
                candidate.resume_at = time.monotonic() + pause
                self.figures["pauses"] += 1
            return

    def resume_due(self, everyone: bool = False) -> None:
        now = time.monotonic()
        for w in self.workers:
            if w.resume_at is not None and (everyone or now >= w.resume_at):
                os.kill(w.process.pid, signal.SIGCONT)
                w.resume_at = None

    def start(self, seconds: float) -> float:
        """Wait until every worker has started (imports take a while), then set the deadline."""
        waited = time.monotonic() + 120
        while not all(w.ready for w in self.workers) and time.monotonic() < waited:
            self.read(0.1)
        started = time.monotonic()
        self.deadline, self.seconds = started + seconds, seconds
        for w in self.workers:
            if w.ready and w.channel is not None:
                w.channel.send(self.deadline)
        return started

    def run(self) -> dict[str, int]:
        assert self.deadline is not None, "call start() first"
        next_chaos = time.monotonic() + self.chaos_every / 2
        started = time.monotonic()
        next_progress = started + self.progress_every
        while time.monotonic() < self.deadline:
            self.read(0.1)
            self.resume_due()
            if time.monotonic() >= next_progress:
                print(self.progress(time.monotonic() - started, self.seconds), flush=True)
                next_progress += self.progress_every
            if time.monotonic() >= next_chaos:
                self.chaos()
                next_chaos = time.monotonic() + self.chaos_every * self.rng.uniform(0.5, 1.5)
        self.resume_due(everyone=True)
        print(
            "soak: time is up; the workers finish their guards, then the history is checked",
            flush=True,
        )
        # Workers finish their current guard (at most a wait and a few commits).
        finish_by = time.monotonic() + 4 * self.plan.lease + 30
        while any(w.process.is_alive() for w in self.workers) and time.monotonic() < finish_by:
            self.read(0.1)
        for w in self.workers:
            while w.channel is not None and w.channel.poll():
                self.read(0)
            if w.process.is_alive():
                w.process.kill()
            w.process.join(10)
        totals = dict.fromkeys(STAT_NAMES, 0)
        for w in self.workers + self.finished:
            for name in STAT_NAMES:
                totals[name] += w.stats.get(name, 0)
        return {**self.figures, **totals}


@contextmanager
def _server(endpoint: str | None) -> Iterator[str]:
    if endpoint:
        yield endpoint
    else:
        with LocalServer() as server:
            yield server.url


def check_tokens(client: DynamoDBClient, plan: Plan) -> list[str]:
    """The fenced run's tokens against the history, and the ledger against the tokens."""
    violations: list[str] = []
    records: dict[str, list[tuple[int, str, int]]] = {}
    params: dict[str, Any] = {"TableName": plan.history, "ConsistentRead": True}
    while True:
        page = client._items.handle(Request("Scan", params))
        for item in page.get("Items", []):
            note = item.get("note", {}).get("S", "")
            if note.startswith("token="):
                key, seq = item["key"]["S"], int(item["seq"]["N"])
                records.setdefault(key, []).append((seq, item["owner"]["S"], int(note[6:])))
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    for key, history in sorted(records.items()):
        tokens: dict[str, int] = {}
        last_owner, last_token = None, 0
        for seq, owner, token in sorted(history):
            if tokens.setdefault(owner, token) != token:
                violations.append(
                    f"{key!r} #{seq}: {owner} changed its token {tokens[owner]} -> {token}"
                )
            if owner != last_owner and token <= last_token:
                violations.append(
                    f"{key!r} #{seq}: new owner {owner} has token {token}, not above {last_token}"
                )
            elif token < last_token:
                violations.append(f"{key!r} #{seq}: token {token} after {last_token}")
            if len(set(tokens.values())) != len(tokens):
                violations.append(f"{key!r}: two owners share a token: {tokens}")
            last_owner, last_token = owner, max(last_token, token)
        row = client._items.handle(
            Request(
                "GetItem",
                {"TableName": plan.ledger, "Key": {"key": {"S": key}}, "ConsistentRead": True},
            )
        ).get("Item")
        if row is not None:
            stored = int(row["fence"]["N"])
            highest = max(token for _, _, token in history)
            if stored > highest:
                violations.append(
                    f"ledger {key!r} holds token {stored}, above the history's {highest}"
                )
    return violations


def soak(
    *,
    processes: int,
    seconds: float,
    keys: int,
    lease: float,
    chaos_every: float,
    endpoint: str | None,
    region: str,
    seed: int,
    fencing: bool = False,
    progress_every: float = PROGRESS_EVERY_S,
) -> tuple[dict[str, Any], list[str]]:
    """Run one soak; returns the figures and the violations found."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with _server(endpoint) as url:
        suffix = uuid.uuid4().hex[:8]
        ledger = f"soak-ledger-{suffix}" if fencing else ""
        plan = Plan(
            url, region, f"soak-locks-{suffix}", f"soak-history-{suffix}", keys, lease, ledger
        )
        client = plan.client()
        client.sync_create_table(plan.table, partition_key=("key", "S"), wait=True)
        create_history_table(client, plan.history)
        if ledger:
            client.sync_create_table(ledger, partition_key=("key", "S"), wait=True)
        supervisor = Supervisor(plan, processes, chaos_every, seed, progress_every)
        started = supervisor.start(seconds)
        figures: dict[str, Any] = dict(supervisor.run())
        report = check_history(client, plan.history)
        bad_tokens = check_tokens(client, plan) if fencing else []
        figures.update(
            seconds=round(time.monotonic() - started, 1),
            acquisitions=report.acquisitions,
            commits=report.commits,
            takeovers=report.takeovers,
            overlaps=report.overlaps,
            stale_commits=report.stale_commits,
            bad_tokens=len(bad_tokens),
            violations=len(report.violations) + len(bad_tokens),
        )
        return figures, [*report.violations, *bad_tokens]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak",
        description="Contend for a few locks from many processes while holders are killed "
        "and paused; check the commit history for overlaps.",
    )
    parser.add_argument("--processes", type=int, default=8, help="worker processes (default 8)")
    parser.add_argument("--minutes", type=float, default=10.0, help="run time (default 10)")
    parser.add_argument("--seconds", type=float, help="run time in seconds (overrides --minutes)")
    parser.add_argument("--keys", type=int, default=3, help="lock keys contended (default 3)")
    parser.add_argument("--lease", type=float, default=2.0, help="lease seconds (default 2)")
    parser.add_argument(
        "--chaos-every", type=float, default=4.0, help="mean seconds between kills/pauses"
    )
    parser.add_argument("--endpoint", help="DynamoDB endpoint (default: start a moto server)")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument(
        "--progress-every",
        type=float,
        default=PROGRESS_EVERY_S,
        metavar="S",
        help=f"seconds between progress lines (default {PROGRESS_EVERY_S:g})",
    )
    parser.add_argument(
        "--fencing", action="store_true", help="fenced locks; check tokens and a fenced ledger"
    )
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    if args.processes < 2 or args.keys < 1 or seconds <= 0 or args.lease < 0.5:
        parser.error("need --processes >= 2, --keys >= 1, a positive run time and --lease >= 0.5")
    if args.progress_every <= 0:
        parser.error(
            f"--progress-every must be a positive number of seconds, got {args.progress_every:g}"
        )
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(
        f"soak: {args.processes} processes x {seconds:g} s on {args.keys} keys, "
        f"lease {args.lease:g} s, a kill or pause every ~{args.chaos_every:g} s, seed {seed}"
        + (", fenced" if args.fencing else ""),
        flush=True,
    )
    figures, violations = soak(
        processes=args.processes,
        seconds=seconds,
        keys=args.keys,
        lease=args.lease,
        chaos_every=args.chaos_every,
        endpoint=args.endpoint,
        region=args.region,
        seed=seed,
        fencing=args.fencing,
        progress_every=args.progress_every,
    )
    for name in FIGURES:
        print(f"  {name:<16}{figures[name]}")
    for violation in violations[:20]:
        print(f"  VIOLATION {violation}")
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    if violations:
        print(f"soak: FAILED, {len(violations)} violations", file=sys.stderr)
        return 1
    if not figures["commits"]:
        print("soak: FAILED, no commits were made (is the endpoint reachable?)", file=sys.stderr)
        return 1
    print("soak: ok, 0 violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
