"""Integration fixtures beyond the moto server of tests/conftest.py."""

from collections.abc import Iterator
from typing import Any

import pytest
from support.postgres import postgres  # noqa: F401  (a session fixture: PostgreSQL for fencing)
from support.workers import reaped


@pytest.fixture
def processes() -> Iterator[list[Any]]:
    """A list for the test's worker processes; any still running at the end are killed."""
    with reaped([]) as started:
        yield started
