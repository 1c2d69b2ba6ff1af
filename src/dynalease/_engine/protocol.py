"""Protocol versions 1 and 2: the lock row, its validation and the timing rules.

Protocol 1 rows match pydynox 1.8's, so both libraries compete for the same lock;
protocol 2 is the fenced row (docs/fencing.md). Every timing rule is a function
here, so the engine and the tests share one definition.
"""

import math
import os
import re
from typing import Any, NamedTuple

from ..exceptions import FencingMismatch, MalformedLockRow

PROTOCOL = 1
#: The fenced rows' protocol: older clients (pydynox 1.8 among them) refuse it.
FENCED_PROTOCOL = 2
MIN_LEASE_MS = 100
MAX_LEASE_MS = 86_400_000
MAX_DURATION_S = 86_400.0
MIN_LEASE_S = 0.1

#: Validity ends at this fraction of the lease unless a renewal is confirmed.
VALIDITY_FRACTION = 0.9
#: An acquisition that completes with less validity left than this fraction of the lease
#: (at least MIN_HANDOVER_S) is refused: ``handover_margin``.
HANDOVER_FRACTION = 0.1
MIN_HANDOVER_S = 0.05
MAX_REQUEST_TIMEOUT_S = 5.0
MAX_RENEW_RETRY_S = 1.0
MAX_ZERO_WAIT_BUDGET_S = 5.0
MAX_CLEANUP_BUDGET_S = 10.0
OBSERVATION_CAPACITY = 4096

KEY_ATTR = "key"
OWNER_ATTR = "owner"
VERSION_ATTR = "version"
LEASE_ATTR = "lease_ms"
PROTOCOL_ATTR = "protocol"
FENCE_ATTR = "fence"
#: Who holds the row, for people (``holder.py``); a map no protocol rule reads.
HOLDER_ATTR = "holder"
ROW_ATTRS = frozenset({KEY_ATTR, OWNER_ATTR, VERSION_ATTR, LEASE_ATTR, PROTOCOL_ATTR})
#: A live fenced row; a free one holds only key, protocol and fence.
FENCED_ROW_ATTRS = ROW_ATTRS | {FENCE_ATTR}
FREE_ROW_ATTRS = frozenset({KEY_ATTR, PROTOCOL_ATTR, FENCE_ATTR})


def new_token() -> str:
    """A fresh owner or version token: UUID4 text, as pydynox writes them.

    Made from 16 random bytes as ``uuid.uuid4()`` makes it, without importing ``uuid``:
    on Python 3.11 and 3.12 that import loads ``platform`` too, about 2 ms of a Lambda
    cold start (benchmarks/layer_cold.py).
    """
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class LockRow(NamedTuple):
    """One lock row as stored in DynamoDB."""

    key: str
    owner: str
    version: str
    lease_ms: int
    protocol: int = PROTOCOL
    #: The fencing counter of a protocol-2 row (None for protocol 1).
    fence: int | None = None
    #: The ``holder`` map written with the row (AttributeValue form); None on rows read.
    holder: dict[str, Any] | None = None

    @property
    def fenced(self) -> bool:
        """True for a protocol-2 (fenced) row."""
        return self.protocol == FENCED_PROTOCOL

    @property
    def identity(self) -> tuple[str, str, int]:
        """What an observer compares: the row is abandoned only if this stays unchanged."""
        return (self.owner, self.version, self.lease_ms)

    def to_item(self) -> dict[str, dict[str, Any]]:
        """The row in DynamoDB's AttributeValue form."""
        item: dict[str, dict[str, Any]] = {
            KEY_ATTR: {"S": self.key},
            OWNER_ATTR: {"S": self.owner},
            VERSION_ATTR: {"S": self.version},
            LEASE_ATTR: {"N": str(self.lease_ms)},
            PROTOCOL_ATTR: {"N": str(self.protocol)},
        }
        if self.holder is not None:
            item[HOLDER_ATTR] = self.holder
        return item


def parse_row(item: dict[str, Any], *, table: str, key: str, protocol: int = PROTOCOL) -> LockRow:
    """Read a stored live row, rejecting anything that is not a well-formed row of ``protocol``.

    A malformed row is never taken over: its writer's timing cannot be trusted.
    """

    def fail(problem: str) -> MalformedLockRow:
        return MalformedLockRow(
            f"lock row {key!r} in table {table!r} is not a dynalease/pydynox protocol-"
            f"{protocol} row ({problem}); it will not be taken over. Check who writes to "
            "this table, and delete the row only when no holder depends on it",
            problem=problem,
            table=table,
            key=key,
        )

    stored = _number(item.get(PROTOCOL_ATTR))
    if stored != protocol:
        if {stored, protocol} == {PROTOCOL, FENCED_PROTOCOL}:
            raise _mismatch(table, key, fenced_row=stored == FENCED_PROTOCOL)
        raise fail(f"protocol is {_describe(item.get(PROTOCOL_ATTR))}, expected {protocol}")
    fence: int | None = None
    if protocol == FENCED_PROTOCOL:
        fence = fence_of(item, table=table, key=key)
    lease_ms = _number(item.get(LEASE_ATTR))
    if lease_ms is None or not MIN_LEASE_MS <= lease_ms <= MAX_LEASE_MS:
        raise fail(
            f"lease_ms is {_describe(item.get(LEASE_ATTR))}, expected an integer "
            f"in {MIN_LEASE_MS}..{MAX_LEASE_MS}"
        )
    owner = _string(item.get(OWNER_ATTR))
    version = _string(item.get(VERSION_ATTR))
    if not owner:
        raise fail(f"owner is {_describe(item.get(OWNER_ATTR))}, expected a non-empty string")
    if not version:
        raise fail(f"version is {_describe(item.get(VERSION_ATTR))}, expected a non-empty string")
    return LockRow(key, owner, version, lease_ms, protocol, fence)


def is_free(item: dict[str, Any] | None) -> bool:
    """True for a free fenced row: protocol 2 with no owner (released, counter kept)."""
    return (
        item is not None
        and OWNER_ATTR not in item
        and _number(item.get(PROTOCOL_ATTR)) == FENCED_PROTOCOL
    )


def fence_of(item: dict[str, Any], *, table: str, key: str) -> int:
    """The fencing counter of a fenced row (live or free): a positive integer, or raise."""
    fence = _number(item.get(FENCE_ATTR))
    if fence is None or fence < 1:
        problem = f"fence is {_describe(item.get(FENCE_ATTR))}, expected a positive integer"
        raise MalformedLockRow(
            f"lock row {key!r} in table {table!r} is a fenced (protocol-2) row whose "
            f"{problem}; it will not be taken over. Fenced rows are never edited by hand: "
            "check who writes to this table",
            problem=problem,
            table=table,
            key=key,
        )
    return fence


def _mismatch(table: str, key: str, *, fenced_row: bool) -> FencingMismatch:
    if fenced_row:
        problem = (
            "it is a fenced (protocol-2) row, written by a lock with fencing=True, and this "
            "lock has fencing off"
        )
        advice = "Open this key with fencing=True too"
    else:
        problem = (
            "it is an unfenced (protocol-1) row, written by pydynox or a dynalease lock "
            "without fencing=True, and this lock has fencing=True"
        )
        advice = "Open this key with fencing=False, or switch every user of the key to fencing=True"
    return FencingMismatch(
        f"lock {key!r} in table {table!r}: {problem}. {advice}; every user of a key must "
        "agree on fencing (docs/fencing.md). The row will not be taken over",
        problem=problem,
        table=table,
        key=key,
    )


def _number(value: Any) -> int | None:
    if not isinstance(value, dict) or set(value) != {"N"} or not isinstance(value["N"], str):
        return None
    text = value["N"].strip()
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def _string(value: Any) -> str | None:
    if not isinstance(value, dict) or set(value) != {"S"} or not isinstance(value["S"], str):
        return None
    return value["S"]


def _describe(value: Any) -> str:
    return "missing" if value is None else repr(value)


# --- names -----------------------------------------------------------------

_TABLE_NAME = re.compile(r"[A-Za-z0-9_.\-]{3,255}")


def check_table_name(table: object, *, parameter: str = "table") -> str:
    """Validate a DynamoDB table name before any request."""
    if not isinstance(table, str):
        raise TypeError(f"{parameter} must be a table name (str), got {type(table).__name__}")
    if not _TABLE_NAME.fullmatch(table):
        raise ValueError(
            f"{parameter} {table!r} is not a valid DynamoDB table name: use 3-255 characters "
            "from letters, digits, '_', '-' and '.'"
        )
    return table


# --- durations -------------------------------------------------------------


def check_durations(lease_duration: object, wait_timeout: object) -> tuple[float, float]:
    """Validate the two durations a lock takes; raise before any request is made."""
    lease = _duration("lease_duration", lease_duration)
    wait = _duration("wait_timeout", wait_timeout)
    if lease < MIN_LEASE_S:
        raise ValueError(
            f"lease_duration must be at least {MIN_LEASE_S} seconds, got {lease!r}; "
            "use a lease that comfortably covers a renewal round trip"
        )
    if wait < 0:
        raise ValueError(f"wait_timeout must be 0 or more seconds, got {wait!r}")
    return lease, wait


def _duration(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{name} must be at most {MAX_DURATION_S:,.0f} seconds, got {value!r}")
    return seconds


def lease_ms(lease_s: float) -> int:
    """The whole milliseconds written to the row."""
    return min(max(round(lease_s * 1000), MIN_LEASE_MS), MAX_LEASE_MS)


def validity_span(lease_s: float) -> float:
    """How long a confirmed write keeps us the owner, measured from when it was sent."""
    return lease_s * VALIDITY_FRACTION


def handover_margin(lease_s: float) -> float:
    """The validity a guard must still have when its acquisition completes, or the row is
    deleted and the acquisition refused: a tenth of the lease, at least 50 ms.

    On a healthy path an answer comes within milliseconds and a new guard has about 0.9 x
    lease left; below a tenth, the answer took over 80% of the lease, and the body would
    start on a guard that one late renewal loses. The floor covers the hops between the
    check and the body's first statement (a thread hand-over, a busy event loop).
    """
    return max(lease_s * HANDOVER_FRACTION, MIN_HANDOVER_S)


def renew_interval(lease_s: float) -> float:
    """Time from one confirmed renewal (its send time) to the next attempt."""
    return lease_s / 3


def renew_retry_interval(lease_s: float) -> float:
    """Pause between renewal attempts after one failed."""
    return min(lease_s / 12, MAX_RENEW_RETRY_S)


def request_timeout(lease_s: float, time_left: float) -> float:
    """The bound on one request: never past the caller's deadline."""
    return max(0.0, min(time_left, lease_s / 3, MAX_REQUEST_TIMEOUT_S))


def wait_left(wait_s: float, waited: float) -> float:
    """What is left of a ``wait_timeout`` of ``wait_s`` after ``waited`` seconds, for a guard
    taken after a first wait (a writer's lock row, a fair guard's): 0 stays one attempt."""
    return max(0.0, wait_s - waited) if wait_s else 0.0


def zero_wait_budget(lease_s: float) -> float:
    """Network budget of a ``wait_timeout=0`` call: one attempt, bounded requests."""
    return min(0.6 * lease_s, MAX_ZERO_WAIT_BUDGET_S)


def cleanup_budget(lease_s: float) -> float:
    """Total time release may take, including reconciliation."""
    return min(0.6 * lease_s, MAX_CLEANUP_BUDGET_S)


def poll_cap(lease_s: float) -> float:
    """The longest pause between contention polls: quick hand-over, bounded read rate."""
    return min(max(lease_s / 10, 0.05), 1.0)


def fastest_poll(lease_s: float) -> float:
    """The shortest pause between a waiter's reads: lease/30, within 50 ms - 1 s."""
    return min(max(lease_s / 30, 0.05), poll_cap(lease_s))


def contention_poll(lease_s: float, last: float | None, unchanged: bool, waited: float) -> float:
    """The pause before a waiter's next read (docs/locks.md, "Acquisition").

    A long waiter, the one most likely to be alone when the key frees, reads most
    often, which keeps the waiters' combined read rate even as they thin out.
    """
    cap = poll_cap(lease_s)
    if last is not None and unchanged:
        return min(last * 1.6, cap)
    return max(fastest_poll(lease_s), cap / (1 + waited / cap))
