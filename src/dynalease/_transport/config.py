"""Where and as whom lean lock requests go, read from arguments and the environment alone
(static keys, the Region, perhaps an endpoint URL or an account ID), so a fresh process
need not import botocore.

Whenever botocore could decide differently (a config file, a profile, refreshable
credentials, FIPS or dual-stack, an account-ID mode it would refuse, a Region outside the
fixed-pattern partitions) the answer is ``None``: build the botocore client and follow it.
"""

import os
import re
from typing import NamedTuple, Self

_HAND_TO_BOTOCORE = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CREDENTIAL_EXPIRATION",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
)
#: botocore's order, after an explicit ``verify`` and the config file.
_CA_BUNDLES = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE")

#: Regions of the partitions whose DynamoDB endpoint is ``dynamodb.<region>.<suffix>``.
_PARTITIONS = (
    (re.compile(r"(us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-[0-9]+"), "amazonaws.com"),
    (re.compile(r"cn-[a-z]+-[0-9]+"), "amazonaws.com.cn"),
    (re.compile(r"us-gov-[a-z]+-[0-9]+"), "amazonaws.com"),
)


class StaticCredentials(NamedTuple):
    """Shaped like botocore's frozen credentials (a named tuple too)."""

    access_key: str
    secret_key: str
    token: str | None

    def get_frozen_credentials(self) -> Self:
        return self

    def __repr__(self) -> str:  # never the secret or the token
        token = "None" if self.token is None else "'<hidden>'"
        return (
            f"StaticCredentials(access_key='…{self.access_key[-4:]}', "
            f"secret_key='<hidden>', token={token})"
        )


class DirectConfig(NamedTuple):
    endpoint_url: str
    region: str
    credentials: StaticCredentials
    connect_timeout: float
    #: None: the default bundle.
    ca_bundle: str | None = None


#: The only account IDs the lean path puts in a host name.
_ACCOUNT_ID = re.compile(r"[0-9]{12}")
_ENDPOINT_MODES = ("preferred", "disabled", "required")


def regional_endpoint(region: str, account_id: str | None = None) -> str | None:
    """The DynamoDB endpoint of a Region in a fixed-pattern partition, else None."""
    for pattern, suffix in _PARTITIONS:
        # fullmatch: match() with ``$`` takes 'us-east-1\n', and \d takes any script's digits.
        if pattern.fullmatch(region):
            if account_id is not None:
                return f"https://{account_id}.ddb.{region}.{suffix}"
            return f"https://dynamodb.{region}.{suffix}"
    return None


def _account_endpoint_id(account_id: str | None) -> tuple[bool, str | None]:
    """Whether the lean path can follow ``AWS_ACCOUNT_ID_ENDPOINT_MODE``, and the ID.

    ``required`` without an ID and values botocore refuses are left for botocore to report.
    """
    mode = os.environ.get("AWS_ACCOUNT_ID_ENDPOINT_MODE")
    if mode is not None and mode not in _ENDPOINT_MODES:
        return False, None
    if mode == "disabled":
        return True, None
    if account_id is not None and not _ACCOUNT_ID.fullmatch(account_id):
        return False, None
    if mode == "required" and account_id is None:
        return False, None
    return True, account_id


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def configured_endpoint(endpoint_url: str | None) -> str | None:
    """The explicit endpoint, else the environment's, as botocore reads them; None: AWS's own."""
    if endpoint_url is not None:
        return endpoint_url
    if (_env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") or "").lower() == "true":
        return None
    return _env("AWS_ENDPOINT_URL_DYNAMODB") or _env("AWS_ENDPOINT_URL")


def _config_file_exists() -> bool:
    # Not the credentials file: botocore reads it only after the environment's keys.
    path = os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config"
    return os.path.exists(os.path.expanduser(path))


def direct_config(
    *,
    region: str | None,
    endpoint_url: str | None,
    access_key: str | None,
    secret_key: str | None,
    session_token: str | None,
    profile: str | None,
    connect_timeout: float,
) -> DirectConfig | None:
    if profile is not None or any(os.environ.get(name) for name in _HAND_TO_BOTOCORE):
        return None
    if _config_file_exists():
        return None
    if access_key is None and session_token is not None:
        return None  # a token without keys: whatever botocore makes of it
    account_id = None  # explicit keys carry none, as botocore's explicit credentials
    if access_key is not None and secret_key is not None:
        credentials = StaticCredentials(access_key, secret_key, session_token)
    else:
        key, secret = _env("AWS_ACCESS_KEY_ID"), _env("AWS_SECRET_ACCESS_KEY")
        if key is None or secret is None:
            return None  # the rest of the chain (files, container, instance): botocore
        token = _env("AWS_SESSION_TOKEN") or _env("AWS_SECURITY_TOKEN")
        credentials = StaticCredentials(key, secret, token)
        account_id = _env("AWS_ACCOUNT_ID")
    # As DynamoDBClient resolves it: botocore's answer, then AWS_REGION.
    region = region or _env("AWS_DEFAULT_REGION") or _env("AWS_REGION")
    if region is None:
        return None
    url = configured_endpoint(endpoint_url)
    if url is None:
        followed, account_id = _account_endpoint_id(account_id)
        url = regional_endpoint(region, account_id) if followed else None
        if url is None:
            return None
    ca_bundle = None
    for name in _CA_BUNDLES:  # botocore's order; a blank one is botocore's error to raise
        if name in os.environ:
            ca_bundle = os.environ[name]
            if not ca_bundle.strip():
                return None
            break
    return DirectConfig(url, region, credentials, connect_timeout, ca_bundle)
