"""The protocol's requests as DynamoDB parameters, for every transport, and their answers.

The conditions are docs/protocol.md's table; protocol 2's acquire, takeover and
release are docs/fencing.md's (the token is the ``fence`` counter the write
returns, so it costs no extra request).
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from .protocol import (
    FENCE_ATTR,
    FENCED_PROTOCOL,
    HOLDER_ATTR,
    KEY_ATTR,
    LEASE_ATTR,
    OWNER_ATTR,
    PROTOCOL_ATTR,
    VERSION_ATTR,
    LockRow,
)

Item = dict[str, Any]

_NAMES_KEY = {"#k": KEY_ATTR}
_NAMES_OWNER = {"#o": OWNER_ATTR}
_NAMES_OWNER_VERSION = {"#o": OWNER_ATTR, "#v": VERSION_ATTR}


class Reply(NamedTuple):
    """A store answer: the item read or returned (if any) and the capacity it reported."""

    item: Item | None
    capacity: float
    items: Mapping[str, Item] = MappingProxyType({})
    unprocessed: tuple[str, ...] = ()
    request_id: str | None = None


def _capacity(response: dict[str, Any]) -> float:
    consumed = response.get("ConsumedCapacity")
    if isinstance(consumed, list):  # BatchGetItem: one entry per table
        return sum(_units(entry) for entry in consumed)
    return _units(consumed)


def _units(consumed: object) -> float:
    if isinstance(consumed, dict):
        units = consumed.get("CapacityUnits")
        if isinstance(units, (int, float)):
            return float(units)
    return 0.0


def request_id_of(response: dict[str, Any]) -> str | None:
    """The AWS request id botocore (and the lean path) put in ``ResponseMetadata``."""
    metadata = response.get("ResponseMetadata")
    found = metadata.get("RequestId") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) and found else None


def write_reply(response: dict[str, Any]) -> Reply:
    """The reply to a write: only fenced writes ask for attributes back (the new counter)."""
    units = _units(response.get("ConsumedCapacity"))
    return Reply(response.get("Attributes"), units, request_id=request_id_of(response))


def reply_of(operation: str, response: dict[str, Any]) -> Reply:
    if operation == "GetItem":
        return Reply(response.get("Item"), _capacity(response), request_id=request_id_of(response))
    return write_reply(response)


def create_operation(fencing: bool) -> str:
    """The operation a create (or takeover) is: PutItem, or UpdateItem for a fenced row."""
    return "UpdateItem" if fencing else "PutItem"


def release_operation(fencing: bool) -> str:
    """The operation a release is: DeleteItem, or UpdateItem leaving a free fenced row."""
    return "UpdateItem" if fencing else "DeleteItem"


def write_request(
    table: str, row: LockRow, observed: LockRow | None = None
) -> tuple[str, dict[str, Any]]:
    """The operation and parameters of writing ``row`` (protocol 1 or 2): a create when
    ``observed`` is None, else a takeover of the observed live row."""
    if row.fenced:
        return "UpdateItem", _fenced_write_params(table, row, observed)
    if observed is None:
        condition, names = "attribute_not_exists(#k)", _NAMES_KEY
    else:
        condition, names = "#o = :o AND #v = :v", _NAMES_OWNER_VERSION
    params: dict[str, Any] = {
        "TableName": table,
        "Item": row.to_item(),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": dict(names),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }
    if observed is not None:
        params["ExpressionAttributeValues"] = {
            ":o": {"S": observed.owner},
            ":v": {"S": observed.version},
        }
    return "PutItem", params


def release_request(table: str, key: str, owner: str, fencing: bool) -> tuple[str, dict[str, Any]]:
    """The operation and parameters of a release by ``owner``."""
    if fencing:
        return "UpdateItem", _fenced_release_params(table, key, owner)
    return "DeleteItem", _delete_params(table, key, owner)


def read_params(table: str, key: str) -> dict[str, Any]:
    """The strongly consistent ``GetItem`` of the lock row."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "ConsistentRead": True,
        "ReturnConsumedCapacity": "TOTAL",
    }


def renew_params(
    table: str, key: str, owner: str, current: str, new: str, holder: Item | None = None
) -> dict[str, Any]:
    """The ``UpdateItem`` that replaces our version with ``new`` if owner and version are ours
    (and sets the ``holder`` map when it changed)."""
    params: dict[str, Any] = {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "UpdateExpression": "SET #v = :new",
        "ConditionExpression": "#o = :o AND #v = :v",
        "ExpressionAttributeNames": dict(_NAMES_OWNER_VERSION),
        "ExpressionAttributeValues": {":o": {"S": owner}, ":v": {"S": current}, ":new": {"S": new}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }
    if holder is not None:
        params["UpdateExpression"] += ", #h = :h"
        params["ExpressionAttributeNames"]["#h"] = HOLDER_ATTR
        params["ExpressionAttributeValues"][":h"] = holder
    return params


def condition_item(table: str, key: str, owner: str) -> dict[str, Any]:
    """The TransactWriteItems entry that holds only while ``owner`` owns the row."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {KEY_ATTR: {"S": key}},
            "ConditionExpression": "#o = :o",
            "ExpressionAttributeNames": dict(_NAMES_OWNER),
            "ExpressionAttributeValues": {":o": {"S": owner}},
        }
    }


def batch_get_params(table: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The strongly consistent ``BatchGetItem`` of ``keys`` (1..100 distinct keys)."""
    return {
        "RequestItems": {
            table: {"Keys": [{KEY_ATTR: {"S": key}} for key in keys], "ConsistentRead": True}
        },
        "ReturnConsumedCapacity": "TOTAL",
    }


def batch_reply(table: str, response: dict[str, Any]) -> Reply:
    """The rows a ``BatchGetItem`` answer found, by key, and the keys it left unread."""
    items: dict[str, Item] = {}
    for item in (response.get("Responses") or {}).get(table) or ():
        key = item.get(KEY_ATTR, {}).get("S") if isinstance(item, dict) else None
        if isinstance(key, str):
            items[key] = item
    left = ((response.get("UnprocessedKeys") or {}).get(table) or {}).get("Keys") or ()
    unprocessed = tuple(
        key["S"]
        for entry in left
        if isinstance(entry, dict)
        and isinstance(key := entry.get(KEY_ATTR), dict)
        and isinstance(key.get("S"), str)
    )
    return Reply(None, _capacity(response), items, unprocessed, request_id_of(response))


def _delete_params(table: str, key: str, owner: str) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "ConditionExpression": "#o = :o",
        "ExpressionAttributeNames": dict(_NAMES_OWNER),
        "ExpressionAttributeValues": {":o": {"S": owner}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


def break_request(table: str, row: LockRow) -> tuple[str, dict[str, Any]]:
    """A force release of exactly ``row`` (its owner and version still there), answering the
    old row: a delete, or for a fenced row the release's update (the counter stays)."""
    params: dict[str, Any] = {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": row.key}},
        "ConditionExpression": "#o = :o AND #v = :v",
        "ExpressionAttributeNames": dict(_NAMES_OWNER_VERSION),
        "ExpressionAttributeValues": {":o": {"S": row.owner}, ":v": {"S": row.version}},
        "ReturnValues": "ALL_OLD",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }
    if not row.fenced:
        return "DeleteItem", params
    params["UpdateExpression"] = RELEASE_UPDATE
    params["ExpressionAttributeNames"].update({"#l": LEASE_ATTR, "#h": HOLDER_ATTR})
    return "UpdateItem", params


# --- protocol 2: the fenced writes --------------------------------------------

ACQUIRE_UPDATE = (
    "SET #o = :owner, #v = :version, #l = :lease, #p = :protocol, #h = :holder ADD #f :one"
)
#: Absent, or free (released: no owner). A live row of either protocol has an owner.
ACQUIRE_CONDITION = "attribute_not_exists(#k) OR attribute_not_exists(#o)"
TAKEOVER_CONDITION = "#o = :o AND #v = :v"
RELEASE_UPDATE = "REMOVE #o, #v, #l, #h"
RELEASE_CONDITION = "#o = :o"

_WRITE_NAMES = {
    "#o": OWNER_ATTR,
    "#v": VERSION_ATTR,
    "#l": LEASE_ATTR,
    "#p": PROTOCOL_ATTR,
    "#f": FENCE_ATTR,
    "#h": HOLDER_ATTR,
}


def _fenced_write_params(table: str, row: LockRow, observed: LockRow | None) -> dict[str, Any]:
    names = dict(_WRITE_NAMES)
    values: dict[str, Any] = {
        ":owner": {"S": row.owner},
        ":version": {"S": row.version},
        ":lease": {"N": str(row.lease_ms)},
        ":protocol": {"N": str(FENCED_PROTOCOL)},
        ":one": {"N": "1"},
        ":holder": {"M": {}} if row.holder is None else row.holder,
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


def _fenced_release_params(table: str, key: str, owner: str) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "UpdateExpression": RELEASE_UPDATE,
        "ConditionExpression": RELEASE_CONDITION,
        "ExpressionAttributeNames": {
            "#o": OWNER_ATTR,
            "#v": VERSION_ATTR,
            "#l": LEASE_ATTR,
            "#h": HOLDER_ATTR,
        },
        "ExpressionAttributeValues": {":o": {"S": owner}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


# --- a multi-key guard's rows, written in one transaction ----------------------


def transact_params(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``TransactWriteItems`` of ``items`` (1..100 actions), reporting its capacity."""
    return {"TransactItems": items, "ReturnConsumedCapacity": "TOTAL"}


def transact_reply(response: dict[str, Any]) -> Reply:
    """A transaction's answer: no item, the capacity of every table it wrote."""
    return Reply(None, _capacity(response))


def put_action(table: str, row: LockRow, observed: LockRow | None) -> dict[str, Any]:
    """The transaction's ``Put`` of ``row``: on no row, or over the ``observed`` one."""
    return {"Put": _action(write_request(table, row, observed)[1])}


def renew_action(
    table: str, key: str, owner: str, current: str, new: str, holder: Item | None = None
) -> dict[str, Any]:
    """The transaction's ``Update`` of one row's version (as :func:`renew_params`)."""
    return {"Update": _action(renew_params(table, key, owner, current, new, holder))}


def delete_action(table: str, key: str, owner: str) -> dict[str, Any]:
    """The transaction's owner-conditional ``Delete`` of one row (as a release's)."""
    return {"Delete": _action(_delete_params(table, key, owner))}


def _action(params: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in params.items() if name != "ReturnConsumedCapacity"}
