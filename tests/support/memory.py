"""A lock table in memory for the engine's unit tests (rows only)."""

from __future__ import annotations

from dynalease._memory import MemoryDynamoDB
from dynalease.testing import _MemoryTransport as MemoryTransport

__all__ = ["MemoryDynamoDB", "MemoryTransport", "memory_lock_table"]


def memory_lock_table(name: str = "locks") -> MemoryDynamoDB:
    """A fresh in-memory DynamoDB holding one empty lock table (partition key ``key``, S)."""
    db = MemoryDynamoDB()
    db.call(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": [{"AttributeName": "key", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "key", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    return db
