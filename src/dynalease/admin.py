"""Operators' tools for lock rows: `break_lock`, a force release of a stuck holder.

A break deletes only the row it read (its owner and version are the write's condition),
so a holder that renewed in between is never broken. A fenced row is left free with its
counter, so the evicted holder's fenced writes stay refused. Every break is logged as
one warning line on the ``dynalease`` logger: who broke what, and which holder.

Example::

    from dynalease.admin import break_lock

    broken = break_lock(client, table="locks", key="nightly-import")
    print(broken.holder)  # {"host": ..., "pid": ..., "acquired_at": ..., ...}
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ._engine import protocol as p
from ._engine.shapes import break_request
from ._engine.store import ConditionFailed, Request
from ._redact import logged_key
from ._values import from_attribute
from .client import DynamoDBClient
from .exceptions import LockNotBroken, MalformedLockRow
from .keys import validate_key

__all__ = ["BrokenLock", "break_lock", "read_lock_row"]

log = logging.getLogger("dynalease")


@dataclass(frozen=True)
class BrokenLock:
    """What `break_lock` broke: the row's holder as it was when deleted."""

    table: str
    key: str
    owner: str
    version: str
    lease_ms: int
    #: The fencing counter a fenced row keeps (the next holder's token is one more).
    fence: int | None = None
    #: The row's ``holder`` map as plain values (empty for a pydynox row).
    holder: dict[str, Any] = field(default_factory=dict)


def read_lock_row(client: DynamoDBClient, table: str, key: str) -> dict[str, Any] | None:
    """The lock row at ``key`` (AttributeValue form), strongly consistent; None when absent."""
    params = {"TableName": table, "Key": {p.KEY_ATTR: {"S": key}}, "ConsistentRead": True}
    item = client._items.handle(Request("GetItem", params)).get("Item")
    return item if isinstance(item, dict) else None


def holder_of(item: dict[str, Any]) -> dict[str, Any]:
    """A row's ``holder`` map as plain values; empty when it has none (a pydynox row)."""
    value = item.get(p.HOLDER_ATTR)
    if not isinstance(value, dict) or set(value) != {"M"}:
        return {}
    try:
        return dict(from_attribute(value))
    except (ValueError, TypeError, ArithmeticError):
        return {}


def break_lock(
    client: DynamoDBClient,
    *,
    table: str,
    key: str,
    owner: str | None = None,
    version: str | None = None,
) -> BrokenLock:
    """Force-release the lock at ``key``: delete its row if it still shows the holder read.

    With ``owner`` and ``version`` (what a person was shown), only that holder is broken.
    Two requests: a strongly consistent read, then a write conditioned on that row's owner
    and version. Raises `LockNotBroken` when nothing holds
    the key or the row changed. The broken holder is not told: it finds out at its next
    renewal (``LockLost``), so it may run on for up to its lease; fence what it writes.
    """
    p.check_table_name(table)
    validate_key(key)
    if (owner is None) != (version is None):
        raise ValueError("pass both owner and version (the row you were shown), or neither")
    item = read_lock_row(client, table, key)
    row = _held_row(item, table, key)
    if owner is not None and (row.owner, row.version) != (owner, version):
        raise _not_broken(
            "the row changed after it was shown (a renewal, release or takeover)", table, key
        )
    operation, params = break_request(table, row)
    try:
        answer = client._items.handle(Request(operation, params))
    except ConditionFailed:
        raise _not_broken(
            "the holder renewed, released or was taken over between the read and the delete",
            table,
            key,
        ) from None
    old = answer.get("Attributes") or item or {}
    broken = BrokenLock(table, key, row.owner, row.version, row.lease_ms, row.fence, holder_of(old))
    log.warning(
        "dynalease: lock %s in table %r broken by pid %d on %s; it was held by owner %s "
        "(holder %s)%s",
        logged_key(key),
        table,
        os.getpid(),
        os.uname().nodename,
        row.owner,
        broken.holder or "unknown: a pydynox row",
        f"; fence kept at {row.fence}" if row.fence is not None else "",
    )
    return broken


def _held_row(item: dict[str, Any] | None, table: str, key: str) -> p.LockRow:
    if item is None or p.is_free(item):
        raise _not_broken("nothing holds it (no row, or a released fenced row)", table, key)
    fenced = item.get(p.PROTOCOL_ATTR) == {"N": str(p.FENCED_PROTOCOL)}
    try:
        return p.parse_row(
            item, table=table, key=key, protocol=p.FENCED_PROTOCOL if fenced else p.PROTOCOL
        )
    except MalformedLockRow as error:
        raise LockNotBroken(
            f"lock {key!r} in table {table!r} was not broken: its row is not a lock row "
            f"({error.problem}); check who writes it, then delete it with "
            "client.sync_delete_item if nothing depends on it",
            table=table,
            key=key,
        ) from None


def _not_broken(reason: str, table: str, key: str) -> LockNotBroken:
    return LockNotBroken(
        f"lock {key!r} in table {table!r} was not broken: {reason}. Nothing was deleted; "
        "look at the row again (dynalease ls) before breaking it",
        table=table,
        key=key,
    )
