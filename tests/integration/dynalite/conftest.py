"""Fixtures running one test against each DynamoDB implementation the tests start.

``emulator`` is parametrised over moto (the session server of tests/conftest.py)
and dynalite (started here, once per session), so each protocol scenario is
written once and must pass on both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.servers import Emulator, running_dynalite


@pytest.fixture(scope="session")
def dynalite_endpoint() -> Iterator[str]:
    with running_dynalite() as url:
        yield url


@pytest.fixture(params=["moto", "dynalite"])
def emulator(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    # Clients get explicit test keys; a developer's AWS_PROFILE must not be looked up.
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    if request.param == "moto":
        return Emulator("moto", request.getfixturevalue("endpoint"), True)
    return Emulator("dynalite", request.getfixturevalue("dynalite_endpoint"), False)
