"""Read/write locks: any number of readers, or one writer, per key; waiting writers first.

Readers hold the key's lock row together (``_engine/shared_rows.py``); a writer holds
the key's writer row (fenced: its token) and then the lock row itself, each an ordinary
lock of the engine. A pydynox 1.8 lock on the key therefore excludes readers and
writers, and any reader or writer keeps pydynox out (docs/rwlocks.md).
"""

from __future__ import annotations

import time
from typing import Self

from ._calls import GuardedCalls, GuardOptions
from ._rwguards import ReadGuard, ReadOptions, WriteGuard, WriteOptions, rw_key
from .keys import KeyTemplate
from .lock import DistributedLock, SyncDistributedLock

__all__ = [
    "ReadLock",
    "SyncReadLock",
    "SyncWriteLock",
    "WriteLock",
    "distributed_read_lock",
    "distributed_write_lock",
]


class ReadLock(ReadGuard):
    """An async context manager holding a key for reading, beside other readers.

    Any number of readers hold a key at once; a writer waits until they have left,
    and while it waits no new reader enters. A pydynox lock on the key keeps readers
    out, and readers keep it out. Every guard of a key must use the same
    ``lease_duration``.

    For example:

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
        """The fencing token of the key's latest writer, in one read.

        None if no writer ever held the key.
        """
        return await self._client._runtime().run_async(self._writer_token())


class SyncReadLock(ReadGuard):
    """The sync form of `ReadLock`.

    For example:

        with SyncReadLock(client, table="locks", key="tenant:42:config"):
            config = load_config()
    """

    def __enter__(self) -> Self:
        return self._enter()

    def _enter(self, attempt_cap: float | None = None) -> Self:
        """Acquire; ``attempt_cap``: as for the lock guard's (the Lambda middleware's)."""
        self._reader.single_cap = attempt_cap
        self._begin()
        self._client._runtime().run(self._reader.acquire())
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self._client._runtime().run(self._reader.release())
        self._ended(exc)

    def writer_token(self) -> int | None:
        """The fencing token of the key's latest writer, in one read.

        None if no writer ever held the key.
        """
        return self._client._runtime().run(self._writer_token())


class WriteLock(WriteGuard):
    """An async context manager holding a key alone, for writing.

    It first takes the key's writer row (from then on no new reader enters), then the
    key's lock row once the readers in have left. ``fencing_token`` grows with every
    writer.

    For example:

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


class SyncWriteLock(WriteGuard):
    """The sync form of `WriteLock`.

    For example:

        with SyncWriteLock(client, table="locks", key="tenant:42:config") as writer:
            save_config(token=writer.fencing_token)
    """

    _main_class = SyncDistributedLock

    def __enter__(self) -> Self:
        return self._enter()

    def _enter(self, attempt_cap: float | None = None) -> Self:
        """Acquire both rows; ``attempt_cap``: as for the lock guard's (the middleware's)."""
        self._began = time.monotonic()
        self._gate._enter(attempt_cap)
        try:
            self._next()._enter(attempt_cap)
        except BaseException as error:
            self._gate.__exit__(type(error), error, None)
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        try:
            self._main.__exit__(exc_type, exc, traceback)
        finally:
            self._gate.__exit__(exc_type, exc, traceback)


class distributed_read_lock(ReadOptions, GuardedCalls):
    """Run each call of a ``def`` or ``async def`` function as a reader of ``key``.

    Takes the options of `SyncReadLock`. ``key`` is a template over the function's
    arguments, as for `distributed_lock`.

    For example:

        @distributed_read_lock(client, table="locks", key="config:{tenant}")
        def read_config(tenant: str) -> None:
            ...
    """

    _guards = (ReadLock, SyncReadLock)

    def _made(self, options: GuardOptions, key: str) -> None:
        self._template = _template(key)
        self._keywords = options._asdict()


class distributed_write_lock(WriteOptions, GuardedCalls):
    """Run each call of a ``def`` or ``async def`` function as the writer of ``key``.

    Takes the options of `SyncWriteLock` (``fair=True``: writers in arrival order).

    For example:

        @distributed_write_lock(client, table="locks", key="config:{tenant}")
        def write_config(tenant: str) -> None:
            ...
    """

    _guards = (WriteLock, SyncWriteLock)

    def _made(self, options: GuardOptions, key: str, fair: bool) -> None:
        self._template = _template(key)
        self._keywords = options._asdict() | {"fair": fair}


def _template(key: str) -> KeyTemplate:
    """``key`` as a template; a fixed key is checked whole now, a template at each call."""
    template = KeyTemplate(key)
    if not template.placeholders:
        rw_key(template.resolve({}))
    return template
