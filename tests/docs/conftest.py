"""A moto server of the docs' own, emptied before each document.

The code blocks of one document share a fresh empty server; the docs test owns
it, so resetting it never disturbs the session server other tests use.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dynalease._tooling.local_server import LocalServer


@pytest.fixture(scope="session")
def docs_server() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server
