"""What a lock's DynamoDB error says the user should do: the lock, the table, where to look.

DynamoDB's own messages name neither the lock nor where the request went; a guard
re-words the error it raises (same class, code and flags) with :func:`explain`; the
command-line tools name where requests went with :func:`where` too.
"""

from __future__ import annotations

import copy

from ._redact import logged_key, shown_url
from ._transport.config import regional_endpoint
from .exceptions import DynamoDBError, TableNotFoundError, ValidationError

__all__ = ["explain", "where"]

_SCHEMA_HINT = (
    "lock tables need a partition key named 'key' of type S and no sort key; "
    "check the table with `dynalease doctor --table {table}`"
)


def explain(
    error: DynamoDBError, *, key: str, table: str, region: str | None, endpoint: str | None
) -> DynamoDBError:
    """The same error, saying which lock it concerns and what to check or do.

    ``endpoint``: the endpoint given or configured (None: AWS's for the Region). A
    missing table's error keeps ``table``, ``region`` and ``endpoint`` as attributes.
    """
    explained = copy.copy(error)  # same class, code, operation and flags
    if isinstance(explained, TableNotFoundError):
        explained.args = (f"lock {logged_key(key)}: {_missing_table(table, region, endpoint)}",)
        explained.table, explained.region, explained.endpoint = table, region, endpoint
        return explained
    hint = f" ({_SCHEMA_HINT.format(table=table)})" if isinstance(error, ValidationError) else ""
    explained.args = (f"lock {logged_key(key)} in table {table!r}: {error}{hint}",)
    return explained


def where(region: str | None, endpoint: str | None) -> str:
    """``Region 'us-east-1' at URL``: the endpoint given or configured, else the Region's."""
    shown = (
        (endpoint and shown_url(endpoint))
        or (region and regional_endpoint(region))
        or "AWS's endpoint for that Region"
    )
    return f"Region {region!r} at {shown}"


def doctor_command(table: str, region: str | None, endpoint: str | None) -> str:
    """The ``dynalease doctor`` line that checks the same table where requests went."""
    command = f"dynalease doctor --table {table}"
    command += f" --region {region}" if region else ""
    return command + (f" --endpoint {shown_url(endpoint)}" if endpoint else "")


def _missing_table(table: str, region: str | None, endpoint: str | None) -> str:
    return (
        f"table {table!r} does not exist in {where(region, endpoint)}. If it exists elsewhere, "
        f"the Region or endpoint is wrong (`{doctor_command(table, region, endpoint)}` checks "
        f"where requests go); if not, create it first, e.g. client.sync_create_table({table!r}, "
        "partition_key=('key', 'S'), wait=True)"
    )
