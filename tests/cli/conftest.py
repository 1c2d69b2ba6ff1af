"""Fixtures for the ``dynalease`` command: run it as a separate process against moto."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.cli_runner import Result, run_cli, run_dev_cli
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient


@pytest.fixture
def dynalease() -> Callable[..., Result]:
    return run_cli


@pytest.fixture
def dynalease_dev() -> Callable[..., Result]:
    return run_dev_cli


@pytest.fixture
def lock_table(client: DynamoDBClient) -> str:
    """A fresh lock table (partition key ``key`` S) on the moto server."""
    return fresh_lock_table(client, "cli-locks")
