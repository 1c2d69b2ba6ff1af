"""The URL a lock request goes to is the URL botocore's own request goes to.

For each configuration (environment variables, a config file, a client's arguments)
the lean path's route is compared with the URL of a request a boto3 client of the
same configuration prepares, recorded by a ``before-send`` hook that answers it
itself: nothing goes over the network. Where the lean path reads the settings
itself (:mod:`dynalease._transport.config`) the URL must match; where it hands the
settings to botocore, the route is botocore's, and a configuration botocore refuses
is refused with botocore's message.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders

from dynalease._engine.store import Request
from dynalease._transport.factory import Settings, from_settings
from dynalease._transport.lean import LeanTransport
from dynalease.exceptions import DynaleaseError

ACCOUNT = "111122223333"


class Case(NamedTuple):
    """One configuration: environment variables, a config file's text, client arguments."""

    name: str
    env: dict[str, str]
    region: str | None = "eu-west-1"
    endpoint_url: str | None = None
    keys: bool = False  # keys passed as arguments (they carry no account ID)
    config_file: str | None = None
    #: True: the lean path reads it itself; False: botocore resolves it; None: either.
    direct: bool | None = None


CASES = [
    Case("regional", {}, direct=True),
    Case("account id", {"AWS_ACCOUNT_ID": ACCOUNT}, direct=True),
    Case(
        "account id, preferred",
        {"AWS_ACCOUNT_ID": ACCOUNT, "AWS_ACCOUNT_ID_ENDPOINT_MODE": "preferred"},
        direct=True,
    ),
    Case(
        "account id, disabled",
        {"AWS_ACCOUNT_ID": ACCOUNT, "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"},
        direct=True,
    ),
    Case(
        "account id, required",
        {"AWS_ACCOUNT_ID": ACCOUNT, "AWS_ACCOUNT_ID_ENDPOINT_MODE": "required"},
        direct=True,
    ),
    Case("required without an account id", {"AWS_ACCOUNT_ID_ENDPOINT_MODE": "required"}),
    Case("an account id mode botocore refuses", {"AWS_ACCOUNT_ID_ENDPOINT_MODE": "always"}),
    Case(
        "account id beside keys passed as arguments",
        {"AWS_ACCOUNT_ID": ACCOUNT},
        keys=True,
        direct=True,
    ),
    Case("an account id that is not twelve digits", {"AWS_ACCOUNT_ID": "team-a"}, direct=False),
    Case("account id, us-east-1", {"AWS_ACCOUNT_ID": ACCOUNT}, region="us-east-1", direct=True),
    Case(
        "account id, ap-southeast-2",
        {"AWS_ACCOUNT_ID": ACCOUNT},
        region="ap-southeast-2",
        direct=True,
    ),
    Case("aws-cn", {}, region="cn-north-1", direct=True),
    Case("aws-cn, account id", {"AWS_ACCOUNT_ID": ACCOUNT}, region="cn-northwest-1", direct=True),
    Case("aws-us-gov", {}, region="us-gov-west-1", direct=True),
    Case(
        "aws-us-gov, account id", {"AWS_ACCOUNT_ID": ACCOUNT}, region="us-gov-east-1", direct=True
    ),
    Case(
        "aws-us-gov, FIPS", {"AWS_USE_FIPS_ENDPOINT": "true"}, region="us-gov-west-1", direct=False
    ),
    Case("FIPS", {"AWS_USE_FIPS_ENDPOINT": "true"}, region="us-east-1", direct=False),
    Case(
        "FIPS, account id",
        {"AWS_USE_FIPS_ENDPOINT": "true", "AWS_ACCOUNT_ID": ACCOUNT},
        direct=False,
    ),
    Case("dual-stack", {"AWS_USE_DUALSTACK_ENDPOINT": "true"}, direct=False),
    Case(
        "dual-stack, account id",
        {"AWS_USE_DUALSTACK_ENDPOINT": "true", "AWS_ACCOUNT_ID": ACCOUNT},
        direct=False,
    ),
    Case(
        "FIPS and dual-stack",
        {"AWS_USE_FIPS_ENDPOINT": "true", "AWS_USE_DUALSTACK_ENDPOINT": "true"},
        region="us-east-1",
        direct=False,
    ),
    Case("a Region outside the fixed partitions", {}, region="us-iso-east-1", direct=False),
    Case(
        "AWS_ENDPOINT_URL_DYNAMODB",
        {"AWS_ENDPOINT_URL_DYNAMODB": "https://ddb.example:8443"},
        direct=True,
    ),
    Case("AWS_ENDPOINT_URL", {"AWS_ENDPOINT_URL": "http://127.0.0.1:8000"}, direct=True),
    Case(
        "the service's endpoint before the global one",
        {
            "AWS_ENDPOINT_URL": "http://global.example",
            "AWS_ENDPOINT_URL_DYNAMODB": "http://ddb.example",
        },
        direct=True,
    ),
    Case(
        "endpoint_url= before the environment's",
        {"AWS_ENDPOINT_URL_DYNAMODB": "http://env.example"},
        endpoint_url="http://arg.example:4566",
        direct=True,
    ),
    Case(
        "an endpoint override before the account id",
        {"AWS_ACCOUNT_ID": ACCOUNT, "AWS_ENDPOINT_URL": "http://local.example:8000"},
        direct=True,
    ),
    Case(
        "configured endpoints ignored",
        {
            "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
            "AWS_ENDPOINT_URL": "http://ignored.example",
        },
        direct=True,
    ),
    Case(
        "Region from AWS_DEFAULT_REGION",
        {"AWS_DEFAULT_REGION": "sa-east-1", "AWS_ACCOUNT_ID": ACCOUNT},
        region=None,
        direct=True,
    ),
    Case(
        "a config file's account id mode",
        {"AWS_ACCOUNT_ID": ACCOUNT},
        config_file="[default]\naccount_id_endpoint_mode = disabled\n",
        direct=False,
    ),
    Case(
        "a config file's dynamodb endpoint",
        {},
        config_file=(
            "[default]\nservices = local\n[services local]\ndynamodb =\n"
            "  endpoint_url = http://from-config.example:8000\n"
        ),
        direct=False,
    ),
    Case(
        "a config file's FIPS setting",
        {},
        region="us-east-1",
        config_file="[default]\nuse_fips_endpoint = true\n",
        direct=False,
    ),
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Static keys in the environment, no config files, and no other AWS setting."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    yield


class _Empty:
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield b"{}"


def botocore_url(case: Case) -> str:
    """The URL of a ``PutItem`` a boto3 client of ``case``'s configuration prepares.

    Raises what botocore raises for a configuration it refuses.
    """
    keys = {"aws_access_key_id": "AKIDARGS", "aws_secret_access_key": "s"} if case.keys else {}
    client = boto3.Session(region_name=case.region, **keys).client(
        "dynamodb", endpoint_url=case.endpoint_url
    )
    seen: list[str] = []

    def stop(request: Any, **_: Any) -> AWSResponse:
        seen.append(request.url)
        return AWSResponse(request.url, 200, HTTPHeaders(), _Empty())

    client.meta.events.register_first("before-send.dynamodb.PutItem", stop)
    client.put_item(TableName="locks", Item={"key": {"S": "k"}})
    return seen[0].rstrip("/")


def lean_url(case: Case) -> tuple[str | None, bool]:
    """The lean lock path's URL for ``case`` (None: botocore sends), and if it read it itself."""
    keys = {"access_key": "AKIDARGS", "secret_key": "s"} if case.keys else {}
    settings = Settings(
        region=case.region, endpoint_url=case.endpoint_url, transport="lean", **keys
    )
    locks = from_settings(settings).locks
    assert isinstance(locks, LeanTransport)
    direct = locks.direct_route() is not None
    asyncio.run(locks.prepare())
    return (None if locks.route is None else locks.route.url), direct


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_lock_request_goes_where_botocores_request_goes(
    case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    if case.config_file is not None:
        (tmp_path / "config").write_text(case.config_file)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    try:
        expected = botocore_url(case)
    except Exception as refused:
        # The lean path refuses it too, with botocore's words, before sending anything.
        with pytest.raises(DynaleaseError) as raised:
            locks = from_settings(Settings(region=case.region, transport="lean")).locks
            asyncio.run(locks.handle_async(Request("PutItem", {"TableName": "locks", "Item": {}})))
        assert str(refused) in str(raised.value)
        assert not getattr(raised.value, "may_have_committed", False)
        return
    url, direct = lean_url(case)
    if case.direct is not None:
        assert direct == case.direct, "read by the lean path itself" if direct else "botocore's"
    assert url == expected


def test_the_differential_covers_every_kind_of_setting() -> None:
    assert len(CASES) >= 20
    assert any(case.direct for case in CASES) and any(case.direct is False for case in CASES)
