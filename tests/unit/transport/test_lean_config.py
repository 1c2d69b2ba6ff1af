"""The lean path's own reading of the settings agrees with botocore, or defers to it.

A client whose settings are all in arguments and environment variables sends
lock requests without building a botocore client; these tests compare the
endpoint, Region and keys it takes with what a botocore client built from the
same settings uses, and check that every setting it does not model hands the
decision back to botocore. Nothing here talks to a server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import botocore.session
import pytest

from dynalease import DynamoDBClient
from dynalease._transport.config import direct_config, regional_endpoint
from dynalease._transport.lean import LeanTransport

_SETTINGS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CA_BUNDLE",
    "AWS_CREDENTIAL_EXPIRATION",
    "AWS_ACCOUNT_ID",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
)

REGIONS = [
    "us-east-1",
    "us-west-2",
    "eu-central-1",
    "eu-south-2",
    "ap-southeast-5",
    "ca-west-1",
    "me-central-1",
    "af-south-1",
    "il-central-1",
    "mx-central-1",
    "sa-east-1",
    "cn-north-1",
    "cn-northwest-1",
    "us-gov-west-1",
    "us-gov-east-1",
]


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Static keys in the environment, no config files, nothing else set."""
    for name in _SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    yield


def _direct(**overrides: object) -> object:
    options: dict[str, object] = {
        "region": None,
        "endpoint_url": None,
        "access_key": None,
        "secret_key": None,
        "session_token": None,
        "profile": None,
        "connect_timeout": 5.0,
    }
    options.update(overrides)
    return direct_config(**options)  # type: ignore[arg-type]


def _botocore_endpoint(region: str) -> str:
    client = botocore.session.Session().create_client("dynamodb", region_name=region)
    return str(client.meta.endpoint_url)


@pytest.mark.parametrize("region", REGIONS)
def test_the_regional_endpoint_is_the_one_botocore_resolves(region: str) -> None:
    assert regional_endpoint(region) == _botocore_endpoint(region)


@pytest.mark.parametrize("region", ["us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1", "xx"])
def test_regions_of_other_partitions_are_left_to_botocore(region: str) -> None:
    assert regional_endpoint(region) is None
    assert _direct(region=region) is None


@pytest.mark.parametrize(
    "region",
    ["us-east-1\n", "us-east-1\r\nX-Evil: 1", "\nus-east-1", "us-east-1 ", "us-east-\u0661"],
    ids=["trailing-newline", "header-injection", "leading-newline", "space", "arabic-digit"],
)
def test_a_region_is_matched_whole_and_a_damaged_one_never_makes_an_endpoint(region: str) -> None:
    # re.match with "$" took "us-east-1\n" and built an endpoint URL with a newline in it.
    assert regional_endpoint(region) is None
    assert _direct(region=region) is None


def test_environment_keys_region_and_token_are_what_botocore_would_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token")
    direct = _direct()
    session = botocore.session.Session()
    frozen = session.get_credentials().get_frozen_credentials()
    assert direct is not None
    assert direct.region == session.get_config_variable("region") == "eu-west-1"  # type: ignore[attr-defined]
    mine = direct.credentials  # type: ignore[attr-defined]
    assert (mine.access_key, mine.secret_key, mine.token) == (
        frozen.access_key,
        frozen.secret_key,
        frozen.token,
    )


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"AWS_ENDPOINT_URL_DYNAMODB": "http://localhost:8000"}, "http://localhost:8000"),
        ({"AWS_ENDPOINT_URL": "http://localhost:9000"}, "http://localhost:9000"),
        (
            {"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_DYNAMODB": "http://b:2"},
            "http://b:2",
        ),
        (
            {"AWS_ENDPOINT_URL": "http://a:1", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
            "https://dynamodb.us-east-1.amazonaws.com",
        ),
    ],
)
def test_configured_endpoint_urls_win_as_they_do_in_botocore(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], expected: str
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    direct = _direct()
    assert direct is not None
    assert direct.endpoint_url == expected == _botocore_endpoint("us-east-1")  # type: ignore[attr-defined]


def test_an_explicit_endpoint_and_keys_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://env:1")
    direct = _direct(
        region="ap-south-1", endpoint_url="http://mine:2", access_key="A", secret_key="S"
    )
    assert direct is not None
    assert direct.endpoint_url == "http://mine:2"  # type: ignore[attr-defined]
    assert direct.credentials.access_key == "A"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "variable",
    [
        "AWS_PROFILE",
        "AWS_CREDENTIAL_EXPIRATION",
        "AWS_ACCOUNT_ID",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE",
        "AWS_USE_FIPS_ENDPOINT",
        "AWS_USE_DUALSTACK_ENDPOINT",
    ],
)
def test_settings_the_lean_path_does_not_model_hand_it_to_botocore(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert _direct() is not None
    monkeypatch.setenv(variable, "x")
    assert _direct() is None


def test_a_config_file_a_profile_or_missing_keys_hand_it_to_botocore(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert _direct(profile="dev") is None
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    assert _direct() is None
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert _direct() is None


def test_a_client_configured_from_the_environment_locks_without_a_botocore_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    client = DynamoDBClient(transport="lean")
    client._prepare_locks()
    transport = client._lock_store.transport
    assert isinstance(transport, LeanTransport)
    assert transport.boto._client is None
    assert transport.fallback_reason is None
    assert client.region == "eu-west-1"


def test_a_client_with_a_profile_takes_its_route_from_botocore(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile dev]\nregion = eu-west-3\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    client = DynamoDBClient(profile="dev", transport="lean")
    client._prepare_locks()
    transport = client._lock_store.transport
    assert isinstance(transport, LeanTransport)
    assert transport.boto._client is not None
    assert client.region == "eu-west-3"
