"""One demo worker process: contends for customer locks until its end time.

Run by ``dynalease-dev demo`` as ``python -m dynalease_dev.demo.worker CONFIG_JSON``.
It reports what happens as JSON lines on stdout, one event per line, so a
SIGKILL of this process can never corrupt what the supervisor reads.

Each job picks a customer and does one of two things:

- *ledger* (most jobs): under a :class:`SyncDistributedLock`, append an
  ``acquired`` record to the history, read the customer's counter, work for a
  while (renewals happen in the background), then commit the incremented
  counter and a ``write`` record in one transaction checked in with the guard,
  and a ``released`` record before leaving. A lost update would show as a
  counter lower than the commits reported; a commit after a takeover would be
  rejected by DynamoDB and show as a stale commit in the history.
- *audit*: a function decorated with :func:`distributed_lock` on the same key
  template reads the counter twice with a pause between; under mutual
  exclusion it cannot change.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from dynalease.client import DynamoDBClient
from dynalease.exceptions import DynaleaseError, LockLost, LockNotAcquired, RequestFailedError
from dynalease.lock import SyncDistributedLock, distributed_lock
from dynalease.transaction import SyncTransaction

from . import history

KEY_TEMPLATE = "customer:{customer_id}"
CUSTOMER_ATTR = "customer_id"
COMMITS_ATTR = "commits"
AUDIT_SHARE = 0.2
HOT_SHARE = 0.5
STEP_S = 0.05


@dataclass(frozen=True)
class WorkerConfig:
    """What the supervisor tells a worker (passed as JSON)."""

    name: str
    endpoint: str | None
    region: str | None
    profile: str | None
    locks: str
    results: str
    history: str
    customers: list[str]
    lease_s: float
    hold_max_s: float
    victim: bool = False
    seed: int = 0


def emit(event: str, **fields: Any) -> None:
    """Report one event to the supervisor."""
    sys.stdout.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
    sys.stdout.flush()


def wait_for_start() -> dict[str, float]:
    """Say we are ready, then block until the supervisor sends the run's timing.

    Starting the clock only when every process is ready keeps a slow start (many
    imports on a busy machine) from eating into the run.
    """
    emit("ready", pid=os.getpid())
    line = sys.stdin.readline()
    if not line:  # the supervisor is gone
        raise SystemExit(0)
    timing: dict[str, float] = json.loads(line)
    return timing


class Worker:
    """The job loop of one process."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.client = DynamoDBClient(
            region=config.region, endpoint_url=config.endpoint, profile=config.profile
        )
        self.random = random.Random(config.seed)
        self.wait_s = 2 * config.lease_s + 2
        self.audit = distributed_lock(
            self.client,
            table=config.locks,
            key=KEY_TEMPLATE,
            lease_duration=config.lease_s,
            wait_timeout=self.wait_s,
        )(self._audit_body)
        self._audit_started = 0.0
        self.end_at = 0.0

    def run(self) -> None:
        timing = wait_for_start()
        config = self.config
        end_at = timing["end_at"]
        victim_at = timing["victim_at"] if config.victim else None
        self.end_at = end_at
        while time.time() < end_at:
            # The first customer is hot: half of all jobs want it, so its lock is
            # contended at any moment, and a crash while holding it is noticed at once.
            hot = self.random.random() < HOT_SHARE
            customer = config.customers[0] if hot else self.random.choice(config.customers)
            try:
                if victim_at is not None and time.time() >= victim_at:
                    # The supervisor kills us during the long hold; if the lock was
                    # busy for the whole wait, the next job tries again.
                    self.ledger(config.customers[0], victim=True)
                elif self.random.random() < AUDIT_SHARE:
                    self.run_audit(customer)
                else:
                    self.ledger(customer)
            except DynaleaseError as error:  # e.g. throttling on a real table: report, go on
                emit("error", error=" ".join(str(error).split()))
            time.sleep(self.random.uniform(0, 0.2))
        emit("done")

    # --- ledger jobs ---------------------------------------------------------

    def ledger(self, customer: str, *, victim: bool = False) -> None:
        config = self.config
        key = KEY_TEMPLATE.format(customer_id=customer)
        guard = SyncDistributedLock(
            self.client,
            table=config.locks,
            key=key,
            lease_duration=config.lease_s,
            wait_timeout=self.wait_s,
        )
        emit("waiting", key=key)
        try:
            with guard:
                emit("acquired", key=key, owner=guard.owner, wait_ms=guard.metrics.wait_ms)
                history.commit(self.client, guard, table=config.history, kind=history.ACQUIRED)
                item = self.client.sync_get_item(
                    config.results, {CUSTOMER_ATTR: customer}, consistent_read=True
                )
                seen = int(item[COMMITS_ATTR]) if item else 0
                if victim:
                    emit("long_hold", key=key)
                    # Bounded, so an orphaned victim still ends.
                    self._hold(guard, key, max(0.0, self.end_at - time.time()) + 10)
                self._hold(guard, key, self.random.uniform(0.05, config.hold_max_s))
                self._write(guard, customer, seen + 1)
                history.commit(self.client, guard, table=config.history, kind=history.RELEASED)
        except LockNotAcquired:
            emit("gave_up", key=key, wait_ms=guard.metrics.wait_ms)
            return
        except LockLost as error:
            emit("lost", key=key, error=str(error))
            return
        metrics = guard.metrics
        emit(
            "released",
            key=key,
            kind="ledger",
            wait_ms=metrics.wait_ms,
            reads=metrics.read_requests,
            writes=metrics.write_requests,
            renewals=metrics.renewals,
        )

    def _hold(self, guard: SyncDistributedLock, key: str, seconds: float) -> None:
        """Work for ``seconds``, reporting renewals as the runtime confirms them."""
        end = time.monotonic() + seconds
        renewals = 0
        while time.monotonic() < end:
            time.sleep(STEP_S)
            guard.raise_if_lost()
            now = guard.metrics.renewals
            if now != renewals:
                renewals = now
                emit("renewed", key=key, renewals=now)

    def _write(self, guard: SyncDistributedLock, customer: str, commits: int) -> None:
        config = self.config
        sequence = history.read_head(self.client, config.history, guard.key) + 1
        try:
            with SyncTransaction(self.client) as transaction:
                history.append(transaction, guard, table=config.history, sequence=sequence)
                transaction.put(
                    config.results,
                    {CUSTOMER_ATTR: customer, COMMITS_ATTR: commits, "last_owner": guard.owner},
                )
        except RequestFailedError as error:
            if error.may_have_committed:
                emit("uncertain", key=guard.key, customer=customer)
            raise
        emit("committed", key=guard.key, customer=customer, commits=commits)

    # --- audit jobs ----------------------------------------------------------

    def run_audit(self, customer: str) -> None:
        key = KEY_TEMPLATE.format(customer_id=customer)
        emit("waiting", key=key)
        started = time.monotonic()
        self._audit_started = started
        try:
            changed = self.audit(customer)
        except LockNotAcquired:
            emit("gave_up", key=key, wait_ms=(time.monotonic() - started) * 1000)
            return
        except LockLost as error:
            emit("lost", key=key, error=str(error))
            return
        emit("released", key=key, kind="audit", changed=changed)

    def _audit_body(self, customer_id: str) -> bool:
        """Read the counter twice under the lock; True if it changed (a violation)."""
        key = KEY_TEMPLATE.format(customer_id=customer_id)
        emit("acquired", key=key, wait_ms=(time.monotonic() - self._audit_started) * 1000)
        table, where = self.config.results, {CUSTOMER_ATTR: customer_id}
        before = self.client.sync_get_item(table, where, consistent_read=True)
        time.sleep(self.random.uniform(0.05, self.config.hold_max_s / 2))
        after = self.client.sync_get_item(table, where, consistent_read=True)
        return before != after


def main(argv: list[str]) -> int:
    config = WorkerConfig(**json.loads(argv[0]))
    Worker(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
