"""The two lock libraries behind one small interface, so every workload runs both alike.

Both expose the same lock API shape (pydynox 1.8's ``lock`` module is what
dynalease matches), so the adapters only differ in imports and client setup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

LIBRARIES = ("dynalease", "pydynox")
REGION = "us-east-1"


def use_test_credentials() -> None:
    """Static credentials for moto, so neither library looks further along the chain."""
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = REGION
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)


@dataclass
class Lib:
    """One library's client and lock classes."""

    name: str
    client: Any
    sync_lock: Any
    async_lock: Any

    def sync(self, table: str, key: str, *, lease: float = 30.0, wait: float = 35.0) -> Any:
        """A sync guard (context manager)."""
        return self.sync_lock(
            self.client, table=table, key=key, lease_duration=lease, wait_timeout=wait
        )

    def async_(self, table: str, key: str, *, lease: float = 30.0, wait: float = 35.0) -> Any:
        """An async guard (async context manager)."""
        return self.async_lock(
            self.client, table=table, key=key, lease_duration=lease, wait_timeout=wait
        )


def make(name: str, endpoint: str) -> Lib:
    """A fresh client of library ``name`` for the moto server at ``endpoint``."""
    if name == "dynalease":
        import dynalease
        from dynalease.lock import DistributedLock, SyncDistributedLock

        client: Any = dynalease.DynamoDBClient(region=REGION, endpoint_url=endpoint)
        return Lib(name, client, SyncDistributedLock, DistributedLock)
    if name == "pydynox":
        import pydynox
        from pydynox.lock import DistributedLock as PDistributedLock
        from pydynox.lock import SyncDistributedLock as PSyncDistributedLock

        client = pydynox.DynamoDBClient(endpoint_url=endpoint, region=REGION)
        return Lib(name, client, PSyncDistributedLock, PDistributedLock)
    raise ValueError(f"unknown library {name!r}; choose from {', '.join(LIBRARIES)}")


@dataclass
class Cost:
    """Requests and capacity summed over guards."""

    requests: int = 0
    capacity: float = 0.0
    renewals: int = 0
    lost: int = 0

    def add(self, guard: Any) -> None:
        """Add one finished guard's metrics."""
        metrics = guard.metrics
        self.requests += int(metrics.read_requests) + int(metrics.write_requests)
        self.capacity += float(metrics.consumed_rcu) + float(metrics.consumed_wcu)
        self.renewals += int(metrics.renewals)
        self.lost += int(bool(metrics.lost))


def create_table(endpoint: str, name: str) -> None:
    """Create a lock table (partition key ``key``, string) and wait until it is usable."""
    import boto3

    dynamodb = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.get_waiter("table_exists").wait(TableName=name)


def put_abandoned_row(endpoint: str, table: str, key: str, lease_ms: int) -> None:
    """Write a protocol-1 row whose owner is gone (as a crashed holder leaves it)."""
    import uuid

    import boto3

    dynamodb = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
    dynamodb.put_item(
        TableName=table,
        Item={
            "key": {"S": key},
            "owner": {"S": str(uuid.uuid4())},
            "version": {"S": str(uuid.uuid4())},
            "lease_ms": {"N": str(lease_ms)},
            "protocol": {"N": "1"},
        },
    )
