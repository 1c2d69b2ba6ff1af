"""Proxies, CA bundles, secrets and botocore's private attributes, as the lean path reads them.

No server here (``tests/integration/test_lean_settings_live.py`` sends through a
proxy and over TLS). The proxy chosen is compared with what a real botocore
client decides; the CA
bundle with a real client's ``verify``; every private botocore attribute the
lean path reads is looked up on real clients, so a botocore release that renames
one fails here; and no repr of the lean path's settings shows a secret.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import trustme
from botocore.config import Config
from botocore.credentials import Credentials

from dynalease._transport.config import DirectConfig, StaticCredentials, direct_config
from dynalease._transport.connections import Dialing
from dynalease._transport.factory import Settings, from_client
from dynalease._transport.lean import LeanTransport
from dynalease._transport.route import Route, Unsupported


# The modules added for these findings are imported inside the tests that need them,
# so this file also runs (and fails where it should) against the code before them.
def _internals() -> Any:
    from dynalease._transport import botocore_internals

    return botocore_internals


def proxy_for(url: str) -> str | None:
    from dynalease._transport.connections import proxy_for

    return proxy_for(url)


def read_client(client: Any, url: str) -> Any:
    """The private settings the lean path reads from ``client``."""
    import types

    internals = _internals()
    return types.SimpleNamespace(
        credentials=internals.signing_credentials(client), verify=internals.endpoint_verify(client)
    )


def botocore_proxy(client: Any, url: str) -> str | None:
    """The proxy a botocore client sends ``url`` through (its private reading, for the test)."""
    proxy: str | None = client._endpoint.http_session._proxy_config.proxy_url_for(url)
    return proxy or None


def endpoint_verify(client: Any) -> Any:
    return _internals().endpoint_verify(client)


SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYsecretEXAMPLE"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLEsessionTOKENvalue"
KEY_ID = "AKIAIOSFODNN7EXAMPLE"
PASSWORD = "hunter2-in-the-url"


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Static keys, a Region, no config files, no proxy and no CA bundle."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name in (
            "AWS_CA_BUNDLE",
            "REQUESTS_CA_BUNDLE",
            "AWS_PROFILE",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_DYNAMODB",
            "AWS_SESSION_TOKEN",
            "REQUEST_METHOD",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    yield


def _direct(endpoint_url: str | None = None) -> DirectConfig | None:
    return direct_config(
        region=None,
        endpoint_url=endpoint_url,
        access_key=None,
        secret_key=None,
        session_token=None,
        profile=None,
        connect_timeout=5.0,
    )


#: botocore's data loader (the service model and endpoint rules it reads from disk), shared
#: by the tests' sessions: each test's client comes from a fresh session, which reads the
#: environment as it is then, without parsing those files again (most of a client's cost,
#: for the 180 clients made here).
_LOADER = botocore.session.Session().get_component("data_loader")


def _client(url: str | None = None, **options: Any) -> Any:
    session = botocore.session.Session()
    session.register_component("data_loader", _LOADER)
    return session.create_client("dynamodb", region_name="us-east-1", endpoint_url=url, **options)


# --- proxies ------------------------------------------------------------------------

REGIONAL = "https://dynamodb.us-east-1.amazonaws.com"
LOCAL = "http://127.0.0.1:8000"

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"HTTPS_PROXY": "http://p:3128"},
    {"https_proxy": "http://p:3128"},
    {"Https_Proxy": "http://p:3128"},
    {"hTTPs_pROXY": "http://p:3128"},
    {"HTTP_PROXY": "http://p:3128"},
    {"Http_Proxy": "p:3128"},
    {"ALL_PROXY": "http://p:3128"},
    {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"},
    {"HTTPS_PROXY": "http://upper:1", "https_proxy": ""},
    {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"},
    {"http_proxy": "http://p:1", "REQUEST_METHOD": "GET"},
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "NO_PROXY": "*"},
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "no_proxy": "127.0.0.1"},
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "No_Proxy": ".amazonaws.com"},
    {
        "HTTPS_PROXY": "http://p:1",
        "HTTP_PROXY": "http://p:1",
        "NO_PROXY": "localhost, Amazonaws.COM",
    },
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "NO_PROXY": "127.0.0.1:8000"},
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "NO_PROXY": "127.0.0.1:9999"},
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "NO_PROXY": "east-1.amazonaws"},
    {"HTTPS_PROXY": "http://p:1", "HTTP_PROXY": "http://p:1", "NO_PROXY": ", ,"},
]


def _set(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("variables", ENVIRONMENTS, ids=lambda v: ",".join(v) or "none")
@pytest.mark.parametrize("url", [REGIONAL, LOCAL, "http://[::1]:8000"])
def test_the_proxy_is_the_one_botocore_sends_through(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], url: str
) -> None:
    _set(monkeypatch, variables)
    assert proxy_for(url) == botocore_proxy(_client(url), url)


@pytest.mark.parametrize("variables", ENVIRONMENTS, ids=lambda v: ",".join(v) or "none")
@pytest.mark.parametrize("url", [None, LOCAL])
def test_a_proxy_no_longer_hands_the_lean_path_to_botocore(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], url: str | None
) -> None:
    _set(monkeypatch, variables)
    direct = _direct(url)
    assert direct is not None
    endpoint = url or REGIONAL
    assert Route.direct(direct).connections.proxy == botocore_proxy(_client(url), endpoint)
    assert Route.of_client(_client(url)).connections.proxy == botocore_proxy(_client(url), endpoint)


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "Https_Proxy"])
def test_an_https_proxy_in_any_letter_case_is_used_for_the_regional_endpoint(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "http://proxy.internal:3128")
    direct = _direct()
    assert direct is not None
    assert Route.direct(direct).connections.proxy == "http://proxy.internal:3128"
    monkeypatch.setenv("NO_PROXY", "dynamodb.us-east-1.amazonaws.com")
    assert Route.direct(direct).connections.proxy is None


def test_a_proxy_in_a_botocore_config_is_the_routes_proxy() -> None:
    client = _client(LOCAL, config=Config(proxies={"http": "http://p:1"}))
    assert Route.of_client(client).connections.proxy == "http://p:1"
    client = _client(LOCAL, config=Config(proxies={"https": "http://p:1"}))
    assert Route.of_client(client).connections.proxy is None


@pytest.mark.parametrize("url", [None, LOCAL])
def test_an_https_proxy_url_leaves_lock_requests_to_botocore(
    monkeypatch: pytest.MonkeyPatch, url: str | None
) -> None:
    """TLS to the proxy, then TLS through it, is botocore's (http.client has no such tunnel)."""
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.internal:3129")
    monkeypatch.setenv("HTTP_PROXY", "https://proxy.internal:3129")
    direct = _direct(url)
    assert direct is not None
    with pytest.raises(Unsupported, match="https:// URL"):
        Route.direct(direct)
    with pytest.raises(Unsupported, match="https:// URL"):
        Route.of_client(_client(url))


def test_proxy_tls_settings_and_client_certificates_are_left_to_botocore(tmp_path: Path) -> None:
    cert = tmp_path / "client.pem"
    trustme.CA().issue_cert("client").private_key_and_cert_chain_pem.write_to_path(str(cert))
    with pytest.raises(Unsupported, match="certificate"):
        Route.of_client(_client(LOCAL, config=Config(client_cert=str(cert))))
    settings = Config(proxies_config={"proxy_ca_bundle": str(cert)})
    with pytest.raises(Unsupported, match="proxy TLS"):
        Route.of_client(_client(LOCAL, config=settings))


# --- CA bundles ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"REQUESTS_CA_BUNDLE": "/requests/ca.pem"},
        {"AWS_CA_BUNDLE": "/aws/ca.pem"},
        {"AWS_CA_BUNDLE": "/aws/ca.pem", "REQUESTS_CA_BUNDLE": "/requests/ca.pem"},
    ],
    ids=lambda v: ",".join(v) or "none",
)
def test_the_ca_bundle_is_the_one_botocore_verifies_with(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    _set(monkeypatch, variables)
    direct = _direct()
    assert direct is not None
    verify = endpoint_verify(_client())
    assert direct.ca_bundle == (None if verify is True else verify)


@pytest.mark.parametrize("name", ["AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE"])
def test_a_blank_ca_bundle_is_left_to_botocore_to_report(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, " ")
    assert _direct() is None


def test_a_client_given_to_from_client_passes_its_verify_to_the_lock_client(
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(bundle))
    for verify in (False, str(bundle)):
        mine = _client("https://127.0.0.1:1", verify=verify)
        transport: Any = from_client(mine, "boto").locks
        assert endpoint_verify(transport.client) == verify
        assert Route.of_client(transport.client).url == "https://127.0.0.1:1"


# --- secrets ------------------------------------------------------------------------


def test_no_repr_of_the_lean_settings_shows_a_secret_or_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    credentials = StaticCredentials(KEY_ID, SECRET, TOKEN)
    config = DirectConfig("http://127.0.0.1:1", "us-east-1", credentials, 1.0)
    route = Route.direct(config)
    route.signer.headers("x", b"{}", KEY_ID, SECRET, TOKEN)  # the signer caches a derived key
    settings = Settings(
        region="us-east-1", access_key=KEY_ID, secret_key=SECRET, session_token=TOKEN
    )
    caplog.set_level(logging.DEBUG)
    lean = LeanTransport(lambda: None, config)  # type: ignore[arg-type, return-value]
    shown = [repr(credentials), str(credentials), repr(config), str(config), repr(settings)]
    shown += [repr(vars(route)), repr(vars(lean)), caplog.text]
    for text in shown:
        assert SECRET not in text and TOKEN not in text, text
    assert KEY_ID not in repr(credentials) and "MPLE" in repr(credentials)
    assert "token=None" in repr(StaticCredentials(KEY_ID, SECRET, None))
    assert StaticCredentials(KEY_ID, SECRET, TOKEN) == credentials  # still compared whole


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{PASSWORD}@127.0.0.1:1",
        f"http://127.0.0.1:1/?X-Amz-Security-Token={TOKEN}",
        f"ftp://user:{PASSWORD}@host",
    ],
)
def test_an_unsupported_endpoint_is_named_without_its_user_info_or_query(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(Unsupported) as raised:
        Route(url, "us-east-1", None, Dialing(connect_timeout=1, read_timeout=1, max_connections=1))
    assert PASSWORD not in str(raised.value) and TOKEN not in str(raised.value)
    assert "127.0.0.1" in str(raised.value) or "host" in str(raised.value)


# --- botocore's private attributes --------------------------------------------------


def test_every_private_botocore_attribute_the_lean_path_reads_is_there(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(bundle))
    client = _client("https://db.example:8443", verify=str(bundle))
    inside = read_client(client, "https://db.example:8443")
    assert inside.verify == str(bundle) == endpoint_verify(client)
    frozen = inside.credentials.get_frozen_credentials()
    assert (frozen.access_key, frozen.secret_key) == ("AKIDEXAMPLE", "secret")
    assert read_client(_client(LOCAL, verify=False), LOCAL).verify is False
    assert read_client(_client(LOCAL), LOCAL).verify is True

    # Sharing the credentials object: the lock client then signs as the caller's.
    target = _client(LOCAL, aws_access_key_id="placeholder", aws_secret_access_key="x")
    _internals().share_credentials(client, target)
    assert read_client(target, LOCAL).credentials is inside.credentials
    unsigned = _client(LOCAL, config=Config(signature_version=botocore.UNSIGNED))
    assert read_client(unsigned, LOCAL).credentials is None


def _renamed(client: Any, owner: str, name: str) -> Any:
    """``client`` with ``owner``'s private attribute ``name`` gone, as a botocore rename would."""
    holder = client._endpoint.http_session if owner == "session" else client._request_signer

    class Renamed:
        def __init__(self) -> None:
            for key, value in vars(holder).items():
                if key != name:
                    setattr(self, key, value)

    if owner == "session":
        client._endpoint.http_session = Renamed()
    else:
        client._request_signer = Renamed()
    return client


@pytest.mark.parametrize(
    ("owner", "name"),
    [("session", "_verify"), ("signer", "_credentials")],
)
def test_a_renamed_private_attribute_is_reported_not_read_as_absent(
    owner: str, name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = _renamed(_client(LOCAL, verify=False), owner, name)
    # The lean path leaves lock requests to botocore (which knows its own settings),
    # and says why as a warning: never a lean route that trusts the wrong certificates.
    lean = LeanTransport(lambda: client)
    caplog.set_level(logging.WARNING, logger="dynalease")
    asyncio.run(lean.prepare())
    assert lean.route is None and lean.fallback_reason is not None and name in lean.fallback_reason
    assert any(record.levelno == logging.WARNING for record in caplog.records)
    with pytest.raises(_internals().BotocoreChanged, match=name):
        read_client(client, LOCAL)
    with pytest.raises(_internals().BotocoreChanged, match=name):
        Route.of_client(client)


def test_a_renamed_credentials_attribute_fails_the_lock_client_loudly() -> None:
    source = _client(LOCAL)
    target = _renamed(_client(LOCAL), "signer", "_credentials")
    with pytest.raises(_internals().BotocoreChanged, match="_credentials"):
        _internals().share_credentials(source, target)
    with pytest.raises(_internals().BotocoreChanged, match="_verify"):
        endpoint_verify(_renamed(_client(LOCAL), "session", "_verify"))


def test_credentials_objects_are_read_through_their_public_interface() -> None:
    # The route keeps the credentials object itself: a refresh shows in the next request.
    client = _client(LOCAL)
    route = Route.of_client(client)
    assert isinstance(route.credentials, Credentials)
