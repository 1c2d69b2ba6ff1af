"""What read/write guards share (the faces are in :mod:`dynalease.rwlock`): the key's
checks, a reader's lease and its metrics, a writer's two lock guards in a row."""

from __future__ import annotations

import time
from typing import Any

from ._calls import GuardOptions, OnLost, Options
from ._engine.protocol import fence_of, wait_left
from ._engine.readers import ReaderLease
from ._engine.shared_rows import WRITER_PREFIX, writer_key
from ._engine.store import Limit
from .client import DynamoDBClient
from .exceptions import GuardReused, LockLost
from .keys import MAX_KEY_BYTES, validate_key
from .lock import DistributedLock, SyncDistributedLock
from .metrics import LockMetrics

__all__ = ["ReadGuard", "ReadOptions", "WriteGuard", "WriteOptions", "rw_key"]

_COUNTS = (
    "conditional_failures",
    "request_failures",
    "wait_timeouts",
    "cleanup_failures",
    "consumed_rcu",
    "consumed_wcu",
    "throttled_requests",
)


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


class ReadOptions(Options):
    """A reader's options, taken alike by read guards and their decorator (`Options`)."""

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
        self._made(self._checked(client, table, lease_duration, wait_timeout, on_lost), key)

    def _made(self, options: GuardOptions, key: str) -> None:
        raise NotImplementedError


class WriteOptions(Options):
    """A writer's options, taken alike by write guards and their decorator (`Options`)."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        table: str,
        key: str,
        lease_duration: float = 30.0,
        wait_timeout: float = 35.0,
        on_lost: OnLost | None = None,
        fair: bool = False,
    ) -> None:
        options = self._checked(client, table, lease_duration, wait_timeout, on_lost)
        self._made(options, key, fair)

    def _made(self, options: GuardOptions, key: str, fair: bool) -> None:
        raise NotImplementedError


class ReadGuard(ReadOptions):
    """What sync and async read guards share."""

    def _made(self, options: GuardOptions, key: str) -> None:
        self._client._check_process()
        self._used = False
        table, lease_s, wait_s, on_lost = options
        self._reader = ReaderLease(
            self._client._parts,
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

    @property
    def metrics(self) -> LockMetrics:
        """A snapshot of this reader's requests, renewals and wait (no capacity figures)."""
        reader = self._reader
        return LockMetrics(
            read_requests=reader.reads,
            write_requests=reader.writes,
            renewals=reader.renewals,
            wait_ms=reader.wait_ms,
            lost=reader.lost is not None,
        )

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


class WriteGuard(WriteOptions):
    """What sync and async write guards share: the writer row, then the lock row."""

    _main_class: type[DistributedLock] | type[SyncDistributedLock]

    def _made(self, options: GuardOptions, key: str, fair: bool) -> None:
        name = rw_key(key)
        self._key, self._options = name, options
        self._gate: Any = self._main_class(
            self._client,
            key=writer_key(name),
            **options._asdict(),
            fencing=True,
            fair=fair,  # writers wait for the writer row in arrival order
        )
        self._main: Any = None
        self._began = 0.0

    @property
    def table(self) -> str:
        """The lock table."""
        return self._options.table

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

    @property
    def metrics(self) -> LockMetrics:
        """Both rows' guards' metrics, summed (the wait is the whole acquisition's)."""
        parts = [self._gate.metrics] + ([] if self._main is None else [self._main.metrics])
        summed: dict[str, Any] = {
            name: sum(getattr(part, name) for part in parts)
            for name in ("read_requests", "write_requests", "renewals", "wait_ms")
        }
        summed |= {name: sum(getattr(part, name) for part in parts) for name in _COUNTS}
        reasons = sorted({reason for part in parts for reason in part.throttling_reasons})
        lost = any(part.lost for part in parts)
        return LockMetrics(**summed, lost=lost, throttling_reasons=tuple(reasons))

    def raise_if_lost(self) -> None:
        """Raise :class:`LockLost` unless both rows are held validly right now."""
        self._gate.raise_if_lost()
        if self._main is None:
            self._gate.raise_if_lost()  # not acquired yet: the gate's error says so
        else:
            self._main.raise_if_lost()

    def _next(self) -> Any:
        """The lock row's guard, waiting only for what is left of ``wait_timeout``."""
        left = wait_left(self._options.wait_timeout, time.monotonic() - self._began)
        options = self._options._replace(wait_timeout=left)
        self._main = self._main_class(self._client, key=self._key, **options._asdict())
        return self._main

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table!r}, key={self.key!r})"
