"""Fencing tokens enforced where the write lands: DynamoDB items and SQL rows.

A fenced lock (``fencing=True``) hands its holder ``guard.fencing_token``, an
integer larger than every earlier owner's of the same lock key. The token only
protects a write whose destination checks it: the destination keeps the highest
token it accepted beside the data and refuses a write that carries a lower one.
A holder that paused past its lease (a GC pause, a stopped VM) and resumes
after someone else took the lock over and wrote is then refused instead of
overwriting the newer write.

A token equal to the stored one is accepted: the same holder writing the same
row again. Use one lock key per destination item or row (tokens of different
keys are unrelated).

- `fence_dynamodb_write`: add the check to a ``PutItem`` or ``UpdateItem``
  request for any table (another Region, account or client: writes that cannot
  join the lock's ``check_in`` transaction).
- `fence_dynamodb_delete`: turn a ``DeleteItem`` request into a fenced
  ``PutItem`` that leaves a tombstone (the key, the token and a marker), so that
  the item's fence survives the delete and an older holder stays refused.
- `fenced_update` / `fenced_update_statement`: ``UPDATE ... SET ...,
  fence = :t WHERE ... AND (fence IS NULL OR CAST(fence AS BIGINT) <= :t ...)`` on a
  DB-API connection (sqlite3, psycopg, pg8000 ...), in the driver's parameter style.

For example:

    with SyncDistributedLock(client, table="locks", key="invoice:42", fencing=True) as lease:
        accepted = fenced_update(
            connection, "invoices", set={"status": "paid"}, where={"id": 42},
            token=lease.fencing_token,
        )
        connection.commit()
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "DEFAULT_ATTRIBUTE",
    "TOMBSTONE_ATTRIBUTE",
    "fence_dynamodb_delete",
    "fence_dynamodb_write",
    "fenced_update",
    "fenced_update_statement",
]

#: The attribute (DynamoDB) or column (SQL) that holds the highest accepted token.
DEFAULT_ATTRIBUTE = "fence"

#: The attribute that marks an item as deleted (`fence_dynamodb_delete`):
#: readers treat an item that has it as absent.
TOMBSTONE_ATTRIBUTE = "fence_tombstone"
_NAME = "#dynalease_fence"
_VALUE = ":dynalease_fence"
_TOMBSTONE = "#dynalease_tombstone"
_PLACEHOLDERS = (_NAME, _VALUE, _TOMBSTONE)
_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
#: An update expression's words: placeholders (``#name``, ``:value``) whole, so that
#: ``:set`` or ``#add`` is never taken for a clause keyword.
_WORD = re.compile(r"[#:][\w-]*|\w+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAMSTYLES = ("qmark", "numeric", "named", "format", "pyformat")


def _check_token(token: object) -> int:
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(
            f"token must be an int (a guard's fencing_token), got {type(token).__name__}"
        )
    if token < 1:
        raise ValueError(f"token must be a fencing token (1 or more), got {token!r}")
    return token


def _check_attribute(attribute: object, parameter: str = "attribute") -> str:
    if not isinstance(attribute, str) or not attribute:
        raise ValueError(f"{parameter} must be a non-empty attribute name, got {attribute!r}")
    return attribute


# --- DynamoDB ------------------------------------------------------------------


def fence_dynamodb_write(
    request: Mapping[str, Any],
    token: int,
    *,
    attribute: str = DEFAULT_ATTRIBUTE,
    plain_values: bool = False,
    tombstone: str = TOMBSTONE_ATTRIBUTE,
) -> dict[str, Any]:
    """A copy of a ``put_item`` or ``update_item`` request that only succeeds for ``token``.

    The copy stores ``token`` in ``attribute`` and is conditioned on the stored
    token being absent or at most ``token`` (your own condition, if any, must
    hold too). DynamoDB refuses a stale write with
    ``ConditionalCheckFailedException``; nothing of it is written.
    ``request`` holds the keyword arguments of boto3's low-level client
    (AttributeValues such as ``{"N": "7"}``); pass ``plain_values=True`` for a
    boto3 ``Table`` resource (plain Python values). ``UpdateItem`` requests
    need an ``UpdateExpression`` (not the legacy ``AttributeUpdates``). An
    update also removes ``tombstone``: a write accepted after a fenced delete
    (`fence_dynamodb_delete`) makes the item live again.

    For example:

        request = {"TableName": "orders", "Item": {"id": {"S": "42"}, "state": {"S": "paid"}}}
        dynamodb.put_item(**fence_dynamodb_write(request, lease.fencing_token))
    """
    attribute, tombstone, stored = _checked(token, attribute, tombstone, plain_values)
    if not isinstance(request, Mapping):
        raise TypeError(
            f"request must be a dict of put_item/update_item arguments, got {request!r}"
        )
    fenced = dict(request)
    if "Item" in request:
        if "UpdateExpression" in request:
            raise ValueError("a request has either Item (put_item) or UpdateExpression, not both")
        fenced["Item"] = {**request["Item"], attribute: stored}
        return _conditioned(fenced, attribute, stored)
    if not isinstance(request.get("UpdateExpression"), str):
        raise ValueError(
            "request must be put_item arguments (with Item) or update_item arguments (with "
            "an UpdateExpression); legacy AttributeUpdates are not supported"
        )
    fenced["UpdateExpression"] = _fenced_update_expression(request["UpdateExpression"])
    fenced = _conditioned(fenced, attribute, stored)
    fenced["ExpressionAttributeNames"][_TOMBSTONE] = tombstone
    return fenced


def fence_dynamodb_delete(
    request: Mapping[str, Any],
    token: int,
    *,
    attribute: str = DEFAULT_ATTRIBUTE,
    plain_values: bool = False,
    tombstone: str = TOMBSTONE_ATTRIBUTE,
) -> dict[str, Any]:
    """``put_item`` arguments that delete the item of a ``delete_item`` request, fenced.

    A plain ``DeleteItem`` would take the stored token with the item, and the
    next write of an older holder would find no token and be accepted. The
    returned ``PutItem`` instead replaces the item with a **tombstone**: its
    key, ``token`` in ``attribute`` and ``tombstone`` set to true, conditioned
    like `fence_dynamodb_write` (and on your own condition, if any).
    Afterwards a write with an older token is refused and a write with this
    token or a newer one is accepted (and makes the item live again). Readers
    treat an item that has ``tombstone`` as absent; never delete a tombstone
    while an older holder may still write.

    For example:

        request = {"TableName": "orders", "Key": {"id": {"S": "42"}}}
        dynamodb.put_item(**fence_dynamodb_delete(request, lease.fencing_token))
    """
    attribute, tombstone, stored = _checked(token, attribute, tombstone, plain_values)
    if not isinstance(request, Mapping) or not isinstance(request.get("Key"), Mapping):
        raise TypeError(
            f"request must be a dict of delete_item arguments (with a Key), got {request!r}"
        )
    legacy = {"Item", "UpdateExpression", "AttributeUpdates", "Expected"} & set(request)
    if legacy:
        raise ValueError(
            f"request must be delete_item arguments; it has {', '.join(sorted(legacy))}"
        )
    if request.get("ReturnValues") not in (None, "NONE", "ALL_OLD"):
        raise ValueError("ReturnValues of a fenced delete must be NONE or ALL_OLD")
    fenced = {name: value for name, value in request.items() if name != "Key"}
    fenced["Item"] = {
        **request["Key"],
        attribute: stored,
        tombstone: True if plain_values else {"BOOL": True},
    }
    return _conditioned(fenced, attribute, stored)


def _checked(
    token: object, attribute: object, tombstone: object, plain_values: bool
) -> tuple[str, str, Any]:
    """The checked attribute names and the token as stored (an AttributeValue unless plain)."""
    checked = _check_token(token)
    stored = checked if plain_values else {"N": str(checked)}
    return _check_attribute(attribute), _check_attribute(tombstone, "tombstone"), stored


def _conditioned(request: dict[str, Any], attribute: str, stored: Any) -> dict[str, Any]:
    """``request`` also conditioned on the stored token being absent or at most ``stored``."""
    names = dict(request.get("ExpressionAttributeNames") or {})
    values = dict(request.get("ExpressionAttributeValues") or {})
    if any(name in names for name in _PLACEHOLDERS) or _VALUE in values:
        raise ValueError(
            f"the request already uses {_NAME}, {_TOMBSTONE} or {_VALUE}; rename yours"
        )
    own = request.get("ConditionExpression")
    if own is not None and not isinstance(own, str):
        raise TypeError(
            "ConditionExpression must be a string here (not a boto3 Attr/Key condition)"
        )
    names[_NAME] = attribute
    values[_VALUE] = stored
    check = f"(attribute_not_exists({_NAME}) OR {_NAME} <= {_VALUE})"
    request["ConditionExpression"] = f"({own}) AND {check}" if own else check
    request["ExpressionAttributeNames"] = names
    request["ExpressionAttributeValues"] = values
    return request


def _fenced_update_expression(expression: str) -> str:
    """``expression`` that also sets the token and removes the tombstone marker."""
    keywords = [
        (match.start(), match.group().upper())
        for match in _WORD.finditer(expression)
        if match.group().upper() in _CLAUSES
    ]
    if not keywords or expression[: keywords[0][0]].strip():
        raise ValueError(
            f"UpdateExpression must start with SET, REMOVE, ADD or DELETE: {expression!r}"
        )
    ends = [start for start, _ in keywords[1:]] + [len(expression)]
    additions = {"SET": f"{_NAME} = {_VALUE}", "REMOVE": _TOMBSTONE}
    clauses = []
    for (start, keyword), end in zip(keywords, ends, strict=True):
        clause = expression[start:end].strip()
        if keyword in additions:
            clause = f"{clause}, {additions.pop(keyword)}"
        clauses.append(clause)
    first = [f"SET {additions.pop('SET')}"] if "SET" in additions else []
    last = [f"REMOVE {additions.pop('REMOVE')}"] if "REMOVE" in additions else []
    return " ".join([*first, *clauses, *last])


# --- SQL -------------------------------------------------------------------------


class Connection(Protocol):
    """A DB-API 2.0 connection (PEP 249): what `fenced_update` uses of it."""

    def cursor(self) -> Any:
        """A new cursor."""
        ...


def _quote(name: object, what: str) -> str:
    if not isinstance(name, str) or not all(_IDENTIFIER.fullmatch(p) for p in name.split(".")):
        raise ValueError(
            f"{what} {name!r} must be a plain SQL identifier (letters, digits, '_'; "
            "'schema.table' for a table); it is quoted, never interpolated raw"
        )
    return ".".join(f'"{part}"' for part in name.split("."))


def _paramstyle(connection: object, paramstyle: str | None) -> str:
    if paramstyle is None:
        module = sys.modules.get(type(connection).__module__.partition(".")[0])
        paramstyle = getattr(module, "paramstyle", None)
        if paramstyle is None:
            raise ValueError(
                f"cannot tell the parameter style of {type(connection).__module__} "
                "connections: pass paramstyle= (one of " + ", ".join(_PARAMSTYLES) + ")"
            )
    return paramstyle  # fenced_update_statement checks it


def fenced_update_statement(
    table: str,
    *,
    set: Mapping[str, Any],
    where: Mapping[str, Any],
    token: int,
    fence_column: str = DEFAULT_ATTRIBUTE,
    paramstyle: str = "qmark",
) -> tuple[str, Sequence[Any] | dict[str, Any]]:
    """The fenced ``UPDATE`` and its parameters, for ``cursor.execute(*statement)``.

    ``UPDATE "t" SET "a" = ?, "fence" = ? WHERE "id" = ? AND ("fence" IS NULL OR
    (CAST("fence" AS BIGINT) <= ? AND ...))``: the row takes the write and the token
    only if the token stored there is absent or not higher. The stored token is
    compared as a number even in a text column (make it INTEGER or BIGINT); a stored
    value that is not a whole number written plainly (``'junk'``, ``'12ab'``, ``''``)
    refuses every token. Names are quoted identifiers; values are always parameters.

    For example:

        >>> sql, values = fenced_update_statement(
        ...     "jobs", set={"state": "done"}, where={"id": 7}, token=3
        ... )
        >>> print(sql.replace(" WHERE", "\\n WHERE").replace(" AND C", "\\n   AND C"))
        UPDATE "jobs" SET "state" = ?, "fence" = ?
         WHERE "id" = ? AND ("fence" IS NULL OR (CAST("fence" AS BIGINT) <= ?
           AND CAST(CAST("fence" AS BIGINT) AS TEXT) = CAST("fence" AS TEXT)))
        >>> values
        ['done', 3, 7, 3]
    """
    token = _check_token(token)
    if paramstyle not in _PARAMSTYLES:
        raise ValueError(f"paramstyle must be one of {', '.join(_PARAMSTYLES)}, got {paramstyle!r}")
    if not set:
        raise ValueError("set must name at least one column to write")
    if not where:
        raise ValueError(
            "where must name the row (e.g. where={'id': 42}); a fenced update is per row"
        )
    fence = _quote(fence_column, "fence_column")
    if any(_quote(column, "column") == fence for column in set):
        raise ValueError(f"set must not write {fence_column!r}: the helper stores the token there")
    values: list[Any] = []

    def marker(value: Any) -> str:
        values.append(value)
        number = len(values)
        return {
            "qmark": "?",
            "numeric": f":{number}",
            "named": f":p{number}",
            "format": "%s",
            "pyformat": f"%(p{number})s",
        }[paramstyle]

    assignments = [f"{_quote(column, 'column')} = {marker(value)}" for column, value in set.items()]
    assignments.append(f"{fence} = {marker(token)}")
    conditions = [
        f"{_quote(column, 'column')} = {marker(value)}" for column, value in where.items()
    ]
    # Compared as a number whatever the column's type: as text, '10' <= '9'. A stored value
    # that is not a whole number refuses every token: SQLite casts 'junk' to 0 and '12ab'
    # to 12 (PostgreSQL raises), so the number must read back as the very text stored.
    number = f"CAST({fence} AS BIGINT)"
    conditions.append(
        f"({fence} IS NULL OR ({number} <= {marker(token)} "
        f"AND CAST({number} AS TEXT) = CAST({fence} AS TEXT)))"
    )
    sql = (
        f"UPDATE {_quote(table, 'table')} SET {', '.join(assignments)} "
        f"WHERE {' AND '.join(conditions)}"
    )
    if paramstyle in ("named", "pyformat"):
        return sql, {f"p{n}": value for n, value in enumerate(values, start=1)}
    return sql, values


def fenced_update(
    connection: Connection,
    table: str,
    *,
    set: Mapping[str, Any],
    where: Mapping[str, Any],
    token: int,
    fence_column: str = DEFAULT_ATTRIBUTE,
    paramstyle: str | None = None,
) -> bool:
    """Run `fenced_update_statement` on a DB-API connection; True if the row took it.

    False means nothing was written: the row holds a higher token (a newer
    owner wrote; stop, your lock is gone) or no row matches ``where`` (insert
    rows first, with the fence column NULL). The update joins the connection's
    current transaction: commit it (or use the connection as a context
    manager). The parameter style is the driver module's ``paramstyle``
    (sqlite3: qmark; psycopg: pyformat; pg8000: format) unless given.
    """
    style = _paramstyle(connection, paramstyle)
    sql, parameters = fenced_update_statement(
        table, set=set, where=where, token=token, fence_column=fence_column, paramstyle=style
    )
    cursor = connection.cursor()
    try:
        cursor.execute(sql, parameters)
        return bool(cursor.rowcount and cursor.rowcount > 0)
    finally:
        cursor.close()
