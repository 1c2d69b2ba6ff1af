"""What an acquisition aims at (:class:`Target`): a lock's and a multi-key lock's.

A target's ``rules`` is a property so that ``attempts`` loads only when an
acquisition needs the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..exceptions import LockNotAcquired
from .base import LeaseCore

if TYPE_CHECKING:
    from .attempts import Rules

__all__ = ["KeyTarget", "KeysTarget", "Target", "gave_up", "not_acquired"]


class Target(Protocol):
    """What an acquisition aims at: its rows, how it reads them, how its errors read."""

    @property
    def rules(self) -> Rules: ...

    #: What the errors name as the key: the lock's (first) key, the semaphore's name.
    name: str
    #: The row the first create goes to.
    first_key: str
    #: Every row aimed at: read while waiting; a release of one by a guard of this
    #: client wakes the waiting acquisition.
    wake_keys: tuple[str, ...]
    #: The error message's advice when the wait runs out.
    advice: str

    def rows(self, key: str) -> tuple[str, ...]:
        """The rows a write aimed at ``key`` writes, ``key`` first: what the guard holds once
        that write wins."""
        ...

    def held(self, owners: tuple[str, ...]) -> str:
        """Who holds the rows, as the error message says it."""
        ...

    def subject(self, table: str) -> str:
        """What was not acquired, as the error message begins."""
        ...


class KeyTarget:
    """A lock's acquisition: one row, paced by ``protocol.contention_poll``."""

    advice = "Retry later or raise wait_timeout"

    def __init__(self, key: str) -> None:
        self.name = self.first_key = key
        self.wake_keys: tuple[str, ...] = (key,)

    @property
    def rules(self) -> Rules:
        from .attempts import LOCK_RULES

        return LOCK_RULES

    def rows(self, key: str) -> tuple[str, ...]:
        return (key,)

    def held(self, owners: tuple[str, ...]) -> str:
        """Other holders' tokens stay out of messages."""
        return "it is held by another owner"

    def subject(self, table: str) -> str:
        return f"lock {self.name!r} in table {table!r} was not acquired"


class KeysTarget:
    """A multi-key guard's acquisition: every row at once, in one transaction, only when
    each is free or stale."""

    advice = "Retry later or raise wait_timeout"

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.name = self.first_key = keys[0]
        self.wake_keys = self.keys = keys

    @property
    def rules(self) -> Rules:
        from .attempts import KEYS_RULES

        return KEYS_RULES

    def rows(self, key: str) -> tuple[str, ...]:
        return self.keys

    def held(self, owners: tuple[str, ...]) -> str:
        count = len(owners)
        return f"{count} of its {len(self.keys)} keys {'is' if count == 1 else 'are'} held"

    def subject(self, table: str) -> str:
        return (
            f"lock on {len(self.keys)} keys (first {self.name!r}) in table {table!r} "
            "was not acquired (nothing was written)"
        )


def gave_up(
    core: LeaseCore,
    target: Target,
    why: str,
    cause: BaseException | None = None,
    kind: type[LockNotAcquired] = LockNotAcquired,
) -> LockNotAcquired:
    """The error (a ``kind``) of ``target``'s acquisition that gave up, for ``why``."""
    return not_acquired(core, f"{target.subject(core.table)}: {why}", target.name, cause, kind)


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
