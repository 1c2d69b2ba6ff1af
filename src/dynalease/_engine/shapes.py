"""The protocol's requests as DynamoDB parameters, and what their answers say.

Every request a lease sends is built here, for every transport; protocol 2's
own writes are in :mod:`.fenced`.
The conditions are docs/protocol.md's table: create if absent, take over if
the observed owner and version are still there, renew and release if ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from . import fenced
from .protocol import KEY_ATTR, OWNER_ATTR, VERSION_ATTR, LockRow

Item = dict[str, Any]

_NAMES_KEY = {"#k": KEY_ATTR}
_NAMES_OWNER = {"#o": OWNER_ATTR}
_NAMES_OWNER_VERSION = {"#o": OWNER_ATTR, "#v": VERSION_ATTR}


class Reply(NamedTuple):
    """A store answer: the item read or returned (if any) and the capacity it reported.

    A ``BatchGetItem`` answer carries the rows it found by key in ``items`` and
    the keys DynamoDB left unread in ``unprocessed``. (A named tuple: one is made
    per request, and a tuple is the cheapest immutable record to make.)
    """

    item: Item | None
    capacity: float
    items: Mapping[str, Item] = MappingProxyType({})
    unprocessed: tuple[str, ...] = ()
    #: The answer's AWS request id (``x-amzn-RequestId``), when the transport saw one.
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
    # A write's capacity is one entry, never BatchGetItem's list.
    units = _units(response.get("ConsumedCapacity"))
    return Reply(response.get("Attributes"), units, request_id=request_id_of(response))


def reply_of(operation: str, response: dict[str, Any]) -> Reply:
    """The store's reply for a response to ``operation`` (a write's returned attributes)."""
    if operation == "GetItem":
        return Reply(response.get("Item"), _capacity(response), request_id=request_id_of(response))
    return write_reply(response)


def create_operation(fencing: bool) -> str:
    """The operation a create (or takeover) is: PutItem, or UpdateItem for a fenced row."""
    return fenced.OPERATION if fencing else "PutItem"


def release_operation(fencing: bool) -> str:
    """The operation a release is: DeleteItem, or UpdateItem leaving a free fenced row."""
    return fenced.OPERATION if fencing else "DeleteItem"


def write_request(
    table: str, row: LockRow, observed: LockRow | None = None
) -> tuple[str, dict[str, Any]]:
    """The operation and parameters of writing ``row`` (protocol 1 or 2): a create when
    ``observed`` is None, else a takeover of the observed live row."""
    if row.fenced:
        return fenced.OPERATION, fenced.acquire_params(table, row, observed)
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
        return fenced.OPERATION, fenced.release_params(table, key, owner)
    return "DeleteItem", _delete_params(table, key, owner)


def read_params(table: str, key: str) -> dict[str, Any]:
    """The strongly consistent ``GetItem`` of the lock row."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "ConsistentRead": True,
        "ReturnConsumedCapacity": "TOTAL",
    }


def renew_params(table: str, key: str, owner: str, current: str, new: str) -> dict[str, Any]:
    """The ``UpdateItem`` that replaces our version with ``new`` if owner and version are ours."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "UpdateExpression": "SET #v = :new",
        "ConditionExpression": "#o = :o AND #v = :v",
        "ExpressionAttributeNames": dict(_NAMES_OWNER_VERSION),
        "ExpressionAttributeValues": {":o": {"S": owner}, ":v": {"S": current}, ":new": {"S": new}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


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


def renew_action(table: str, key: str, owner: str, current: str, new: str) -> dict[str, Any]:
    """The transaction's ``Update`` of one row's version (as :func:`renew_params`)."""
    return {"Update": _action(renew_params(table, key, owner, current, new))}


def delete_action(table: str, key: str, owner: str) -> dict[str, Any]:
    """The transaction's owner-conditional ``Delete`` of one row (as a release's)."""
    return {"Delete": _action(_delete_params(table, key, owner))}


def _action(params: dict[str, Any]) -> dict[str, Any]:
    """A single-item request's parameters as a transaction's action (no capacity of its own)."""
    return {name: value for name, value in params.items() if name != "ReturnConsumedCapacity"}
