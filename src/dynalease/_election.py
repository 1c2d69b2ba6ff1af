"""What an election's faces share: the leader as its row shows it, and an observer's view.

The leader's row is a fenced lock row (protocol 2) at the election's name; the term
is its fencing counter. What a leader publishes lives in one extra map attribute,
``leader_value``, which names the term it was written in: renewals and takeovers do
not touch it, so a reader shows it only while that term leads (a new leader's row
still carries its predecessor's map until the new leader writes its own).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ._engine.protocol import FENCE_ATTR, FENCED_PROTOCOL, KEY_ATTR, OWNER_ATTR, parse_row
from ._engine.store import ConditionFailed, Request
from .client import DynamoDBClient
from .exceptions import LockLost

__all__ = ["VALUE_ATTR", "Leader", "Sightings", "leader_of", "publish", "read_leader_item"]

#: The map attribute a leader publishes in: ``{"term": N, "since": ms, "value": S}``.
VALUE_ATTR = "leader_value"
#: A published value is kept small: every renewal rewrites the row, and DynamoDB
#: charges a write by the item's size (1 WCU up to 1 KB).
MAX_VALUE_CHARS = 512


@dataclass(frozen=True)
class Leader:
    """The current leader of an election, as its row shows it.

    ``term`` is the leader's fencing token (larger for every later leader);
    ``since`` the wall time (seconds since the epoch) its term began and ``value``
    what it published, both None until the leader wrote them (a moment after it won).
    """

    #: The leading candidate's owner token (a UUID4), as in its lock row.
    owner: str
    #: The leader's term: its fencing token, strictly increasing across leaders.
    term: int
    #: When this term began (``time.time()`` on the leader), or None before it said so.
    since: float | None
    #: The value the leader published (an address, a host name), or None.
    value: str | None
    #: The lease the leader holds, in seconds (failover takes about this long after a crash).
    lease_duration: float


def check_value(value: object) -> str | None:
    """A value to publish: a str of at most ``MAX_VALUE_CHARS`` characters, or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(
            f"value must be a str (an address, a host name) or None, got {type(value).__name__}; "
            "encode anything else, as JSON for example"
        )
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(
            f"value has {len(value)} characters, over the limit of {MAX_VALUE_CHARS}: every "
            "renewal rewrites the leader's row, so publish a pointer (a URL, a key), not data"
        )
    return value


def leader_of(item: dict[str, Any] | None, *, table: str, name: str) -> Leader | None:
    """The leader a row shows, or None when it is absent or free.

    A protocol-1 row (pydynox, a lock without fencing) raises ``FencingMismatch``.
    """
    if item is None or OWNER_ATTR not in item:
        return None
    row = parse_row(item, table=table, key=name, protocol=FENCED_PROTOCOL)
    assert row.fence is not None  # a fenced row always has one
    since: float | None = None
    value: str | None = None
    published = item.get(VALUE_ATTR, {}).get("M", {})
    if published.get("term", {}).get("N") == str(row.fence):
        since_ms = published.get("since", {}).get("N")
        since = None if since_ms is None else int(since_ms) / 1000
        value = published.get("value", {}).get("S")
    return Leader(row.owner, row.fence, since, value, row.lease_ms / 1000)


def read_leader_item(client: DynamoDBClient, table: str, name: str) -> dict[str, Any] | None:
    """The election's row (a strongly consistent read), raw."""
    client._check_process()
    params = {"TableName": table, "Key": {KEY_ATTR: {"S": name}}, "ConsistentRead": True}
    item: dict[str, Any] | None = client._items.handle(Request("GetItem", params)).get("Item")
    return item


def publish(
    client: DynamoDBClient,
    table: str,
    name: str,
    owner: str,
    term: int,
    since: float,
    value: str | None,
) -> None:
    """Write ``value`` to the leader's row, only while ``owner`` leads in ``term``.

    Raises :class:`LockLost` when it does not (nothing is written).
    """
    published: dict[str, Any] = {"term": {"N": str(term)}, "since": {"N": str(round(since * 1000))}}
    if value is not None:
        published["value"] = {"S": value}
    params = {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": name}},
        "UpdateExpression": "SET #p = :p",
        "ConditionExpression": "#o = :o AND #f = :f",
        "ExpressionAttributeNames": {"#p": VALUE_ATTR, "#o": OWNER_ATTR, "#f": FENCE_ATTR},
        "ExpressionAttributeValues": {
            ":p": {"M": published},
            ":o": {"S": owner},
            ":f": {"N": str(term)},
        },
    }
    client._check_process()
    try:
        client._items.handle(Request("UpdateItem", params))
    except ConditionFailed:
        raise LockLost(
            f"election {name!r} in table {table!r}: term {term} no longer leads, so its value "
            "was not published; campaign again to lead",
            table=table,
            key=name,
            owner=owner,
        ) from None


class Sightings:
    """An observer's view: the row's leader, or None once its row went unchanged for a lease.

    A crashed leader's row stays until a candidate takes it over; an observer that saw
    it unchanged (same owner and version) for the row's whole lease reports no leader,
    as a candidate would take it over then.
    """

    def __init__(self, table: str, name: str) -> None:
        self._table, self._name = table, name
        self._seen: tuple[tuple[str, str], float] | None = None

    def state(self, item: dict[str, Any] | None, now: float | None = None) -> Leader | None:
        """The leader ``item`` shows, read at monotonic time ``now``."""
        now = time.monotonic() if now is None else now
        leader = leader_of(item, table=self._table, name=self._name)
        if leader is None or item is None:
            self._seen = None
            return None
        identity = (leader.owner, item["version"]["S"])
        if self._seen is None or self._seen[0] != identity:
            self._seen = (identity, now)
        if now - self._seen[1] >= leader.lease_duration:
            return None
        return leader
