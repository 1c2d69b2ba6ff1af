"""Election candidates and observers in their own processes, for the history tests.

Targets of processes started with multiprocessing's ``spawn`` method (see
workers.py): each builds its own client and talks to the test through a queue.
A leader appends ``[term, pid, n]`` to one ledger item every 50 ms through
``fence_dynamodb_write`` with its term as the token, so DynamoDB orders every
write by term and refuses a deposed leader's; the ledger's list is the history.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import boto3

from dynalease.election import SyncElection
from dynalease.fencing import fence_dynamodb_write
from support.workers import REGION, WORKER_LIMIT_S, Target, pause

#: The election's name (its row's key) and the ledger item's id.
NAME = "leader"
LEDGER_ID = "ledger"
#: A leader's pause between two ledger writes.
WRITE_EVERY_S = 0.05


@dataclass(frozen=True)
class Arena:
    """Where one history runs: server, lock table, ledger table, lease."""

    endpoint: str
    table: str
    ledger: str
    lease: float

    def election(self) -> SyncElection:
        """This process's candidate (or observer), on a client of its own."""
        client = Target(self.endpoint, self.table, self.ledger, NAME, self.lease).client()
        return SyncElection(client, table=self.table, name=NAME, lease_duration=self.lease)


def _ledger_writer(arena: Arena) -> Any:
    return boto3.client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=arena.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _append(dynamodb: Any, arena: Arena, term: int, n: int) -> bool:
    """Append ``[term, pid, n]`` to the ledger, fenced by ``term``; False if refused."""
    entry = {"L": [{"N": str(term)}, {"N": str(os.getpid())}, {"N": str(n)}]}
    request = {
        "TableName": arena.ledger,
        "Key": {"id": {"S": LEDGER_ID}},
        "UpdateExpression": "SET #w = list_append(if_not_exists(#w, :none), :entry)",
        "ExpressionAttributeNames": {"#w": "writes"},
        "ExpressionAttributeValues": {":none": {"L": []}, ":entry": {"L": [entry]}},
    }
    try:
        dynamodb.update_item(**fence_dynamodb_write(request, term))
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return False
    return True


def candidate(arena: Arena, events: Any) -> None:
    """Campaign for ever; while leading, write the ledger until leadership is lost.

    Reports ``("leading", pid, term, monotonic)`` on each win (after its first write) and
    ``("refused", pid, term)`` for each write DynamoDB refused. A process the test
    SIGSTOPs and resumes writes once more before it looks at its lease: that late
    write is the one fencing must refuse.
    """
    election = arena.election()
    dynamodb = _ledger_writer(arena)
    deadline = time.monotonic() + WORKER_LIMIT_S * 3
    while time.monotonic() < deadline:
        with election.campaign(value=str(os.getpid())) as leadership:
            n = 0
            while True:
                n += 1
                if not _append(dynamodb, arena, leadership.term, n):
                    events.put(("refused", os.getpid(), leadership.term))
                    break
                if n == 1:  # reported once the term is in the ledger
                    events.put(("leading", os.getpid(), leadership.term, time.monotonic()))
                if leadership.lost:
                    break
                pause(WRITE_EVERY_S)  # where a SIGSTOP most likely lands: a write follows
            leadership.resign()


def observer(arena: Arena, events: Any, index: int) -> None:
    """Observe without campaigning: ``("seen", index, term or None, monotonic)`` per change."""
    import threading

    stop = threading.Event()

    def seen(leader: Any) -> None:
        events.put(("seen", index, None if leader is None else leader.term, time.monotonic()))

    threading.Timer(WORKER_LIMIT_S * 3, stop.set).start()
    arena.election().observe(seen, stop=stop)
