"""DynamoDBClient: AWS configuration, item helpers, and the state locks share.

One client per process is the intended use: it carries the observation cache
that lets repeated short waits recover an abandoned lock, and two transports made
from the same AWS configuration: one for your own requests (item and table helpers,
transactions; botocore's retry rule) and one for the lock protocol (no SDK retries,
bounded timeouts; the protocol retries on its own schedule). Both send over
``http.client`` themselves where they can (the direct path, no botocore client at
all), and through a botocore client where only botocore can (``_transport/``).
"""

from __future__ import annotations

import inspect
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ._engine import runtime as _process
from ._engine.clock import SYSTEM_CLOCK
from ._engine.journal_switch import process_journal
from ._engine.lease import Lease, LeaseSpec
from ._engine.observations import Observations
from ._engine.permits import PermitTarget
from ._engine.protocol import check_table_name
from ._engine.runtime import Runtime, get_runtime
from ._engine.spec import ClientParts
from ._engine.store import LockStore, Request, Transport
from ._engine.targets import KeysTarget
from ._redact import shown_url
from ._transport import factory  # the lock request path: every client's construction needs it
from ._transport.config import configured_endpoint
from ._values import from_item, to_item
from .exceptions import ForkedProcessError, LockLost, TableNotFoundError

if TYPE_CHECKING:
    import boto3
    from botocore.client import BaseClient

__all__ = ["DynamoDBClient"]

T = TypeVar("T")
P = ParamSpec("P")
_KEY_TYPES = {"S", "N", "B"}
_TABLE_WAIT_S = 300.0


def _async_form(
    sync: Callable[Concatenate[DynamoDBClient, P], T],
) -> Callable[Concatenate[DynamoDBClient, P], Coroutine[Any, Any, T]]:
    """The async form of a ``sync_`` item helper: its signature, run on the client's pool."""

    async def helper(self: DynamoDBClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._in_pool(lambda: sync(self, *args, **kwargs))

    helper.__name__ = sync.__name__.removeprefix("sync_")
    helper.__qualname__ = f"DynamoDBClient.{helper.__name__}"
    helper.__doc__ = f"Async form of `{sync.__name__}`."
    helper.__signature__ = inspect.signature(sync)  # type: ignore[attr-defined]  # help(), editors
    return helper


#: Every client of this process, held weakly: SnapStart's hooks reach each one.
_clients: weakref.WeakSet[DynamoDBClient] = weakref.WeakSet()


def live_clients() -> list[DynamoDBClient]:
    """Every client of this process still referred to (SnapStart's hooks)."""
    return list(_clients)


class DynamoDBClient:
    """A DynamoDB connection for locks, transactions and simple item helpers.

    Every option is optional; anything not given comes from the standard AWS
    configuration chain (environment variables such as ``AWS_REGION`` and
    ``AWS_ENDPOINT_URL_DYNAMODB``, shared config and credentials files, and
    container, Lambda or instance credentials). Explicit arguments win.

    ``transport`` picks the path lock requests take: ``"lean"`` (the default:
    keep-alive HTTP on the dynalease runtime, signed with the same credentials)
    or ``"boto"`` (botocore); without it, ``DYNALEASE_TRANSPORT`` decides.

    ``region`` may be passed by position, as pydynox allows
    (``DynamoDBClient("eu-west-1")``); every other option is keyword-only.

    For example:

        client = DynamoDBClient(region="eu-west-1")
        if not client.sync_table_exists("locks"):
            client.sync_create_table("locks", partition_key=("key", "S"), wait=True)
    """

    def __init__(
        self,
        region: str | None = None,
        *,
        endpoint_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        session_token: str | None = None,
        profile: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        max_retries: int | None = None,
        transport: str | None = None,
    ) -> None:
        settings = factory.Settings(
            region=region,
            endpoint_url=endpoint_url,
            access_key=access_key,
            secret_key=secret_key,
            session_token=session_token,
            profile=profile,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_retries=max_retries,
            transport=transport,
        )
        self._setup(*factory.from_settings(settings.checked()))

    # --- construction -----------------------------------------------------

    @classmethod
    def from_session(
        cls,
        session: boto3.Session,
        *,
        endpoint_url: str | None = None,
        transport: str | None = None,
    ) -> DynamoDBClient:
        """Use an existing ``boto3.Session`` (its credentials, Region and profile)."""
        client = cls.__new__(cls)
        client._setup(*factory.from_session(session, endpoint_url, transport))
        return client

    @classmethod
    def from_client(cls, dynamodb: BaseClient, *, transport: str | None = None) -> DynamoDBClient:
        """Use an existing boto3/botocore DynamoDB client for your requests.

        Lock requests go through a sibling client with the same Region, endpoint
        and credentials (shared, so refreshes apply to both) but with SDK retries
        off and the protocol's timeouts.
        """
        if getattr(getattr(dynamodb, "meta", None), "service_model", None) is None or (
            dynamodb.meta.service_model.service_name != "dynamodb"
        ):
            raise TypeError(
                "from_client() needs a boto3 DynamoDB client, e.g. boto3.client('dynamodb')"
            )
        client = cls.__new__(cls)
        client._setup(*factory.from_client(dynamodb, transport))
        return client

    def _setup(
        self, items: Transport, locks: Transport, region: str | None, endpoint_url: str | None
    ) -> None:
        self._generation = _process.generation  # see ``_check_process``
        self._items = items
        self._lock_store = LockStore(locks)
        self._observations = Observations()
        self._region = region
        self._endpoint_url = endpoint_url
        self._journal = process_journal()
        #: The leases made here, held weakly: SnapStart's hooks look for a held one.
        self._leases: weakref.WeakSet[Lease] = weakref.WeakSet()
        _clients.add(self)

    # --- shared state -------------------------------------------------------

    @property
    def _parts(self) -> ClientParts:
        """What every guard of this client acts with: its store, observations and clock."""
        return ClientParts(self._lock_store, self._observations, SYSTEM_CLOCK)

    @property
    def region(self) -> str | None:
        """The AWS Region requests go to."""
        return self._region

    @property
    def endpoint_url(self) -> str | None:
        """An explicit endpoint, if one was given (else botocore resolves it)."""
        return self._endpoint_url

    @property
    def _endpoint_in_use(self) -> str | None:
        """Where requests go, for messages.

        `endpoint_url`, else the one configured in the environment
        (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``); None: AWS's endpoint for the
        Region.
        """
        return configured_endpoint(self._endpoint_url)

    def _check_process(self) -> None:
        # The runtime's fork hook bumps the generation in a child: no getpid() per call.
        if _process.generation != self._generation:
            raise ForkedProcessError(
                "this DynamoDBClient was created before fork(); create a new DynamoDBClient "
                "inside the child process (or use the multiprocessing 'spawn' start method)"
            )

    def _runtime(self) -> Runtime:
        self._check_process()
        return get_runtime()

    def _new_lease(
        self,
        table: str,
        key: str,
        lease_s: float,
        wait_s: float,
        on_lost: Callable[[LockLost], object] | None,
        permit_keys: tuple[str, ...] = (),
        fencing: bool = False,
        keys: tuple[str, ...] = (),
        fair: object = False,
        queues: tuple[str, ...] = (),
    ) -> Lease:
        """A lease on ``key``, a semaphore's (``permit_keys``) or a multi-key lock's (``keys``).

        ``fair=True``: its acquisition first waits its turn in the queues of its keys, or of
        ``queues`` (a semaphore's one name for all its permits; docs/fairness.md).
        """
        self._check_process()
        target = KeysTarget(keys) if len(keys) > 1 else None
        lease = Lease(
            store=self._lock_store,
            clock=SYSTEM_CLOCK,
            observations=self._observations,
            key=key,
            target=PermitTarget(key, permit_keys) if permit_keys else target,
            spec=LeaseSpec(
                table, lease_s, wait_s, fencing=fencing, journal=self._journal, on_lost=on_lost
            ),
        )
        if fair is not False:  # the queue's module loads only for a fair guard
            from ._engine.queue import get_in_line

            get_in_line(lease, fair, self._parts, queues)
        self._leases.add(lease)
        return lease

    def _prepare_locks(self) -> None:
        """Do the lock transport's one-time setup now, blocking.

        For a caller that measures its budget (the Lambda middleware): credentials
        and the client can take much of a short one, so it pays before reading the time left.
        """
        if not self._lock_store.blocking_ready():
            self._runtime().run(self._lock_store.prepare())

    def _drop_connections(self) -> None:
        """Close the lock path's idle pooled connections (SnapStart's hooks; no request)."""
        self._lock_store.transport.close()
        self._items.close()

    async def _in_pool(self, function: Callable[[], T]) -> T:
        import asyncio

        runtime = self._runtime()
        return await asyncio.wrap_future(runtime.executor.submit(function))

    # --- item helpers (sync) --------------------------------------------------

    def sync_create_table(
        self,
        name: str,
        partition_key: tuple[str, str] = ("key", "S"),
        sort_key: tuple[str, str] | None = None,
        wait: bool = False,
    ) -> None:
        """Create an on-demand table; with ``wait`` block until it is ACTIVE.

        For locks: ``partition_key=("key", "S")`` and no sort key. Lock
        operations never create tables; do this at deployment time.
        """
        check_table_name(name, parameter="name")
        schema = [("partition_key", partition_key, "HASH")]
        if sort_key is not None:
            schema.append(("sort_key", sort_key, "RANGE"))
        key_schema, definitions = [], []
        for label, spec, role in schema:
            if (
                not isinstance(spec, tuple | list)
                or len(spec) != 2
                or not isinstance(spec[0], str)
                or not spec[0]
                or spec[1] not in _KEY_TYPES
            ):
                raise ValueError(
                    f"{label} must be (attribute_name, type) with type 'S', 'N' or 'B', "
                    f"got {spec!r}"
                )
            key_schema.append({"AttributeName": spec[0], "KeyType": role})
            definitions.append({"AttributeName": spec[0], "AttributeType": spec[1]})
        params = {
            "TableName": name,
            "KeySchema": key_schema,
            "AttributeDefinitions": definitions,
            "BillingMode": "PAY_PER_REQUEST",
        }
        self._check_process()
        self._items.handle(Request("CreateTable", params))
        if wait:
            self._wait_active(name)

    def _wait_active(self, name: str) -> None:
        deadline = time.monotonic() + _TABLE_WAIT_S
        while True:
            description = self._items.handle(Request("DescribeTable", {"TableName": name}))
            if description.get("Table", {}).get("TableStatus") == "ACTIVE":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"table {name!r} did not become ACTIVE within {_TABLE_WAIT_S} s")
            time.sleep(0.5)

    def sync_table_exists(self, name: str) -> bool:
        """True when the table exists (in any status)."""
        check_table_name(name, parameter="name")
        self._check_process()
        try:
            self._items.handle(Request("DescribeTable", {"TableName": name}))
        except TableNotFoundError:
            return False
        return True

    def sync_get_item(
        self, table: str, key: Mapping[str, Any], *, consistent_read: bool = False
    ) -> dict[str, Any] | None:
        """The item with this key as plain Python values, or None when absent."""
        params = {
            "TableName": check_table_name(table),
            "Key": to_item(key, name="key"),
            "ConsistentRead": bool(consistent_read),
        }
        self._check_process()
        item = self._items.handle(Request("GetItem", params)).get("Item")
        return None if item is None else from_item(item)

    def sync_put_item(self, table: str, item: Mapping[str, Any]) -> None:
        """Write an item (plain Python values), replacing any item with the same key."""
        params = {"TableName": check_table_name(table), "Item": to_item(item)}
        self._check_process()
        self._items.handle(Request("PutItem", params))

    def sync_delete_item(self, table: str, key: Mapping[str, Any]) -> None:
        """Delete the item with this key (no error when it is absent)."""
        params = {"TableName": check_table_name(table), "Key": to_item(key, name="key")}
        self._check_process()
        self._items.handle(Request("DeleteItem", params))

    # --- item helpers (async): the sync forms' signatures, run on the pool ----

    create_table = _async_form(sync_create_table)
    table_exists = _async_form(sync_table_exists)
    get_item = _async_form(sync_get_item)
    put_item = _async_form(sync_put_item)
    delete_item = _async_form(sync_delete_item)

    def __repr__(self) -> str:
        endpoint = f", endpoint_url={shown_url(self._endpoint_url)!r}" if self._endpoint_url else ""
        return f"DynamoDBClient(region={self._region!r}{endpoint})"
