"""Read/write locks' rows, their requests and the reader's decision (no I/O, no clock).

A key ``K`` has two rows (docs/locks.md, "Read/write locks"):

- the main row at ``K``, an ordinary protocol-1 lock row. A writer (or pydynox) holds it
  alone; readers hold it together: its owner is :data:`SHARED_OWNER` and its ``readers``
  string set names every reader in. Any reader's renewal changes its version, so it
  stays live while one reader renews, and goes stale by observation (one stored lease
  unchanged) once none does, like any abandoned row.
- the writer row at :func:`writer_key`, a fenced (protocol-2) lock row that a writer
  holds from the moment it starts waiting until it releases. Its counter is the
  writers' fencing token. A reader joins only while that row is absent or free, so a
  waiting writer stops new readers (writer preference); readers already in finish.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .protocol import (
    FENCED_PROTOCOL,
    KEY_ATTR,
    LEASE_ATTR,
    OWNER_ATTR,
    PROTOCOL,
    PROTOCOL_ATTR,
    VERSION_ATTR,
    LockRow,
)

__all__ = [
    "READERS_ATTR",
    "SHARED_OWNER",
    "WRITER_PREFIX",
    "FreeWriter",
    "Join",
    "Joined",
    "Wait",
    "choose",
    "drop_params",
    "join_actions",
    "leave_params",
    "renew_params",
    "writer_key",
]

#: The owner of a main row that readers hold together.
SHARED_OWNER = "dynalease-readers"
#: The main row's string set of the readers in (their owner tokens).
READERS_ATTR = "readers"
#: The writer row's key prefix.
WRITER_PREFIX = "dynalease-writer:"

Item = dict[str, Any]

_NAMES = {
    "#k": KEY_ATTR,
    "#o": OWNER_ATTR,
    "#v": VERSION_ATTR,
    "#l": LEASE_ATTR,
    "#p": PROTOCOL_ATTR,
    "#r": READERS_ATTR,
}


def writer_key(key: str) -> str:
    """The writer row of ``key``."""
    return f"{WRITER_PREFIX}{key}"


# --- decisions ------------------------------------------------------------------


class Joined(NamedTuple):
    """An earlier join of ours landed: we are in."""


class Join(NamedTuple):
    """Join the readers: on no main row or a live shared one (``observed`` None), or over
    the ``observed`` stale row (whoever held it), starting a new reader set."""

    observed: LockRow | None = None


class FreeWriter(NamedTuple):
    """Free the ``observed`` writer row, unchanged for its stored lease: its writer died
    waiting or holding (the counter stays, as a fenced release leaves it)."""

    observed: LockRow


class Wait(NamedTuple):
    """A live writer waits or holds (``writer``), or another owner holds the main row."""

    writer: bool


Choice = Joined | Join | FreeWriter | Wait


def choose(
    me: str,
    main: LockRow | None,
    readers: frozenset[str],
    main_stale: bool,
    writer: LockRow | None,
    writer_stale: bool,
) -> Choice:
    """What a reader does after reading both rows.

    ``main`` is the main row (None when absent), ``readers`` its reader set; ``writer``
    the writer row (None when absent or free). The ``*_stale`` flags say whether each
    row stayed unchanged for its stored lease in this client's observation.
    """
    if main is not None and main.owner == SHARED_OWNER and me in readers:
        return Joined()
    if writer is not None:
        return FreeWriter(writer) if writer_stale else Wait(writer=True)
    if main is None or (main.owner == SHARED_OWNER and not main_stale):
        return Join()
    return Join(main) if main_stale else Wait(writer=False)


# --- requests -------------------------------------------------------------------


def join_actions(
    table: str, key: str, me: str, version: str, lease_ms: int, observed: LockRow | None
) -> list[Item]:
    """The ``TransactWriteItems`` entries of a join: the main row's update, and the check
    that no writer waits or holds."""
    values: dict[str, Any] = {
        ":shared": {"S": SHARED_OWNER},
        ":v": {"S": version},
        ":l": {"N": str(lease_ms)},
        ":p": {"N": str(PROTOCOL)},
        ":me": {"SS": [me]},
    }
    if observed is None:
        update = "SET #o = :shared, #v = :v, #l = :l, #p = :p ADD #r :me"
        condition = "attribute_not_exists(#k) OR #o = :shared"
    else:
        update = "SET #o = :shared, #v = :v, #l = :l, #p = :p, #r = :me"
        condition = "#o = :oo AND #v = :ov"
        values[":oo"] = {"S": observed.owner}
        values[":ov"] = {"S": observed.version}
    main = _update_action(table, key, update, condition, values)
    check = {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": writer_key(key)}},
        "ConditionExpression": "attribute_not_exists(#o)",
        "ExpressionAttributeNames": {"#o": OWNER_ATTR},
    }
    return [{"Update": main}, {"ConditionCheck": check}]


def renew_params(table: str, key: str, me: str, version: str, lease_ms: int) -> Item:
    """A reader's renewal: a new version on the main row, while we are still among its readers."""
    update = "SET #v = :v, #l = :l"
    condition = "#o = :shared AND contains(#r, :me)"
    return _update(
        table,
        key,
        update,
        condition,
        {
            ":shared": {"S": SHARED_OWNER},
            ":me": {"S": me},
            ":v": {"S": version},
            ":l": {"N": str(lease_ms)},
        },
    )


def leave_params(table: str, key: str, me: str) -> Item:
    """A reader's leaving: out of the reader set (DynamoDB drops the set when it empties);
    the answer shows the row after it, so the last reader knows to delete it."""
    params = _update(
        table,
        key,
        "DELETE #r :mine",
        "#o = :shared AND contains(#r, :me)",
        {":shared": {"S": SHARED_OWNER}, ":me": {"S": me}, ":mine": {"SS": [me]}},
    )
    params["ReturnValues"] = "ALL_NEW"
    return params


def drop_params(table: str, key: str) -> Item:
    """The last reader's delete of the main row: only while still shared and empty (a reader
    who joined meanwhile keeps it)."""
    condition = "#o = :shared AND attribute_not_exists(#r)"
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "ConditionExpression": condition,
        "ExpressionAttributeNames": _names(condition),
        "ExpressionAttributeValues": {":shared": {"S": SHARED_OWNER}},
        "ReturnConsumedCapacity": "TOTAL",
    }


def free_writer_params(table: str, observed: LockRow) -> Item:
    """Free an abandoned writer row (as its writer's fenced release would): counter kept."""
    return _update(
        table,
        observed.key,
        "REMOVE #o, #v, #l",
        "#o = :oo AND #v = :ov AND #p = :fenced",
        {
            ":oo": {"S": observed.owner},
            ":ov": {"S": observed.version},
            ":fenced": {"N": str(FENCED_PROTOCOL)},
        },
    )


def readers_of(item: Item | None) -> frozenset[str]:
    """The reader set of a main row (empty when it has none)."""
    found = (item or {}).get(READERS_ATTR)
    if isinstance(found, dict) and isinstance(found.get("SS"), list):
        return frozenset(str(each) for each in found["SS"])
    return frozenset()


def _update(table: str, key: str, update: str, condition: str, values: dict[str, Any]) -> Item:
    """An ``UpdateItem`` request: the action, with its consumed capacity asked for."""
    action = _update_action(table, key, update, condition, values)
    return {**action, "ReturnConsumedCapacity": "TOTAL"}


def _update_action(
    table: str, key: str, update: str, condition: str, values: dict[str, Any]
) -> Item:
    """One conditional update of ``key``'s row, as a request or a transaction's entry."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": _names(update + condition),
        "ExpressionAttributeValues": values,
    }


def _names(expressions: str) -> dict[str, str]:
    """The attribute names the expressions use (DynamoDB refuses unused ones)."""
    return {name: value for name, value in _NAMES.items() if name in expressions}
