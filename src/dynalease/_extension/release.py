"""The extension's release of one dead writer's row: a lock row of that owner, and nothing else.

A journal entry is only a claim (any process that can create a file in the
journal directory can write one), so the requests here do not rest on it. Each
is conditioned on the owner *and* on the protocol's own attributes, so an item
that is not a lock row is never touched whatever the entry says:

| request | condition, besides the owner equal to the entry's |
|---|---|
| delete (protocol 1) | ``protocol`` = 1, ``version`` and ``lease_ms`` exist, no ``fence`` |
| free (protocol 2) | ``protocol`` = 2, ``version``, ``lease_ms`` and ``fence`` exist |

The free is the fenced release (``REMOVE owner, version, lease_ms``: the counter
stays), so a row with a fence counter is never deleted. Only the request the
entry's ``fencing`` names is sent: a genuine entry always names its row's
protocol, so an entry that contradicts the row (a fenced row claimed as
unfenced, the crafted entry that used to delete a live fenced row and its
counter) is not genuine, and the row is left exactly as it is.
"""

from __future__ import annotations

import enum
from typing import Any

from .._engine.protocol import (
    FENCE_ATTR,
    FENCED_PROTOCOL,
    KEY_ATTR,
    LEASE_ATTR,
    OWNER_ATTR,
    PROTOCOL,
    PROTOCOL_ATTR,
    VERSION_ATTR,
)
from .._engine.shapes import RELEASE_UPDATE
from .._engine.store import ConditionFailed

__all__ = ["Result", "release"]

_LIVE_ROW = "#o = :o AND #p = :p AND attribute_exists(#v) AND attribute_exists(#l)"
DELETE_CONDITION = _LIVE_ROW + " AND attribute_not_exists(#f)"
FREE_CONDITION = _LIVE_ROW + " AND attribute_exists(#f)"
_NAMES = {
    "#o": OWNER_ATTR,
    "#p": PROTOCOL_ATTR,
    "#v": VERSION_ATTR,
    "#l": LEASE_ATTR,
    "#f": FENCE_ATTR,
}


class Result(enum.Enum):
    """How one release ended."""

    RELEASED = "released"
    #: Gone, someone else's, or not a lock row at all.
    NOT_OURS = "not ours"
    #: The entry's owner, but a row of the other protocol (or not a lock row): left alone.
    CONTRADICTED = "contradicted"


async def release(transport: Any, table: str, key: str, owner: str, *, fenced: bool) -> Result:
    """Release ``owner``'s lock row (and only a lock row) as the entry names; how it ended.

    ``transport`` sends one request (``send(operation, params)``) and raises
    :class:`ConditionFailed` with the stored item when a condition fails.
    """
    params: dict[str, Any] = {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "ConditionExpression": FREE_CONDITION if fenced else DELETE_CONDITION,
        "ExpressionAttributeNames": dict(_NAMES),
        "ExpressionAttributeValues": {
            ":o": {"S": owner},
            ":p": {"N": str(FENCED_PROTOCOL if fenced else PROTOCOL)},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if fenced:
        params["UpdateExpression"] = RELEASE_UPDATE
    try:
        await transport.send("UpdateItem" if fenced else "DeleteItem", params)
    except ConditionFailed as failed:
        item = failed.item or {}
        if item.get(OWNER_ATTR) == {"S": owner}:
            return Result.CONTRADICTED
        return Result.NOT_OURS
    return Result.RELEASED
