"""Fair waiting's queue row, its requests and the waiter's decision (no I/O, no clock).

The queue of key ``K`` is one row at :func:`queue_key` (docs/fairness.md):

- ``q``: the waiters' tokens in arrival order. Arrival is the moment DynamoDB applies a
  waiter's ``list_append`` to this row: one order across machines, no clocks.
- ``b_<token>``: each waiter's beat, a version it replaces every ``lease / 3`` while it
  waits. A waiter whose beat stays unchanged for the lease (in the observer's clock)
  died: the waiter behind it removes its entry, conditioned on that exact beat.

Only the waiter at the head goes for the key's lock row, so fair waiters take the key
in arrival order; it leaves the queue once it holds the key (or gives up).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .protocol import KEY_ATTR

__all__ = [
    "QUEUE_PREFIX",
    "Head",
    "Out",
    "Remove",
    "Wait",
    "choose",
    "join_params",
    "queue_key",
    "queue_of",
]

QUEUE_PREFIX = "dynalease-queue:"
QUEUE_ATTR = "q"
BEAT_PREFIX = "b_"

Item = dict[str, Any]


def queue_key(key: str) -> str:
    """The queue row of ``key``."""
    return f"{QUEUE_PREFIX}{key}"


def beat_attr(token: str) -> str:
    """The attribute holding ``token``'s beat."""
    return f"{BEAT_PREFIX}{token}"


class Head(NamedTuple):
    """First in the queue: go for the key."""


class Wait(NamedTuple):
    """Live waiters are ahead (``ahead`` of them)."""

    ahead: int


class Remove(NamedTuple):
    """The entry at ``at`` (``token``, whose beat stayed ``beat`` for its lease) is dead."""

    at: int
    token: str
    beat: str | None


class Out(NamedTuple):
    """Our entry is not in the queue (removed as dead after our beats stopped landing)."""


Choice = Head | Wait | Remove | Out


def queue_of(item: Item | None) -> tuple[list[str], dict[str, str]]:
    """The tokens in arrival order and their beats, from the queue row."""
    item = item or {}
    found = item.get(QUEUE_ATTR, {}).get("L") or []
    tokens = [entry["S"] for entry in found if isinstance(entry, dict) and "S" in entry]
    beats = {
        name[len(BEAT_PREFIX) :]: value["S"]
        for name, value in item.items()
        if name.startswith(BEAT_PREFIX) and isinstance(value, dict) and "S" in value
    }
    return tokens, beats


def choose(me: str, tokens: list[str], stale: list[bool]) -> Choice:
    """What a waiter does after reading the queue: ``stale[i]`` says whether entry ``i``'s
    beat stayed unchanged for the lease in our observation."""
    if me not in tokens:
        return Out()
    mine = tokens.index(me)
    if mine == 0:
        return Head()
    for index in range(mine):
        if stale[index]:
            return Remove(index, tokens[index], None)
    return Wait(mine)


# --- requests -------------------------------------------------------------------


def join_params(table: str, key: str, me: str, beat: str) -> Item:
    """Append ``me`` to the queue with its first beat; the answer shows the queue after it."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": queue_key(key)}},
        "UpdateExpression": "SET #q = list_append(if_not_exists(#q, :empty), :me), #b = :beat",
        "ExpressionAttributeNames": {"#q": QUEUE_ATTR, "#b": beat_attr(me)},
        "ExpressionAttributeValues": {
            ":empty": {"L": []},
            ":me": {"L": [{"S": me}]},
            ":beat": {"S": beat},
        },
        "ReturnValues": "ALL_NEW",
        "ReturnConsumedCapacity": "TOTAL",
    }


def beat_params(table: str, key: str, me: str, beat: str) -> Item:
    """A new beat, while ``me`` is still queued."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": queue_key(key)}},
        "UpdateExpression": "SET #b = :beat",
        "ConditionExpression": "contains(#q, :me)",
        "ExpressionAttributeNames": {"#q": QUEUE_ATTR, "#b": beat_attr(me)},
        "ExpressionAttributeValues": {":me": {"S": me}, ":beat": {"S": beat}},
        "ReturnConsumedCapacity": "TOTAL",
    }


def remove_params(table: str, key: str, index: int, token: str, beat: str | None) -> Item:
    """Remove the entry at ``index`` if it is still ``token``'s (and, for a dead waiter's,
    its beat is still the ``beat`` observed)."""
    condition = f"#q[{index}] = :token"
    values: dict[str, Any] = {":token": {"S": token}}
    if beat is not None:
        condition += " AND #b = :beat"
        values[":beat"] = {"S": beat}
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": queue_key(key)}},
        "UpdateExpression": f"REMOVE #q[{index}], #b",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#q": QUEUE_ATTR, "#b": beat_attr(token)},
        "ExpressionAttributeValues": values,
        "ReturnConsumedCapacity": "TOTAL",
    }


def as_action(params: Item) -> Item:
    """A join as a ``TransactWriteItems`` entry (a multi-key waiter joins every queue at once)."""
    dropped = ("ReturnValues", "ReturnConsumedCapacity")
    return {"Update": {name: value for name, value in params.items() if name not in dropped}}
