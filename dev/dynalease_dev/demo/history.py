"""A commit history for critical sections, and a checker that proves locks never overlapped.

Tests, ``benchmarks/soak.py`` and the demo make every critical section append
records to a *history table* in the same ``TransactWriteItems`` as the guard's
``check_in``. DynamoDB then only keeps a record if the guard still owned the
lock row when the record committed, and the checker reads the table back and
proves, per lock key, that ownership moved in one direction only.

Table layout (partition key ``key`` (S) = the lock key, sort key ``seq`` (N)):

- ``seq = 0`` is the *head* of a lock key: ``head`` (N) is the last sequence
  number committed, ``owner`` (S) who committed it.
- ``seq = n >= 1`` is the n-th record: ``owner`` (S), ``kind`` (S), ``at`` (N,
  the writer's wall clock, for people only) and an optional ``note`` (S).

An append is three items of one transaction: the guard's ownership
``ConditionCheck``; an ``Update`` of the head to ``n`` on condition that it is
``n - 1``; and a ``Put`` of record ``n`` on condition that it does not exist.
Transactions are serializable and every append for a key updates that key's
head, so sequence numbers are the commit order.

Record kinds: ``acquired`` (write it right after acquiring, before any other
record), ``write`` (the protected work) and ``released`` (optional, just before
leaving the lock block). For each key, walking the records in sequence order,
the checker reports:

- a *stale commit*: a record of an owner after another owner's ``acquired``
  record (it committed after it was taken over), or after its own
  ``released`` record;
- an *overlap*: a ``write`` of an owner after another owner's ``write`` that
  followed its own earlier one (writes of two owners interleave);
- any other inconsistency: gaps in the sequence, a head that disagrees with the
  records, an owner acquiring twice, records of an owner without an
  ``acquired`` record, malformed records.

It also counts *takeovers*: ``acquired`` records whose previous holder left no
``released`` record (it was killed, paused or lost its lease).

The proof is only as good as the server's transactions. The threaded
``python -m moto.server`` undoes concurrent acknowledged writes when it cancels
a transaction, which shows up here as violations; run moto one request at a
time (``dynalease._tooling.local_server``, which the tests, the demo and the soak use).

Usage::

    create_history_table(client, "history")
    with SyncDistributedLock(client, table="locks", key="job") as guard:
        commit(client, guard, table="history", kind=ACQUIRED)
        ...
        sequence = read_head(client, "history", "job") + 1
        with SyncTransaction(client) as transaction:
            append(transaction, guard, table="history", sequence=sequence)
            transaction.put("results", {"job": "job", "done": True})
    report = check_history(client, "history")
    assert report.ok, report.violations
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack, overload

from dynalease._engine.protocol import check_table_name
from dynalease._engine.store import Request
from dynalease._values import from_item
from dynalease.client import DynamoDBClient
from dynalease.exceptions import TableNotFoundError
from dynalease.lock import DistributedLock, SyncDistributedLock
from dynalease.transaction import SyncTransaction, Transaction

__all__ = [
    "ACQUIRED",
    "KINDS",
    "RELEASED",
    "WRITE",
    "HistoryReport",
    "Record",
    "append",
    "check_history",
    "check_records",
    "commit",
    "create_history_table",
    "read_head",
]

ACQUIRED = "acquired"
WRITE = "write"
RELEASED = "released"
KINDS = frozenset({ACQUIRED, WRITE, RELEASED})

KEY_ATTR = "key"
SEQ_ATTR = "seq"
HEAD_SEQ = 0

Guard = DistributedLock | SyncDistributedLock


class Record(TypedDict, total=False):
    """What a record says besides its owner, as :func:`append` and :func:`commit` take it.

    ``kind`` is one of :data:`KINDS` (default :data:`WRITE`); ``note`` is free
    text for people (default none).
    """

    kind: str
    note: str


def create_history_table(client: DynamoDBClient, table: str) -> None:
    """Create the history table (key S + seq N, on demand) unless it exists; wait until ACTIVE."""
    if not client.sync_table_exists(table):
        client.sync_create_table(
            table, partition_key=(KEY_ATTR, "S"), sort_key=(SEQ_ATTR, "N"), wait=True
        )


def read_head(client: DynamoDBClient, table: str, key: str) -> int:
    """The last sequence number committed for ``key`` (0 before the first record)."""
    item = client.sync_get_item(table, {KEY_ATTR: key, SEQ_ATTR: HEAD_SEQ}, consistent_read=True)
    head = None if item is None else item.get("head")
    return head if isinstance(head, int) else 0


def append(
    transaction: Transaction | SyncTransaction,
    guard: Guard,
    *,
    table: str,
    sequence: int,
    **record: Unpack[Record],
) -> None:
    """Add record ``sequence`` of ``guard``'s key to ``transaction``, checked in with ``guard``.

    ``sequence`` must be the head plus one (see :func:`read_head`); if another
    commit advanced the head meanwhile, DynamoDB cancels the transaction. The
    guard is checked in unless it already is, so the record commits only while
    the guard owns the lock. One append per key and transaction.
    """
    check_table_name(table)
    unknown = sorted(record.keys() - Record.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected record fields {unknown}; a record takes kind and note")
    kind, note = record.get("kind", WRITE), record.get("note", "")
    if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 1:
        raise ValueError(f"sequence must be an int >= 1 (the head plus one), got {sequence!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, got {type(note).__name__}")
    key = guard.key
    head_key = {KEY_ATTR: {"S": key}, SEQ_ATTR: {"N": str(HEAD_SEQ)}}
    for entry in transaction._items:
        update = entry.get("Update")
        if update and update.get("TableName") == table and update.get("Key") == head_key:
            raise ValueError(
                f"this transaction already appends to the history of {key!r}; "
                "commit it and append the next record in a new transaction"
            )
    if not any(lease is guard._lease for _, lease in transaction._leases):
        guard.check_in(transaction)
    if sequence == 1:
        condition = "attribute_not_exists(#h)"
        values: dict[str, Any] = {":n": sequence, ":o": guard.owner}
    else:
        condition = "#h = :p"
        values = {":n": sequence, ":o": guard.owner, ":p": sequence - 1}
    transaction.update(
        table,
        {KEY_ATTR: key, SEQ_ATTR: HEAD_SEQ},
        update="SET #h = :n, #o = :o",
        condition=condition,
        names={"#h": "head", "#o": "owner"},
        values=values,
    )
    item: dict[str, Any] = {
        KEY_ATTR: key,
        SEQ_ATTR: sequence,
        "owner": guard.owner,
        "kind": kind,
        "at": round(time.time(), 6),
    }
    if note:
        item["note"] = note
    transaction.put(table, item, condition="attribute_not_exists(#s)", names={"#s": SEQ_ATTR})


def commit(
    client: DynamoDBClient,
    guard: SyncDistributedLock,
    *,
    table: str,
    **record: Unpack[Record],
) -> int:
    """Append one record for ``guard`` in its own transaction; returns its sequence number.

    Raises :class:`~dynalease.exceptions.LockLost` when the guard is not held
    (nothing is sent) and :class:`~dynalease.exceptions.LockOwnershipLost` when
    DynamoDB rejected the record because the lock moved on.
    """
    sequence = read_head(client, table, guard.key) + 1
    with SyncTransaction(client) as transaction:
        append(transaction, guard, table=table, sequence=sequence, **record)
    return sequence


class _RecordCount:
    """A :class:`HistoryReport` attribute: how many records of one kind the history holds."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @overload
    def __get__(self, report: None, owner: type[HistoryReport]) -> _RecordCount: ...
    @overload
    def __get__(self, report: HistoryReport, owner: type[HistoryReport]) -> int: ...
    def __get__(
        self, report: HistoryReport | None, owner: type[HistoryReport]
    ) -> _RecordCount | int:
        return self if report is None else report.records.get(self.kind, 0)


@dataclass(frozen=True)
class HistoryReport:
    """What :func:`check_history` found; ``ok`` when there are no violations.

    ``records`` counts the records by kind, which ``acquisitions``, ``commits``
    and ``releases`` read.
    """

    keys: int = 0
    owners: int = 0
    records: Mapping[str, int] = field(default_factory=dict)
    takeovers: int = 0
    overlaps: int = 0
    stale_commits: int = 0
    violations: tuple[str, ...] = field(default_factory=tuple)

    acquisitions = _RecordCount(ACQUIRED)
    commits = _RecordCount(WRITE)
    releases = _RecordCount(RELEASED)

    @property
    def ok(self) -> bool:
        """True when the history proves that no two owners overlapped."""
        return not self.violations

    def summary(self) -> str:
        """One line with every count."""
        return (
            f"keys={self.keys} owners={self.owners} acquisitions={self.acquisitions} "
            f"commits={self.commits} releases={self.releases} takeovers={self.takeovers} "
            f"overlaps={self.overlaps} stale_commits={self.stale_commits} "
            f"violations={len(self.violations)}"
        )


def check_history(client: DynamoDBClient, table: str) -> HistoryReport:
    """Read the whole history table (strongly consistent) and check it."""
    check_table_name(table)
    client._check_process()
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        try:
            page = client._items.handle(Request("Scan", params))
        except TableNotFoundError as error:
            raise TableNotFoundError(
                f"history table {table!r} does not exist; create it with create_history_table()",
                code=error.code,
                operation=error.operation,
            ) from error
        items.extend(from_item(item) for item in page.get("Items", []))
        last = page.get("LastEvaluatedKey")
        if not last:
            break
        params["ExclusiveStartKey"] = last
    return check_records(items)


@dataclass
class _KeyState:
    holder: str | None = None
    acquired: set[str] = field(default_factory=set)
    superseded: dict[str, int] = field(default_factory=dict)
    released: dict[str, int] = field(default_factory=dict)
    last_writer: str | None = None
    done_writers: set[str] = field(default_factory=set)


def check_records(items: Iterable[Mapping[str, Any]]) -> HistoryReport:
    """Check history items given as plain values (as :func:`check_history` reads them)."""
    by_key: dict[str, dict[int, Mapping[str, Any]]] = {}
    violations: list[str] = []
    for item in items:
        key, seq = item.get(KEY_ATTR), item.get(SEQ_ATTR)
        if not isinstance(key, str) or isinstance(seq, bool) or not isinstance(seq, int):
            violations.append(f"malformed history item {dict(item)!r}")
            continue
        by_key.setdefault(key, {})[seq] = item
    owners: set[str] = set()
    counts = {"acquired": 0, "write": 0, "released": 0, "takeovers": 0, "overlaps": 0, "stale": 0}
    for key in sorted(by_key):
        records = by_key[key]
        head_item = records.pop(HEAD_SEQ, None)
        head = head_item.get("head") if head_item is not None else None
        last = max(records, default=0)
        if head != last:
            violations.append(f"{key!r}: the head says {head!r} but the last record is {last}")
        missing = sorted(set(range(1, last + 1)) - set(records))
        if missing or min(records, default=1) < 1:
            violations.append(f"{key!r}: sequence numbers are not 1..{last} (missing {missing})")
        state = _KeyState()
        for seq in sorted(records):
            _check_record(key, seq, records[seq], state, owners, counts, violations)
    return HistoryReport(
        keys=len(by_key),
        owners=len(owners),
        records={kind: counts[kind] for kind in KINDS},
        takeovers=counts["takeovers"],
        overlaps=counts["overlaps"],
        stale_commits=counts["stale"],
        violations=tuple(violations),
    )


def _check_record(
    key: str,
    seq: int,
    record: Mapping[str, Any],
    state: _KeyState,
    owners: set[str],
    counts: dict[str, int],
    violations: list[str],
) -> None:
    owner, kind = record.get("owner"), record.get("kind")
    where = f"{key!r} seq {seq}"
    if not isinstance(owner, str) or not owner or kind not in KINDS:
        violations.append(f"{where}: malformed record {dict(record)!r}")
        return
    owners.add(owner)
    counts[kind] += 1
    if kind == ACQUIRED:
        if owner in state.acquired:
            violations.append(f"{where}: owner {owner} acquired a second time")
        previous = state.holder
        if previous is not None and previous != owner:
            state.superseded[previous] = seq
            if previous not in state.released:
                counts["takeovers"] += 1
        state.acquired.add(owner)
        state.holder = owner
        return
    problems = []
    if owner not in state.acquired:
        problems.append("its owner has no earlier 'acquired' record")
    if owner in state.superseded:
        counts["stale"] += 1
        problems.append(
            f"committed after another owner acquired the lock at seq {state.superseded[owner]}"
        )
    elif owner in state.released:
        counts["stale"] += 1
        problems.append(f"committed after its own 'released' record at seq {state.released[owner]}")
    if kind == WRITE:
        if owner in state.done_writers:
            counts["overlaps"] += 1
            problems.append("its owner's writes interleave with another owner's writes")
        if state.last_writer is not None and state.last_writer != owner:
            state.done_writers.add(state.last_writer)
        state.last_writer = owner
    else:
        state.released.setdefault(owner, seq)
    if problems:
        violations.append(f"{where} ({kind} by {owner}): " + "; ".join(problems))
