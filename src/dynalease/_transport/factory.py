"""Which transports a DynamoDBClient gets, from its arguments, a session or a boto3 client.

Every client has two: one for the caller's own requests (item helpers,
transactions), botocore with the caller's retry settings (or, when the lock
path needs no botocore, :mod:`.items`); and one for
lock requests, lean or botocore (see :func:`.lean.transport_choice`), with SDK
retries off and the protocol's timeouts. botocore clients are made on first
use, so a client whose lock requests take the lean path and whose settings are
all in arguments and the environment never imports botocore to lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .boto import LOCK_CONNECT_TIMEOUT_S, BotoTransport, lock_config
from .botocore_internals import endpoint_verify, share_credentials
from .lean import LeanTransport, lock_transport, transport_choice

if TYPE_CHECKING:
    import boto3
    from botocore.client import BaseClient

    from .._engine.store import Transport
    from .config import DirectConfig


# Named tuples, not dataclasses: these are made once per client, and each frozen
# dataclass costs about a millisecond to define when the module loads, on a
# script's or a Lambda function's first lock.


class Transports(NamedTuple):
    """What a client sends through, and where it sends."""

    items: Transport
    locks: Transport
    region: str | None
    endpoint_url: str | None


class Settings(NamedTuple):
    """A client's explicit arguments; None means "from AWS's chain" (see :meth:`checked`)."""

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
        """The settings without the keys and token (so no log line or error shows them)."""
        shown = ", ".join(
            f"{name}={value!r}"
            for name, value in zip(self._fields, self, strict=True)
            if name not in _SECRET
        )
        return f"Settings({shown})"

    def checked(self) -> Settings:
        """These settings with the timeouts as floats, or the error for the first bad one.

        Raised before any I/O, in the words of ``DynamoDBClient``'s arguments.
        """
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
    """Transports for ``DynamoDBClient(...)``'s arguments."""
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

        if (settings.access_key, settings.secret_key, settings.session_token) == (None,) * 3 and (
            settings.profile is None
        ):
            # Nothing of the user's own: boto3's default session, as boto3.client()
            # uses (its credentials and loaded models are shared with the user's clients).
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
        from .config import direct_config

        # When the settings are all in arguments and the environment, lock
        # requests need no botocore at all: a fresh process locks sooner.
        connect = settings.connect_timeout or LOCK_CONNECT_TIMEOUT_S
        direct = direct_config(
            region=settings.region,
            endpoint_url=settings.endpoint_url,
            access_key=settings.access_key,
            secret_key=settings.secret_key,
            session_token=settings.session_token,
            profile=settings.profile,
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
    """Transports for ``DynamoDBClient.from_session``."""
    return _over_session(session, endpoint_url, None, transport_choice(transport))


def from_client(dynamodb: BaseClient, transport: str | None) -> Transports:
    """Transports for ``DynamoDBClient.from_client``: the caller's client for their requests.

    Lock requests go through a sibling client with the same Region, endpoint
    and credentials (shared, so refreshes apply to both) but with SDK retries
    off and the protocol's timeouts.
    """
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
        # Share the credentials object so refreshable credentials stay fresh.
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
    """Lean lock and item requests from ``direct``; botocore only when something needs it."""
    from .items import ItemTransport, lean_items_allowed

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
    """botocore clients made on first use: the caller's, and the lock client."""

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
