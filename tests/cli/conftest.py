"""Fixtures for the ``dynalease`` command: run it as a separate process against moto."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from support.cli_runner import Result, run_cli

from dynalease import DynamoDBClient


@pytest.fixture
def dynalease() -> Callable[..., Result]:
    return run_cli


@pytest.fixture
def lock_table(client: DynamoDBClient) -> str:
    """A fresh lock table (partition key ``key`` S) on the moto server."""
    name = f"cli-locks-{uuid.uuid4().hex[:8]}"
    client.sync_create_table(name, partition_key=("key", "S"), wait=True)
    return name
