"""Which transports a DynamoDBClient gets, from its arguments, a session or a boto3 client.

Two per client: the caller's own requests (botocore with the caller's retry settings, or
:mod:`.items`), and lock requests (lean or botocore, SDK retries off, the protocol's
timeouts). botocore clients are made on first use, so a lean client whose settings are all
in arguments and the environment never imports botocore to lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .boto import LOCK_CONNECT_TIMEOUT_S, BotoTransport, lock_config
from .botocore_internals import endpoint_verify, share_credentials
from .config import DirectConfig, direct_config
from .items import ItemTransport, lean_items_allowed
from .lean import LeanTransport, lock_transport, transport_choice

if TYPE_CHECKING:
    import boto3
    from botocore.client import BaseClient

    from .._engine.store import Transport


# Named tuples, not dataclasses: a frozen dataclass is slow to define on a cold start.


class Transports(NamedTuple):
    items: Transport
    locks: Transport
    region: str | None
    endpoint_url: str | None


#: The settings the lean path reads from a client's arguments (``config.direct_config``).
_DIRECT_SETTINGS = (
    "region",
    "endpoint_url",
    "access_key",
    "secret_key",
    "session_token",
    "profile",
)


class Settings(NamedTuple):
    """A client's explicit arguments; None means "from AWS's chain"."""

    region: str | None = None
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    profile: str | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_retries: int | None = None
    transport: str | None = None

    def __repr__(self) -> str:
        # Without the keys and token, so no log line or error shows them.
        shown = ", ".join(
            f"{name}={value!r}"
            for name, value in zip(self._fields, self, strict=True)
            if name not in _SECRET
        )
        return f"Settings({shown})"

    def checked(self) -> Settings:
        """The timeouts as floats; the first bad argument raised, before any I/O."""
        for name in _TEXT:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError("pass access_key and secret_key together, or neither")
        connect = _seconds("connect_timeout", self.connect_timeout)
        read = _seconds("read_timeout", self.read_timeout)
        retries = self.max_retries
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        ):
            raise ValueError(f"max_retries must be an int >= 0, got {retries!r}")
        return self._replace(connect_timeout=connect, read_timeout=read)


_SECRET = frozenset({"access_key", "secret_key", "session_token"})
_TEXT = ("region", "endpoint_url", "access_key", "secret_key", "session_token", "profile")


def _seconds(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def from_settings(settings: Settings) -> Transports:
    choice = transport_choice(settings.transport)
    options: dict[str, Any] = {}
    if settings.connect_timeout is not None:
        options["connect_timeout"] = settings.connect_timeout
    if settings.read_timeout is not None:
        options["read_timeout"] = settings.read_timeout
    if settings.max_retries is not None:
        options["retries"] = {"total_max_attempts": settings.max_retries + 1, "mode": "standard"}

    def make_session() -> Any:
        import boto3

        keys = (settings.access_key, settings.secret_key, settings.session_token)
        if keys == (None, None, None) and settings.profile is None:
            # boto3's default session, as boto3.client() uses: its credentials and loaded
            # models are shared with the user's clients.
            if boto3.DEFAULT_SESSION is None:
                boto3.setup_default_session()
            return boto3.DEFAULT_SESSION
        return boto3.Session(
            aws_access_key_id=settings.access_key,
            aws_secret_access_key=settings.secret_key,
            aws_session_token=settings.session_token,
            region_name=settings.region,
            profile_name=settings.profile,
        )

    def make_config() -> Any:
        from botocore.config import Config

        return Config(**options) if options else None

    direct = None
    if choice == "lean":
        connect = settings.connect_timeout or LOCK_CONNECT_TIMEOUT_S
        given = settings._asdict()
        direct = direct_config(
            **{name: given[name] for name in _DIRECT_SETTINGS},
            connect_timeout=min(LOCK_CONNECT_TIMEOUT_S, connect),
        )
    if direct is None:
        return _over_session(
            make_session(), settings.endpoint_url, make_config(), choice, settings.region
        )
    return _direct(make_session, make_config, settings, direct)


def from_session(
    session: boto3.Session, endpoint_url: str | None, transport: str | None
) -> Transports:
    return _over_session(session, endpoint_url, None, transport_choice(transport))


def from_client(dynamodb: BaseClient, transport: str | None) -> Transports:
    """Lock requests go through a sibling of the caller's client: SDK retries off, the
    protocol's timeouts, the same credentials object (so refreshes apply to both)."""
    choice = transport_choice(transport)

    def lock_client() -> BaseClient:
        import botocore.session

        session = botocore.session.get_session()
        sibling: Any = session.create_client(
            "dynamodb",
            region_name=dynamodb.meta.region_name,
            endpoint_url=dynamodb.meta.endpoint_url,
            config=lock_config(dynamodb.meta.config),
            # The caller's verify=False or CA bundle is not in its config: copy it.
            verify=endpoint_verify(dynamodb),
            aws_access_key_id="placeholder",
            aws_secret_access_key="placeholder",
        )
        share_credentials(dynamodb, sibling)
        made: BaseClient = sibling
        return made

    return Transports(
        BotoTransport(lambda: dynamodb),
        lock_transport(lock_client, choice),
        region=dynamodb.meta.region_name,
        endpoint_url=dynamodb.meta.endpoint_url,
    )


def _over_session(
    session: Any, endpoint_url: str | None, config: Any, choice: str, region: str | None = None
) -> Transports:
    # botocore reads AWS_DEFAULT_REGION only; AWS_REGION is what Lambda and the
    # other AWS SDKs set, and what users expect to work.
    region = region or session.region_name or os.environ.get("AWS_REGION") or None
    if region is None:
        raise ValueError(
            "no AWS Region is configured: pass region=..., or set AWS_REGION / "
            "AWS_DEFAULT_REGION, or use a profile that sets one"
        )
    return _botocore_clients(
        lambda: (session, config),
        region,
        endpoint_url,
        lambda locks: lock_transport(locks, choice),
    )


def _direct(
    make_session: Callable[[], Any],
    make_config: Callable[[], Any],
    settings: Settings,
    direct: DirectConfig,
) -> Transports:
    made: list[tuple[Any, Any]] = []

    def session_and_config() -> tuple[Any, Any]:
        if not made:  # built at most once (a race builds two; either is right)
            made.append((make_session(), make_config()))
        return made[0]

    transports = _botocore_clients(
        session_and_config,
        direct.region,
        settings.endpoint_url,
        lambda locks: LeanTransport(locks, direct),
    )
    locks, items = transports.locks, transports.items
    if not (isinstance(locks, LeanTransport) and isinstance(items, BotoTransport)):
        return transports
    if lean_items_allowed():
        items = ItemTransport(
            items,
            locks,
            max_retries=settings.max_retries,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
        )
    return Transports(items, locks, region=direct.region, endpoint_url=settings.endpoint_url)


def _botocore_clients(
    session_and_config: Callable[[], tuple[Any, Any]],
    region: str,
    endpoint_url: str | None,
    make_lock_transport: Callable[[Callable[[], BaseClient]], Transport],
) -> Transports:

    def client(lock: bool) -> BaseClient:
        session, config = session_and_config()
        made: BaseClient = session.client(
            "dynamodb",
            region_name=region,
            endpoint_url=endpoint_url,
            config=lock_config(config) if lock else config,
        )
        return made

    return Transports(
        BotoTransport(lambda: client(False)),
        make_lock_transport(lambda: client(True)),
        region=region,
        endpoint_url=endpoint_url,
    )
