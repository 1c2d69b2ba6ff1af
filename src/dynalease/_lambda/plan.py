"""The decoration's part of the Lambda middleware: a :class:`LockPlan` built (and so checked)
when ``lock_handler`` or ``lock_record`` decorates. It imports neither the client, the lock
nor the engine's lease: each invocation's :class:`~.holding.Holding` does (:mod:`.holding`).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._engine.protocol import check_durations, check_table_name
from .._keyset import KeysTemplate
from ..constants import ENV_TABLE
from ..keys import KeyTemplate, permit_keys
from .budget import invocation_lease
from .fields import EventKeys
from .report import Reporter

if TYPE_CHECKING:
    from ..client import DynamoDBClient
    from ..lock import SyncDistributedLock

__all__ = ["CURRENT_LOCK", "LockPlan"]

CURRENT_LOCK: contextvars.ContextVar[SyncDistributedLock] = contextvars.ContextVar(
    "dynalease_current_lock"
)


def _check_reserve(reserve_time: object) -> float:
    if isinstance(reserve_time, bool) or not isinstance(reserve_time, int | float):
        raise TypeError(
            f"reserve_time must be a number of seconds, got {type(reserve_time).__name__}"
        )
    if not 0 <= reserve_time < float("inf"):
        raise ValueError(
            f"reserve_time must be 0 or more finite seconds (the time the work needs after "
            f"acquiring), got {reserve_time!r}"
        )
    return float(reserve_time)


class LockPlan:
    """Validated options of one decorated handler; a :class:`~.holding.Holding` reads them."""

    __slots__ = (
        "_client",
        "_fencing",
        "_lease_s",
        "_mode",
        "_permits",
        "_reporter",
        "_reserve_s",
        "_table",
        "_wait_s",
        "event_key",
    )

    def __init__(
        self,
        what: str,
        client: DynamoDBClient | None,
        /,
        *,
        table: str | None,
        key: str | None,
        keys: Sequence[str] | None,
        fields: Mapping[str, str] | None,
        lease_duration: float | None,
        wait_timeout: float | None,
        reserve_time: float,
        logger: Any,
        metrics: Any,
        log_key: str | None,
        permits: int,
        fencing: bool,
        mode: str | None = None,
    ) -> None:
        """Check every option of ``lock_handler`` (``what="event"``) or ``lock_record``
        (``"record"``), whose signatures hold the defaults."""
        if key is None and keys is None:
            # Python's own words, as for any missing keyword (keys=[...] is the other way).
            function = "lock_handler" if what == "event" else "lock_record"
            raise TypeError(f"{function}() missing required keyword argument: 'key'")
        if client is not None and not _is_client(client):
            raise TypeError(
                f"client must be a dynalease.DynamoDBClient or None (one shared client "
                f"created on first use), got {type(client).__name__}"
            )
        if table is not None:
            check_table_name(table)
        lease_s, wait_s = check_durations(
            invocation_lease(None) if lease_duration is None else lease_duration,
            0.0 if wait_timeout is None else wait_timeout,
        )
        if not isinstance(fencing, bool):
            raise TypeError(f"fencing must be True or False, got {type(fencing).__name__}")
        self._fencing = fencing
        templates = _templates(key, keys, permits, fencing)
        permit_keys("k", permits)  # the count's checks; each resolved key at call time
        self._permits = permits
        if fencing and permits != 1:
            raise ValueError(
                "fencing=True is for locks: a semaphore's permits carry no fencing token; "
                "pass permits=1 with fencing=True, or leave fencing off"
            )
        self._mode = _check_mode(mode, keys, permits, fencing)
        self._client: DynamoDBClient | None = client
        self._table = table
        self._lease_s: float | None = None if lease_duration is None else lease_s
        self._wait_s: float | None = None if wait_timeout is None else wait_s
        self._reserve_s = _check_reserve(reserve_time)
        self.event_key = EventKeys(templates, fields, what=what)
        self._reporter = Reporter(
            template=" + ".join(each.template for each in templates),
            logger=logger,
            metrics=metrics,
            log_key=log_key,
        )

    def table(self) -> str:
        """The explicit table, else ``DYNALEASE_TABLE``, read per call (tests set it late)."""
        if self._table is not None:
            return self._table
        name = os.environ.get(ENV_TABLE)
        if not name:
            raise ValueError(
                f"no lock table: pass table=... to the decorator or set the {ENV_TABLE} "
                "environment variable (the dynalease LockTable CDK construct sets it)"
            )
        return check_table_name(name, parameter=ENV_TABLE)

    def lease(self, remaining_s: float | None) -> float:
        """``lease_duration``, else sized from the invocation's remaining time."""
        return invocation_lease(remaining_s) if self._lease_s is None else self._lease_s


def _check_mode(
    mode: object, keys: Sequence[str] | None, permits: int, fencing: bool
) -> str | None:
    """``mode``: None (a lock), or "read"/"write" (a read/write lock on the one key)."""
    if mode is None:
        return None
    if mode not in ("read", "write"):
        raise ValueError(f'mode must be "read", "write" or None (a plain lock), got {mode!r}')
    if keys is not None or permits != 1 or fencing:
        raise ValueError(
            f"mode={mode!r} takes a read/write lock on one key: not with keys=[...], permits "
            "or fencing=True (a writer's fencing_token is always there)"
        )
    return str(mode)


def _is_client(client: object) -> bool:
    """``client`` is a DynamoDBClient; a caller that made one has loaded its module."""
    from ..client import DynamoDBClient  # loaded already when ``client`` is one

    return isinstance(client, DynamoDBClient)


def _templates(
    key: str | None, keys: Sequence[str] | None, permits: int, fencing: bool
) -> tuple[KeyTemplate, ...]:
    """The decorator's key template, or its ``keys`` templates (a multi-key lock)."""
    if keys is None:
        return (
            KeyTemplate(cast(str, key)),
        )  # not None: checked first; KeyTemplate checks the type
    if permits != 1 or fencing:
        raise ValueError(
            "keys=[...] takes a multi-key lock: it cannot be a semaphore (permits) or fenced "
            "(fencing=True); pass key=... for those"
        )
    return KeysTemplate(keys, key).templates
