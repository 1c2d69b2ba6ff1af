"""Is this table usable by the lock protocol? Read-only; each problem carries its fix.

The checks follow from the protocol: rows are addressed by a string partition key named
``key`` alone, a row must never vanish on its own (TTL), and every conditional write must
be decided in one place (no eventually consistent replicas: last-writer-wins).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from .._advice import where as where_requests_go
from .._engine.protocol import KEY_ATTR
from .._engine.store import Request
from .._redact import shown_url
from .._results import EXPIRES_ATTRIBUTE as RESULT_EXPIRY_ATTRIBUTE
from ..client import DynamoDBClient
from ..exceptions import (
    AccessDeniedError,
    DynamoDBError,
    RequestFailedError,
    TableNotFoundError,
    ThrottledError,
)
from .local_server import is_loopback

OK = "ok"
PROBLEM = "problem"

#: A key no lock uses, read to prove the credentials can use the table.
PROBE_KEY = "dynalease-doctor-probe"


@dataclass(frozen=True, slots=True)
class Finding:
    status: str
    check: str
    detail: str
    fix: str = ""


def diagnose(client: DynamoDBClient, table: str) -> list[Finding]:
    """Stops early when the table cannot be read at all."""
    endpoint = client._endpoint_in_use
    where = where_requests_go(client.region, endpoint)
    try:
        description = client._items.handle(Request("DescribeTable", {"TableName": table}))["Table"]
    except TableNotFoundError:
        return [
            Finding(
                PROBLEM,
                "table exists",
                f"no table {table!r} in {where}",
                f"{create_table_hint(table, client.region, endpoint)}; check --region, "
                "--endpoint and the account if it should exist",
            )
        ]
    except AccessDeniedError as error:
        return [_denied("describe the table", error, "dynamodb:DescribeTable")]
    except ThrottledError as error:
        return [_throttled("DescribeTable", error)]
    except RequestFailedError as error:
        return [
            Finding(
                PROBLEM,
                "endpoint reachable",
                f"could not reach DynamoDB in {where}: {error.code or error}",
                "check --endpoint / --region, the network path, and that the server is running",
            )
        ]
    findings = [Finding(OK, "table exists", f"{table!r} in {where}")]
    findings += _schema(description)
    findings.append(_status(description))
    findings.append(_replicas(description))
    findings.append(_ttl(client, table))
    if all(f.status == OK for f in findings if f.check in ("partition key", "sort key")):
        findings.append(_probe(client, table))
    return findings


def _denied(action: str, error: DynamoDBError, permission: str) -> Finding:
    return Finding(
        PROBLEM,
        "credentials",
        f"could not {action}: {error.code}",
        f"use credentials (--profile, environment, role) allowed {permission} on the table",
    )


def _schema(description: dict[str, Any]) -> list[Finding]:
    types = {
        d["AttributeName"]: d["AttributeType"] for d in description.get("AttributeDefinitions", [])
    }
    keys = {k["KeyType"]: k["AttributeName"] for k in description["KeySchema"]}
    findings: list[Finding] = []
    recreate = (
        "the key schema cannot be changed: create a new table with partition key 'key' (S) "
        "and no sort key, and point the locks at it"
    )
    partition = keys.get("HASH", "?")
    if partition == KEY_ATTR and types.get(partition) == "S":
        findings.append(Finding(OK, "partition key", "'key' of type S"))
    else:
        findings.append(
            Finding(
                PROBLEM,
                "partition key",
                f"{partition!r} of type {types.get(partition, '?')}; locks need 'key' of type S",
                recreate,
            )
        )
    if "RANGE" in keys:
        findings.append(
            Finding(
                PROBLEM,
                "sort key",
                f"{keys['RANGE']!r}; lock rows are addressed by the partition key alone",
                recreate,
            )
        )
    else:
        findings.append(Finding(OK, "sort key", "none"))
    return findings


def _status(description: dict[str, Any]) -> Finding:
    status = description.get("TableStatus", "?")
    if status in ("ACTIVE", "UPDATING"):
        return Finding(OK, "table status", status)
    return Finding(
        PROBLEM,
        "table status",
        f"{status}; requests fail until the table is ACTIVE",
        "wait for creation to finish (aws dynamodb wait table-exists) or find out why it "
        "is not active",
    )


def _replicas(description: dict[str, Any]) -> Finding:
    regions = [r.get("RegionName", "?") for r in description.get("Replicas") or []]
    if not regions and description.get("GlobalTableVersion"):
        regions = ["(global table)"]
    if not regions:
        return Finding(OK, "global table", "no replicas: every write is decided in one Region")
    if description.get("MultiRegionConsistency") == "STRONG":
        return Finding(
            OK,
            "global table",
            f"replicas in {', '.join(regions)} with multi-Region strong consistency: every "
            "conditional write is decided for all Regions at once (a write that loses to "
            "another Region's is refused with ReplicatedWriteConflictException and resent)",
        )
    return Finding(
        PROBLEM,
        "global table",
        f"replicas in {', '.join(regions)} with multi-Region eventual consistency: a "
        "conditional write is decided by one Region's copy and replicated writes resolve "
        "conflicts by last-writer-wins, so holders in two Regions could both own a lock",
        "send every lock request to one Region's table (the same Region for every caller), "
        "or use a table without replicas or a global table created with multi-Region "
        "strong consistency (docs/lambda.md, global tables)",
    )


def _throttled(action: str, error: ThrottledError) -> Finding:
    reasons = ", ".join(r["reason"] for r in error.reasons) or error.code
    asked = f", AWS request id {error.request_id}" if error.request_id else ""
    return Finding(
        PROBLEM,
        "throttling",
        f"{action} was throttled ({reasons}{asked}); lock requests on this table are throttled too",
        error.advice,
    )


def _ttl(client: DynamoDBClient, table: str) -> Finding:
    try:
        answer = client._items.handle(Request("DescribeTimeToLive", {"TableName": table}))
    except AccessDeniedError as error:
        return _denied("read the TTL setting", error, "dynamodb:DescribeTimeToLive")
    ttl = answer.get("TimeToLiveDescription", {})
    status = ttl.get("TimeToLiveStatus", "DISABLED")
    if status in ("DISABLED", "DISABLING"):
        return Finding(OK, "TTL", status.lower())
    attribute = ttl.get("AttributeName", "?")
    if attribute == RESULT_EXPIRY_ATTRIBUTE:  # lock rows never carry it
        return Finding(OK, "TTL", f"{status.lower()} on {attribute!r} (single-flight results only)")
    return Finding(
        PROBLEM,
        "TTL",
        f"{status.lower()} on attribute {attribute!r}; TTL deletes rows on its own schedule, "
        "and a lock row must only go away by release or takeover (a fenced row's "
        "counter must never go away at all: docs/fencing.md)",
        f"aws dynamodb update-time-to-live --table-name {table} --time-to-live-specification "
        f"Enabled=false,AttributeName={attribute} (or use a dedicated lock table)",
    )


def _probe(client: DynamoDBClient, table: str) -> Finding:
    params = {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": PROBE_KEY}},
        "ConsistentRead": True,
    }
    try:
        client._items.handle(Request("GetItem", params))
    except AccessDeniedError as error:
        return _denied("read a lock row", error, "dynamodb:GetItem (and the lock writes)")
    except ThrottledError as error:
        return _throttled("a strongly consistent GetItem", error)
    except DynamoDBError as error:
        return Finding(
            PROBLEM,
            "lock read",
            f"a strongly consistent GetItem on 'key' failed: {error}",
            "fix the key schema (see above) or the permissions",
        )
    return Finding(OK, "lock read", "a strongly consistent GetItem on 'key' works")


def render(findings: list[Finding]) -> str:
    lines = []
    for finding in findings:
        lines.append(f"{finding.status.upper():<8} {finding.check}: {finding.detail}")
        if finding.fix:
            lines.append(f"         fix: {finding.fix}")
    problems = sum(f.status == PROBLEM for f in findings)
    lines.append(
        "verdict: usable as a dynalease lock table"
        if problems == 0
        else f"verdict: {problems} problem{'s' if problems > 1 else ''} to fix before using "
        "this table for locks"
    )
    return "\n".join(lines)


def create_table_hint(table: str, region: str | None, endpoint: str | None) -> str:
    """How to create a missing lock table from a shell, for where requests went."""
    aws = (
        f"`aws dynamodb create-table --table-name {table} --attribute-definitions "
        "AttributeName=key,AttributeType=S --key-schema AttributeName=key,KeyType=HASH "
        "--billing-mode PAY_PER_REQUEST"
        + (f" --region {region}" if region else "")
        + (f" --endpoint-url {shown_url(endpoint)}" if endpoint else "")
        + "`"
    )
    url = urllib.parse.urlsplit(endpoint or "")
    if url.hostname and is_loopback(url.hostname):
        # Most likely `dynalease local`, whose tables live in memory: a restart makes it.
        port = f" --port {url.port}" if url.port else ""
        return (
            f"if it is `dynalease local`, restart it as `dynalease local{port} --table {table}`, "
            f"which creates it; otherwise create it: {aws}"
        )
    return f"create it: {aws} (or deploy the CDK LockTable construct)"
