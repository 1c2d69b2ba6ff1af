"""The in-memory DynamoDB of ``dynalease.testing`` with a lock table in it, for unit tests."""

from __future__ import annotations

from dynalease._memory import MemoryDynamoDB


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
