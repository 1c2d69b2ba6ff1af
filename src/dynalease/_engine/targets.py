"""What an acquisition aims at (:class:`Target`): a lock's and a multi-key lock's.

A target's ``rules`` is a property so that ``attempts`` loads only when an
acquisition needs the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..exceptions import LockNotAcquired
from .base import LeaseCore

if TYPE_CHECKING:
    from .attempts import Item, Rules
    from .requests import Requests

__all__ = ["KeyTarget", "KeysTarget", "Target", "not_acquired"]


class Target(Protocol):
    """What an acquisition aims at: its rows, how it reads them, how its errors read."""

    @property
    def rules(self) -> Rules: ...

    #: The row the first create goes to.
    first_key: str
    #: The rows whose release by a guard of this client wakes a waiting acquisition.
    wake_keys: tuple[str, ...]
    #: The error message's advice when the wait runs out.
    advice: str

    def rows(self, key: str) -> tuple[str, ...]:
        """The rows a write aimed at ``key`` writes, ``key`` first: what the guard holds once
        that write wins."""
        ...

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        """Every row aimed at, strongly consistent (None where there is none)."""
        ...

    def held(self, owners: tuple[str, ...]) -> str:
        """Who holds the rows, as the error message says it."""
        ...

    def not_acquired(
        self,
        core: LeaseCore,
        why: str,
        cause: BaseException | None = None,
        kind: type[LockNotAcquired] = LockNotAcquired,
    ) -> LockNotAcquired:
        """The error (a ``kind``) of an acquisition that gave up, for ``why``."""
        ...


class KeyTarget:
    """A lock's acquisition: one row, paced by ``protocol.contention_poll``."""

    advice = "Retry later or raise wait_timeout"

    def __init__(self, key: str) -> None:
        self.first_key = key
        self.wake_keys: tuple[str, ...] = (key,)

    @property
    def rules(self) -> Rules:
        from .attempts import LOCK_RULES

        return LOCK_RULES

    def rows(self, key: str) -> tuple[str, ...]:
        return (key,)

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        return await requests.read_rows(self.wake_keys, deadline)

    def held(self, owners: tuple[str, ...]) -> str:
        """Other holders' tokens stay out of messages."""
        return "it is held by another owner"

    def not_acquired(
        self,
        core: LeaseCore,
        why: str,
        cause: BaseException | None = None,
        kind: type[LockNotAcquired] = LockNotAcquired,
    ) -> LockNotAcquired:
        subject = f"lock {core.key!r} in table {core.table!r} was not acquired"
        return not_acquired(core, f"{subject}: {why}", core.key, cause, kind)


class KeysTarget:
    """A multi-key guard's acquisition: every row at once, in one transaction, only when
    each is free or stale."""

    advice = "Retry later or raise wait_timeout"

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.first_key = keys[0]
        self.wake_keys = self.keys = keys

    @property
    def rules(self) -> Rules:
        from .attempts import KEYS_RULES

        return KEYS_RULES

    def rows(self, key: str) -> tuple[str, ...]:
        return self.keys

    async def read(self, requests: Requests, deadline: float) -> dict[str, Item | None]:
        return await requests.read_rows(self.keys, deadline)

    def held(self, owners: tuple[str, ...]) -> str:
        count = len(owners)
        return f"{count} of its {len(self.keys)} keys {'is' if count == 1 else 'are'} held"

    def not_acquired(
        self,
        core: LeaseCore,
        why: str,
        cause: BaseException | None = None,
        kind: type[LockNotAcquired] = LockNotAcquired,
    ) -> LockNotAcquired:
        subject = (
            f"lock on {len(self.keys)} keys (first {core.key!r}) in table {core.table!r} "
            "was not acquired (nothing was written)"
        )
        return not_acquired(core, f"{subject}: {why}", core.key, cause, kind)


def not_acquired(
    core: LeaseCore,
    message: str,
    key: str,
    cause: BaseException | None,
    kind: type[LockNotAcquired] = LockNotAcquired,
) -> LockNotAcquired:
    """:class:`LockNotAcquired` (or ``kind``) with ``message``, naming ``key`` and our owner."""
    error = kind(
        message, table=core.table, key=key, owner=core.owner, request_id=core.last_request_id
    )
    error.__cause__ = cause
    return error
