"""Fresh tables on the moto server, one per test."""

from __future__ import annotations

import uuid

from dynalease import DynamoDBClient


def fresh_lock_table(client: DynamoDBClient, prefix: str) -> str:
    """Create a lock table (partition key ``key`` S) named ``<prefix>-<random>``; its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client.sync_create_table(name, partition_key=("key", "S"), wait=True)
    return name
