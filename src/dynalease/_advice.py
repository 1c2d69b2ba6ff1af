"""What a lock's DynamoDB error says the user should do: the lock, the table, where to look.

DynamoDB's own messages name neither the lock nor where the request went; a guard
re-words the error it raises (same class, code and flags) with :func:`explain`.
"""

from __future__ import annotations

import copy

from ._redact import logged_key
from .exceptions import DynamoDBError, TableNotFoundError, ValidationError

__all__ = ["explain"]

_SCHEMA_HINT = (
    "lock tables need a partition key named 'key' of type S and no sort key; "
    "check the table with `dynalease doctor --table {table}`"
)


def explain(
    error: DynamoDBError, *, key: str, table: str, region: str | None, endpoint: str | None
) -> DynamoDBError:
    """The same error, saying which lock it concerns and what to check or do."""
    explained = copy.copy(error)  # same class, code, operation and flags
    if isinstance(error, TableNotFoundError):
        explained.args = (f"lock {logged_key(key)}: {_missing_table(table, region, endpoint)}",)
        return explained
    hint = f" ({_SCHEMA_HINT.format(table=table)})" if isinstance(error, ValidationError) else ""
    explained.args = (f"lock {logged_key(key)} in table {table!r}: {error}{hint}",)
    return explained


def _missing_table(table: str, region: str | None, endpoint: str | None) -> str:
    where = f"Region {region!r} at " + (endpoint or "AWS's endpoint for that Region")
    doctor = f"dynalease doctor --table {table} --region {region}"
    doctor += f" --endpoint {endpoint}" if endpoint else ""
    return (
        f"table {table!r} does not exist in {where}. If it exists elsewhere, the "
        f"Region or endpoint is wrong (`{doctor}` checks where requests go); if not, "
        f"create it first, e.g. client.sync_create_table({table!r}, "
        "partition_key=('key', 'S'), wait=True)"
    )
