"""The lock rows of a table as ``dynalease inspect`` shows them: read-only.

It sends reads only: a GetItem for ``--key``, a Scan otherwise, both strongly
consistent. :class:`Watcher` keeps an observation cache like a contender's
(:class:`dynalease._engine.observations.Observations`): a row is "unchanged"
for as long as its (owner, version, lease_ms) has been seen on this machine's
monotonic clock, and a contender may take it over once that reaches the stored
lease. A renewal shows as a new version with the same owner.

:mod:`dynalease.cli.inspect` imports this module only when the command runs, so
``dynalease --help`` does not load the client.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .._engine import protocol as p
from .._engine.observations import Observations
from .._engine.queue_rows import QUEUE_PREFIX
from .._engine.shared_rows import SHARED_OWNER, WRITER_PREFIX
from .._engine.store import Request
from .._redact import escaped
from ..admin import holder_of
from ..client import DynamoDBClient
from ..exceptions import MalformedLockRow
from ..keys import PERMIT_PREFIX, RESULT_PREFIX

HEADERS = ("key", "owner", "version", "lease", "protocol")
WATCH_HEADERS = ("key", "owner", "version", "lease", "unchanged for", "renewals", "state")


@dataclass(frozen=True, slots=True)
class Row:
    """One lock row as read: the parsed row, a free fenced row, or why it is not a lock row."""

    key: str
    parsed: p.LockRow | None
    problem: str = ""
    #: The counter of a free (released) fenced row; None for any other row.
    free_fence: int | None = None
    #: The row's ``holder`` map as plain values (empty: a pydynox row, or none).
    holder: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ScanCost:
    """What reading the rows cost, and the read rate it keeps to (``--max-rcu``)."""

    #: Read capacity units per second the scan stays under; None: no limit.
    max_rcu: float | None = None
    #: Scan pages of at most this many items: a page is the unit the pacing waits after.
    page_size: int = 100
    pages: int = 0
    rcu: float = 0.0


def read_rows(
    client: DynamoDBClient,
    table: str,
    *,
    key: str | None = None,
    prefix: str | None = None,
    cost: ScanCost | None = None,
) -> list[Row]:
    """The lock rows of ``table`` (one key, a key prefix, or all), sorted by key."""
    if key is not None:
        answer = client._items.handle(
            Request(
                "GetItem",
                {"TableName": table, "Key": {p.KEY_ATTR: {"S": key}}, "ConsistentRead": True},
            )
        )
        items = [answer["Item"]] if "Item" in answer else []
    else:
        items = list(_scan(client, table, prefix, ScanCost() if cost is None else cost))
    return sorted((row_of(item, table) for item in items), key=lambda row: row.key)


def _scan(
    client: DynamoDBClient, table: str, prefix: str | None, cost: ScanCost
) -> Iterator[dict[str, Any]]:
    """Strongly consistent Scan pages; with ``cost.max_rcu``, each page is followed by the
    pause that keeps the scan under that rate, so it never throttles the locks' own table."""
    params: dict[str, Any] = {
        "TableName": table,
        "ConsistentRead": True,
        "Limit": cost.page_size,
        "ReturnConsumedCapacity": "TOTAL",
    }
    if prefix:
        params["FilterExpression"] = "begins_with(#k, :prefix)"
        params["ExpressionAttributeNames"] = {"#k": p.KEY_ATTR}
        params["ExpressionAttributeValues"] = {":prefix": {"S": prefix}}
    while True:
        started = time.monotonic()
        page = client._items.handle(Request("Scan", params))
        units = float((page.get("ConsumedCapacity") or {}).get("CapacityUnits") or 0.0)
        cost.pages += 1
        cost.rcu += units
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if cost.max_rcu:
            time.sleep(max(0.0, units / cost.max_rcu - (time.monotonic() - started)))


def row_of(item: dict[str, Any], table: str) -> Row:
    """One item as a :class:`Row`: parsed, free, or not a lock row (and why)."""
    key_value = item.get(p.KEY_ATTR, {})
    key = key_value.get("S", repr(key_value)) if isinstance(key_value, dict) else repr(key_value)
    try:
        if p.is_free(item):
            fence = p.fence_of(item, table=table, key=key)
            return Row(key, None, free_fence=fence)
        fenced = item.get(p.PROTOCOL_ATTR) == {"N": str(p.FENCED_PROTOCOL)}
        protocol = p.FENCED_PROTOCOL if fenced else p.PROTOCOL
        parsed = p.parse_row(item, table=table, key=key, protocol=protocol)
        return Row(key, parsed, holder=holder_of(item))
    except MalformedLockRow as error:
        return Row(key, None, error.problem)


def _lease(row: Row) -> str:
    return f"{row.parsed.lease_ms / 1000:g} s" if row.parsed else "-"


def _protocol(row: Row) -> str:
    if row.free_fence is not None:
        return f"v2 free (released), fence {row.free_fence}"
    if row.parsed is None:
        return f"not a lock row: {row.problem}"
    if row.parsed.fenced:
        return f"v2 fenced, token {row.parsed.fence}"
    return "v1 ok"


def snapshot_rows(rows: list[Row]) -> list[tuple[str, ...]]:
    """Table cells for a one-off view."""
    return [
        _shown(
            (
                row.key,
                row.parsed.owner if row.parsed else "-",
                row.parsed.version if row.parsed else "-",
                _lease(row),
                _protocol(row),
            )
        )
        for row in rows
    ]


def _shown(cells: tuple[str, ...]) -> tuple[str, ...]:
    """Control characters escaped: a row's text is anyone's input."""
    return tuple(escaped(cell) for cell in cells)


class Watcher:
    """Follows rows between reads, by the engine's observation rule."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._observations = Observations(capacity=1_000_000)
        #: Each followed row's owner and the renewals seen since that owner took it.
        self._held: dict[str, tuple[str, int]] = {}

    def update(self, rows: list[Row], now: float) -> list[tuple[str, ...]]:
        """Record one read; return the watch table's cells."""
        cells: list[tuple[str, ...]] = []
        for row in rows:
            parsed = row.parsed
            if parsed is None:
                state = (
                    _protocol(row) if row.free_fence is not None else f"malformed: {row.problem}"
                )
                cells.append(_shown((row.key, "-", "-", "-", "-", "-", state)))
                self._forget(row.key)
                continue
            first_seen = self._observations.observe((self.table, row.key), parsed.identity, now)
            owner, renewals = self._held.get(row.key, (None, 0))
            if owner != parsed.owner:
                renewals = 0
            elif first_seen == now:  # same owner, new version: a renewal
                renewals += 1
            self._held[row.key] = (parsed.owner, renewals)
            unchanged = now - first_seen
            if unchanged >= parsed.lease_ms / 1000:
                state = "unchanged for a whole lease: a contender may take it over"
            elif renewals:
                state = "held, renewing"
            else:
                state = "held"
            if parsed.fenced:
                state += f" (fenced, token {parsed.fence})"
            cells.append(
                _shown(
                    (
                        row.key,
                        parsed.owner,
                        parsed.version[:8],
                        _lease(row),
                        f"{unchanged:.1f} s",
                        str(renewals),
                        state,
                    )
                )
            )
        # A row no longer read was released (or taken over after a delete): start over.
        for key in self._held.keys() - {row.key for row in rows}:
            self._forget(key)
        return cells

    def _forget(self, key: str) -> None:
        if self._held.pop(key, None) is not None:
            self._observations.forget((self.table, key))


def count_rows(rows: list[Row]) -> str:
    """ "3 lock rows", for a title or a footer."""
    return f"{len(rows)} lock row{'' if len(rows) == 1 else 's'}"


def holder_text(holder: dict[str, Any]) -> str:
    """A row's holder map on one line, for people; a row without one is pydynox's."""
    if not holder:
        return "not named (a pydynox row, or written before dynalease named holders)"
    parts = [f"{holder.get('host', '?')} pid {holder.get('pid', '?')}"]
    if "acquired_at" in holder:
        parts.append(f"since {holder['acquired_at']}")
    function = holder.get("lambda")
    if isinstance(function, dict):
        parts.append(
            f"Lambda {function.get('function')}:{function.get('version', '?')} "
            f"request {function.get('request_id', '?')}"
        )
    if "ecs_task" in holder:
        parts.append(f"ECS task {holder['ecs_task']}")
    elif "platform" in holder:
        parts.append(str(holder["platform"]))
    if "command" in holder:
        parts.append(f"run {holder['command']}")
    if "metadata" in holder:
        parts.append(f"metadata {holder['metadata']}")
    return escaped(", ".join(parts))


#: The columns of ``dynalease ls`` (and the keys of its ``--json`` objects, besides more).
LS_HEADERS = ("key", "kind", "holder", "held for", "lease", "fence")
#: What a row is, by its key's reserved prefix (any other key is a lock's own row).
_KINDS_BY_PREFIX = (
    (PERMIT_PREFIX, "permit"),
    (WRITER_PREFIX, "writer row"),
    (QUEUE_PREFIX, "fair queue"),
    (RESULT_PREFIX, "single-flight result"),
)
#: Rows that are never lock rows: a fair lock's queue and a single-flight result.
_NOT_LOCK_ROWS = ("fair queue", "single-flight result")


def kind_of(row: Row) -> str:
    """What the row is: a lock, a permit, a read/write lock's rows, pydynox's, free..."""
    if row.free_fence is not None:
        return "free (fenced, released)"
    kind = next((name for prefix, name in _KINDS_BY_PREFIX if row.key.startswith(prefix)), "lock")
    if row.parsed is None:
        return kind if kind in _NOT_LOCK_ROWS else "not a lock row"
    if row.parsed.owner == SHARED_OWNER:
        return "read lock"
    if row.parsed.fenced:
        return f"{kind}, fenced"
    return kind if row.holder else f"{kind}, pydynox (no holder)"


def who_holds(row: Row) -> str:
    """The holder column: the holder map on one line, readers, or why it is not a lock row."""
    if row.parsed is None:
        return "-" if kind_of(row) in _NOT_LOCK_ROWS else row.problem or "-"
    if row.parsed.owner == SHARED_OWNER:
        return "readers together (any reader's renewal keeps it)"
    return holder_text(row.holder)


def held_for(row: Row, now: float) -> float | None:
    """Seconds since the holder's ``acquired_at`` (wall clock, for people), if it has one."""
    stamp = row.holder.get("acquired_at")
    if not isinstance(stamp, str):
        return None
    try:
        acquired = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None
    return max(0.0, now - acquired)


def listed(row: Row, now: float) -> dict[str, Any]:
    """One row as ``dynalease ls --json`` gives it."""
    parsed = row.parsed
    return {
        "key": row.key,
        "kind": kind_of(row),
        "owner": parsed.owner if parsed else None,
        "version": parsed.version if parsed else None,
        "lease_s": parsed.lease_ms / 1000 if parsed else None,
        "fence": parsed.fence if parsed else row.free_fence,
        "holder": row.holder,
        "held_for_s": held_for(row, now),
        "problem": row.problem or None,
    }


def ls_cells(rows: list[Row], now: float) -> list[tuple[str, ...]]:
    """Table cells for ``dynalease ls``."""
    cells = []
    for row in rows:
        since = held_for(row, now)
        fence = row.parsed.fence if row.parsed else row.free_fence
        cells.append(
            _shown(
                (
                    row.key,
                    kind_of(row),
                    who_holds(row),
                    "-" if since is None else f"{since:.0f} s",
                    _lease(row),
                    "-" if fence is None else str(fence),
                )
            )
        )
    return cells


def abandoned_rows(first: list[Row], second: list[Row], unchanged_for: float) -> list[Row]:
    """The rows of ``second`` unchanged since ``first`` (same owner, version and lease) for
    longer than their stored lease: ``unchanged_for`` is the time from the end of the first
    read to the start of the second. A renewal writes a new random version, so a row seen
    twice with one identity was not renewed in between: the engine's takeover rule."""
    before = {row.key: row.parsed.identity for row in first if row.parsed is not None}
    return [
        row
        for row in second
        if row.parsed is not None
        and before.get(row.key) == row.parsed.identity
        and unchanged_for > row.parsed.lease_ms / 1000
    ]
