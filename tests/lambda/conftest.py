"""Fixtures for the Lambda tests: AWS settings for the moto server, lock tables,
a request-counting proxy, and the example handlers loaded as Lambda loads them."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dynalease_dev.invoke import load_handler
from support.counting_proxy import CountingProxy
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.constants import ENV_TABLE

ROOT = pathlib.Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
EXAMPLES = ROOT / "examples" / "lambda"


@pytest.fixture(scope="session")
def counting_proxy(endpoint: str) -> Iterator[CountingProxy]:
    """A proxy in front of the moto server that counts DynamoDB operations."""
    with CountingProxy(endpoint) as proxy:
        yield proxy


@pytest.fixture
def aws_env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The standard AWS settings pointing at the moto server, as Lambda would set them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "DynaleaseTests")
    return endpoint


def _client_for(url: str) -> DynamoDBClient:
    return DynamoDBClient(
        region="us-east-1", endpoint_url=url, access_key="testing", secret_key="testing"
    )


@pytest.fixture(scope="session")
def other_client(endpoint: str) -> DynamoDBClient:
    """A client standing for another service: creates tables and holds locks elsewhere.

    One for the session (building a client costs a few hundred ms); tests use
    fresh tables and keys, so nothing carries over between them.
    """
    return _client_for(endpoint)


@pytest.fixture
def lock_table(aws_env: str, other_client: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh lock table, also set as DYNALEASE_TABLE."""
    name = fresh_lock_table(other_client, "lambda-locks")
    monkeypatch.setenv(ENV_TABLE, name)
    return name


@pytest.fixture(scope="session")
def _counted_session_client(counting_proxy: CountingProxy) -> DynamoDBClient:
    return _client_for(counting_proxy.url)


@pytest.fixture
def counted_client(
    counting_proxy: CountingProxy, _counted_session_client: DynamoDBClient, aws_env: str
) -> DynamoDBClient:
    """A client whose requests go through the counting proxy (counts start at 0)."""
    counting_proxy.reset()
    return _counted_session_client


@pytest.fixture
def example() -> Callable[[str], Callable[..., Any]]:
    """Load ``examples/lambda/<name>.py``'s ``handler`` the way Lambda imports it."""

    def load(name: str) -> Callable[..., Any]:
        return load_handler(f"{EXAMPLES / name}.py:handler")

    return load


@pytest.fixture
def load_event() -> Callable[[str], Any]:
    """Read a sample event from events/, fresh for each call (handlers may mutate events)."""

    def load(name: str) -> Any:
        return json.loads((EVENTS / f"{name}.json").read_text())

    return load
