"""The extension's release of one dead writer's row: a lock row of that owner, and nothing else.

A journal entry is only a claim, so each request is conditioned on the owner *and* on the
row's protocol attributes; an entry whose ``fencing`` contradicts the row is not genuine,
and the row (with its fence counter) is left as it is.
"""

from __future__ import annotations

import enum
from typing import Any

from .._engine.protocol import (
    FENCE_ATTR,
    FENCED_PROTOCOL,
    LEASE_ATTR,
    OWNER_ATTR,
    PROTOCOL,
    PROTOCOL_ATTR,
    VERSION_ATTR,
)
from .._engine.shapes import release_request
from .._engine.store import ConditionFailed, Request

__all__ = ["Result", "release"]

#: What the engine's release condition (the owner) gains here: the row is a live lock row
#: of the entry's protocol, a fenced one with its counter, an unfenced one without.
_LOCK_ROW = " AND #p = :p AND attribute_exists(#v) AND attribute_exists(#l)"
_NAMES = {"#p": PROTOCOL_ATTR, "#v": VERSION_ATTR, "#l": LEASE_ATTR, "#f": FENCE_ATTR}


class Result(enum.Enum):
    """How one release ended."""

    RELEASED = "released"
    #: Gone, someone else's, or not a lock row at all.
    NOT_OURS = "not ours"
    #: The entry's owner, but a row of the other protocol (or not a lock row): left alone.
    CONTRADICTED = "contradicted"


async def release(transport: Any, table: str, key: str, owner: str, *, fenced: bool) -> Result:
    """Release ``owner``'s lock row (and only a lock row) as the entry names; how it ended."""
    operation, params = release_request(table, key, owner, fenced)
    fence = " AND attribute_exists(#f)" if fenced else " AND attribute_not_exists(#f)"
    params["ConditionExpression"] += _LOCK_ROW + fence
    params["ExpressionAttributeNames"] |= _NAMES
    params["ExpressionAttributeValues"][":p"] = {"N": str(FENCED_PROTOCOL if fenced else PROTOCOL)}
    try:
        await transport.handle_async(Request(operation, params))
    except ConditionFailed as failed:
        item = failed.item or {}
        if item.get(OWNER_ATTR) == {"S": owner}:
            return Result.CONTRADICTED
        return Result.NOT_OURS
    return Result.RELEASED
