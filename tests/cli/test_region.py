"""The Region comes from AWS_REGION too, not only from botocore's AWS_DEFAULT_REGION."""

from __future__ import annotations

import pytest

from dynalease import DynamoDBClient


def test_aws_region_alone_configures_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/dynalease-config")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    client = DynamoDBClient(access_key="a", secret_key="b")
    assert client.region == "eu-central-1"
    assert client._items.client.meta.region_name == "eu-central-1"  # type: ignore[attr-defined]


def test_an_explicit_region_wins_over_aws_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    client = DynamoDBClient(region="ap-south-1", access_key="a", secret_key="b")
    assert client._items.client.meta.region_name == "ap-south-1"  # type: ignore[attr-defined]


def test_no_region_anywhere_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/dynalease-config")
    with pytest.raises(ValueError, match="no AWS Region is configured"):
        DynamoDBClient(access_key="a", secret_key="b")
