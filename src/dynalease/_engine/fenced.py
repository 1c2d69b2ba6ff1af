"""Protocol 2, fenced rows: the three writes that differ from protocol 1, and the token.

A fenced row carries the protocol-1 attributes with ``protocol`` = 2 and a
counter, ``fence``. Every write that makes a guard the owner ``ADD``s 1 to the
counter in the same conditional ``UpdateItem`` and returns it
(``ReturnValues=UPDATED_NEW``): that number is the guard's fencing token, at no
extra request. Release removes the owner, version and lease but keeps the row,
so the counter survives as a *free row* (key, protocol, fence) for the next
owner. Renewal (``SET version``), the strong read and the ``check_in``
condition are protocol 1's requests unchanged.

| step | request | condition |
|---|---|---|
| acquire | UpdateItem ``SET owner, version, lease_ms, protocol ADD fence 1`` | row absent or free |
| take over | the same UpdateItem | owner and version equal the observed ones |
| release | UpdateItem ``REMOVE owner, version, lease_ms`` | owner equals ours |
"""

from __future__ import annotations

from typing import Any

from .protocol import (
    FENCE_ATTR,
    FENCED_PROTOCOL,
    KEY_ATTR,
    LEASE_ATTR,
    OWNER_ATTR,
    PROTOCOL_ATTR,
    VERSION_ATTR,
    LockRow,
)

#: The operation every fenced write is.
OPERATION = "UpdateItem"
ACQUIRE_UPDATE = "SET #o = :owner, #v = :version, #l = :lease, #p = :protocol ADD #f :one"
#: Absent, or free (released: no owner). A live row of either protocol has an owner.
ACQUIRE_CONDITION = "attribute_not_exists(#k) OR attribute_not_exists(#o)"
TAKEOVER_CONDITION = "#o = :o AND #v = :v"
RELEASE_UPDATE = "REMOVE #o, #v, #l"
RELEASE_CONDITION = "#o = :o"

_WRITE_NAMES = {
    "#o": OWNER_ATTR,
    "#v": VERSION_ATTR,
    "#l": LEASE_ATTR,
    "#p": PROTOCOL_ATTR,
    "#f": FENCE_ATTR,
}


def acquire_params(table: str, row: LockRow, observed: LockRow | None = None) -> dict[str, Any]:
    """Become the owner of ``row.key`` and count one more owner: create (``observed`` None)
    or take over the observed live row."""
    assert row.protocol == FENCED_PROTOCOL
    names = dict(_WRITE_NAMES)
    values: dict[str, Any] = {
        ":owner": {"S": row.owner},
        ":version": {"S": row.version},
        ":lease": {"N": str(row.lease_ms)},
        ":protocol": {"N": str(FENCED_PROTOCOL)},
        ":one": {"N": "1"},
    }
    if observed is None:
        condition = ACQUIRE_CONDITION
        names["#k"] = KEY_ATTR
    else:
        condition = TAKEOVER_CONDITION
        values[":o"] = {"S": observed.owner}
        values[":v"] = {"S": observed.version}
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": row.key}},
        "UpdateExpression": ACQUIRE_UPDATE,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "UPDATED_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


def release_params(table: str, key: str, owner: str) -> dict[str, Any]:
    """Leave a free row (key, protocol, fence) if we still own it."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "UpdateExpression": RELEASE_UPDATE,
        "ConditionExpression": RELEASE_CONDITION,
        "ExpressionAttributeNames": {"#o": OWNER_ATTR, "#v": VERSION_ATTR, "#l": LEASE_ATTR},
        "ExpressionAttributeValues": {":o": {"S": owner}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }
