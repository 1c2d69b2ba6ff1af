"""Read/write locks: any number of readers, or one writer, per key; waiting writers first.

Readers hold the key's lock row together (``_engine/shared_rows.py``); a writer holds
the key's writer row (fenced: its token) and then the lock row itself, each an ordinary
lock of the engine. A pydynox 1.8 lock on the key therefore excludes readers and
writers, and any reader or writer keeps pydynox out (docs/locks.md, "Read/write locks").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ParamSpec, Self, TypeVar

from ._calls import guarded_calls
from ._engine.clock import SYSTEM_CLOCK
from ._engine.protocol import fence_of
from ._engine.readers import ReaderLease
from ._engine.shared_rows import WRITER_PREFIX, writer_key
from ._engine.store import Limit
from .client import DynamoDBClient
from .exceptions import GuardReused, LockLost
from .keys import MAX_KEY_BYTES, KeyTemplate, validate_key
from .lock import DistributedLock, OnLost, SyncDistributedLock, _check_options

__all__ = [
    "ReadLock",
    "SyncReadLock",
    "SyncWriteLock",
    "WriteLock",
    "distributed_read_lock",
    "distributed_write_lock",
]

P = ParamSpec("P")
R = TypeVar("R")


def rw_key(key: object) -> str:
    """``key`` checked as a lock key that leaves room for its writer row's prefix."""
    name = validate_key(key)
    if name.startswith(WRITER_PREFIX):
        raise ValueError(
            f"key {name!r} starts with {WRITER_PREFIX!r}, which is reserved for the writer "
            "rows of read/write locks; use another key"
        )
    if len(writer_key(name).encode("utf-8")) > MAX_KEY_BYTES:
        raise ValueError(
            f"key is too long for a read/write lock: its writer row adds {len(WRITER_PREFIX)} "
            f"bytes ({WRITER_PREFIX!r}) and must stay within {MAX_KEY_BYTES} UTF-8 bytes"
        )
    return name


class _ReadGuard:
    """What sync and async read guards share."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        key: str,
        lease_duration: float = 30.0,
        wait_timeout: float = 35.0,
        on_lost: OnLost | None = None,
    ) -> None:
        lease_s, wait_s = _check_options(client, table, lease_duration, wait_timeout, on_lost)
        client._check_process()
        self._client = client
        self._used = False
        self._reader = ReaderLease(
            store=client._lock_store,
            observations=client._observations,
            clock=SYSTEM_CLOCK,
            table=table,
            key=rw_key(key),
            lease_s=lease_s,
            wait_s=wait_s,
            on_lost=on_lost,
        )

    @property
    def table(self) -> str:
        """The lock table."""
        return self._reader.table

    @property
    def key(self) -> str:
        """The key read (its lock row is the one readers hold together)."""
        return self._reader.key

    @property
    def owner(self) -> str:
        """This reader's token in the lock row's ``readers`` set (a UUID4)."""
        return self._reader.owner

    @property
    def requests(self) -> int:
        """Requests this guard sent so far (acquisition, renewals, release)."""
        return self._reader.requests

    @property
    def lost(self) -> bool:
        """True once this reader is known to be out (its renewals stopped being confirmed)."""
        return not self._reader.valid()

    def raise_if_lost(self) -> None:
        """Raise :class:`LockLost` unless this reader's lease is valid right now."""
        reader = self._reader
        if reader.lost is not None:
            raise reader.lost
        if not reader.valid():
            raise LockLost(
                f"read lock {reader.key!r} in table {reader.table!r} is not held",
                table=reader.table,
                key=reader.key,
                owner=reader.owner,
            )

    def _begin(self) -> None:
        if self._used:
            raise GuardReused(
                f"this read guard for {self.key!r} was already used; guards are single use: "
                "create a new guard"
            )
        self._used = True

    def _ended(self, exc: BaseException | None) -> None:
        """After the release: a reader lost while the body ran fails the block."""
        if exc is None and self._reader.lost is not None:
            raise self._reader.lost

    async def _writer_token(self) -> int | None:
        reader = self._reader
        limit = Limit(reader.lease_s / 3, lambda late: None)
        reply = await reader.store.read(reader.table, writer_key(reader.key), limit)
        item = reply.item
        if item is None:
            return None
        return fence_of(item, table=reader.table, key=writer_key(reader.key))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table!r}, key={self.key!r})"


class ReadLock(_ReadGuard):
    """An async context manager holding a key for reading, beside other readers.

    Any number of readers hold a key at once; a writer waits until they have left,
    and while it waits no new reader enters. A pydynox lock on the key keeps readers
    out, and readers keep it out. Every guard of a key must use the same
    ``lease_duration``.

    Example::

        async with ReadLock(client, table="locks", key="tenant:42:config"):
            config = await load_config()
    """

    async def __aenter__(self) -> Self:
        self._begin()
        await self._client._runtime().run_async(self._reader.acquire())
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        await self._client._runtime().run_async(self._reader.release(), shield=True)
        self._ended(exc)

    async def writer_token(self) -> int | None:
        """The fencing token of the key's latest writer (None if no writer ever held it);
        one read."""
        return await self._client._runtime().run_async(self._writer_token())


class SyncReadLock(_ReadGuard):
    """The sync form of :class:`ReadLock`.

    Example::

        with SyncReadLock(client, table="locks", key="tenant:42:config"):
            config = load_config()
    """

    def __enter__(self) -> Self:
        self._begin()
        self._client._runtime().run(self._reader.acquire())
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self._client._runtime().run(self._reader.release())
        self._ended(exc)

    def writer_token(self) -> int | None:
        """The fencing token of the key's latest writer (None if no writer ever held it);
        one read."""
        return self._client._runtime().run(self._writer_token())


class _WriteGuard:
    """What sync and async write guards share: the writer row, then the lock row."""

    _main_class: type[DistributedLock] | type[SyncDistributedLock]

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        key: str,
        lease_duration: float = 30.0,
        wait_timeout: float = 35.0,
        on_lost: OnLost | None = None,
    ) -> None:
        lease_s, wait_s = _check_options(client, table, lease_duration, wait_timeout, on_lost)
        name = rw_key(key)
        self._client, self._table, self._key = client, table, name
        self._lease_s, self._wait_s, self._on_lost = lease_s, wait_s, on_lost
        self._gate: Any = self._main_class(
            client,
            table=table,
            key=writer_key(name),
            lease_duration=lease_s,
            wait_timeout=wait_s,
            on_lost=on_lost,
            fencing=True,
        )
        self._main: Any = None
        self._began = 0.0

    @property
    def table(self) -> str:
        """The lock table."""
        return self._table

    @property
    def key(self) -> str:
        """The key written."""
        return self._key

    @property
    def fencing_token(self) -> int:
        """This writer's token: larger than every earlier writer's of this key (the writer
        row's counter); readers see the latest with ``writer_token()``."""
        token: int = self._gate.fencing_token
        return token

    @property
    def lost(self) -> bool:
        """True once either row is known to be lost."""
        return self._gate.lost or (self._main is not None and self._main.lost)

    def raise_if_lost(self) -> None:
        """Raise :class:`LockLost` unless both rows are held validly right now."""
        self._gate.raise_if_lost()
        if self._main is None:
            self._gate.raise_if_lost()  # not acquired yet: the gate's error says so
        else:
            self._main.raise_if_lost()

    def _next(self) -> Any:
        """The lock row's guard, waiting only for what is left of ``wait_timeout``."""
        left = max(0.0, self._wait_s - (time.monotonic() - self._began)) if self._wait_s else 0.0
        self._main = self._main_class(
            self._client,
            table=self._table,
            key=self._key,
            lease_duration=self._lease_s,
            wait_timeout=left,
            on_lost=self._on_lost,
        )
        return self._main

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table!r}, key={self.key!r})"


class WriteLock(_WriteGuard):
    """An async context manager holding a key alone, for writing.

    It first takes the key's writer row (from then on no new reader enters), then the
    key's lock row once the readers in have left. ``fencing_token`` grows with every
    writer.

    Example::

        async with WriteLock(client, table="locks", key="tenant:42:config") as writer:
            await save_config(token=writer.fencing_token)
    """

    _main_class = DistributedLock

    async def __aenter__(self) -> Self:
        self._began = time.monotonic()
        await self._gate.__aenter__()
        try:
            await self._next().__aenter__()
        except BaseException as error:
            await self._gate.__aexit__(type(error), error, None)
            raise
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        try:
            await self._main.__aexit__(exc_type, exc, traceback)
        finally:
            await self._gate.__aexit__(exc_type, exc, traceback)


class SyncWriteLock(_WriteGuard):
    """The sync form of :class:`WriteLock`.

    Example::

        with SyncWriteLock(client, table="locks", key="tenant:42:config") as writer:
            save_config(token=writer.fencing_token)
    """

    _main_class = SyncDistributedLock

    def __enter__(self) -> Self:
        self._began = time.monotonic()
        self._gate.__enter__()
        try:
            self._next().__enter__()
        except BaseException as error:
            self._gate.__exit__(type(error), error, None)
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        try:
            self._main.__exit__(exc_type, exc, traceback)
        finally:
            self._gate.__exit__(exc_type, exc, traceback)


def _decorator(
    name: str,
    async_guard: type[ReadLock] | type[WriteLock],
    sync_guard: type[SyncReadLock] | type[SyncWriteLock],
    client: DynamoDBClient,
    options: dict[str, Any],
    key: str,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    _check_options(
        client,
        options["table"],
        options["lease_duration"],
        options["wait_timeout"],
        options["on_lost"],
    )
    template = KeyTemplate(key)
    if not template.placeholders:
        rw_key(template.resolve({}))
    return guarded_calls(
        name,
        template,
        lambda resolved: async_guard(client, key=resolved, **options),
        lambda resolved: sync_guard(client, key=resolved, **options),
    )


def distributed_read_lock(
    client: DynamoDBClient,
    *,
    table: str,
    key: str,
    lease_duration: float = 30.0,
    wait_timeout: float = 35.0,
    on_lost: OnLost | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run each call of a ``def`` or ``async def`` function as a reader of ``key`` (a
    template over its arguments, as for :func:`~dynalease.distributed_lock`).

    Example::

        @distributed_read_lock(client, table="locks", key="config:{tenant}")
        def read_config(tenant: str) -> None:
            ...
    """
    options = _options(table, lease_duration, wait_timeout, on_lost)
    return _decorator("distributed_read_lock", ReadLock, SyncReadLock, client, options, key)


def distributed_write_lock(
    client: DynamoDBClient,
    *,
    table: str,
    key: str,
    lease_duration: float = 30.0,
    wait_timeout: float = 35.0,
    on_lost: OnLost | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run each call of a ``def`` or ``async def`` function as the writer of ``key``.

    Example::

        @distributed_write_lock(client, table="locks", key="config:{tenant}")
        def write_config(tenant: str) -> None:
            ...
    """
    options = _options(table, lease_duration, wait_timeout, on_lost)
    return _decorator("distributed_write_lock", WriteLock, SyncWriteLock, client, options, key)


def _options(
    table: str, lease_duration: float, wait_timeout: float, on_lost: OnLost | None
) -> dict[str, Any]:
    return {
        "table": table,
        "lease_duration": lease_duration,
        "wait_timeout": wait_timeout,
        "on_lost": on_lost,
    }
