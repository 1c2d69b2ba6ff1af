"""The boto path builds its clients on boto3's default session unless told otherwise.

A new ``boto3.Session`` per client loads its models again (tens of milliseconds);
boto3's default session is the one ``boto3.client()`` uses, so a process that uses
boto3 anyway pays once. Given keys, a profile or a session, the client uses those.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from dynalease import DynamoDBClient


@pytest.fixture(autouse=True)
def default_session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[Any]]:
    """A fresh default session whose ``client`` calls are recorded."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    session = boto3.Session()
    made: list[Any] = []
    original = session.client

    def client(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs.get("region_name"))
        return original(*args, **kwargs)

    monkeypatch.setattr(session, "client", client)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)
    yield made


def _lock_client(client: DynamoDBClient) -> Any:
    return client._lock_store.transport.client  # type: ignore[attr-defined]


def test_a_client_without_keys_or_profile_uses_boto3s_default_session(
    default_session: list[Any],
) -> None:
    client = DynamoDBClient(region="eu-west-1", transport="boto")
    assert _lock_client(client).meta.region_name == "eu-west-1"
    assert default_session == ["eu-west-1"]


def test_keys_given_to_the_client_make_a_session_of_their_own(
    default_session: list[Any],
) -> None:
    client = DynamoDBClient(
        region="eu-west-1", transport="boto", access_key="AKIDOTHER", secret_key="other"
    )
    frozen = _lock_client(client)._request_signer._credentials.get_frozen_credentials()
    assert frozen.access_key == "AKIDOTHER"
    assert default_session == []
