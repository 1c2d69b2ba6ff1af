"""A single-flight call's stored outcome: the result item beside its lock row.

One item per key, ``dynalease-result:<key>`` in the lock table (never a lock row: the
lock protocol neither reads nor writes it), holding the holder's value, serialized, or
its error's type and message, with the wall time it was stored and a DynamoDB TTL
attribute (:data:`EXPIRES_ATTRIBUTE`) for clean-up. Freshness is read from
``stored_at``, never from TTL, which deletes on its own schedule.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .keys import MAX_KEY_BYTES, RESULT_PREFIX

__all__ = [
    "EXPIRES_ATTRIBUTE",
    "ITEM_LIMIT",
    "JSONSerializer",
    "Outcome",
    "Serializer",
    "result_key",
]

#: The TTL attribute of result items (epoch seconds): enable TTL on it, and only on it.
EXPIRES_ATTRIBUTE = "dynalease_expires"

#: DynamoDB's item size limit, in bytes (names and values, UTF-8).
ITEM_LIMIT = 400 * 1024

#: How long past its ``result_ttl`` an item is left to TTL: waiters still draining read it.
_KEEP_S = 3600

#: A number's size in DynamoDB's item size rule, at most.
_NUMBER_BYTES = 21

#: The most of a holder's error message an item keeps.
_MESSAGE_CHARS = 2000


@runtime_checkable
class Serializer(Protocol):
    """Turns results into ``str`` or ``bytes`` and back (``json`` and ``pickle`` fit)."""

    def dumps(self, value: Any, /) -> str | bytes:
        """The stored form of ``value``."""
        ...

    def loads(self, data: Any, /) -> Any:
        """The value back from its stored form."""
        ...


class JSONSerializer:
    """The default serializer: compact JSON text (``str``, numbers, lists, dicts, ``None``)."""

    def dumps(self, value: Any, /) -> str:
        """``value`` as compact JSON; ``TypeError`` for what JSON cannot hold."""
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    def loads(self, data: Any, /) -> Any:
        """The value of JSON text."""
        return json.loads(data)


def result_key(key: str) -> str:
    """The result item's key for the lock ``key``; ``ValueError`` if too long for DynamoDB."""
    item_key = RESULT_PREFIX + key
    if len(item_key.encode("utf-8")) > MAX_KEY_BYTES:
        raise ValueError(
            f"key is too long for single flight: its result item adds {len(RESULT_PREFIX)} "
            f"bytes ({RESULT_PREFIX!r}) and must stay within {MAX_KEY_BYTES}; use a shorter key"
        )
    return item_key


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a holder left: its value's stored form (``data``), or its error."""

    stored_at: float
    data: str | bytes | None = None
    error_type: str | None = None
    error_message: str | None = None

    @property
    def failed(self) -> bool:
        """True when the holder raised."""
        return self.error_type is not None

    def item(self, key: str, result_ttl: float) -> dict[str, Any]:
        """The result item for the lock ``key``, with its TTL attribute."""
        item: dict[str, Any] = {
            "key": result_key(key),
            "stored_at": self.stored_at,
            EXPIRES_ATTRIBUTE: math.ceil(self.stored_at + result_ttl) + _KEEP_S,
        }
        if self.failed:
            item["error_type"] = self.error_type
            item["error_message"] = (self.error_message or "")[:_MESSAGE_CHARS]
        else:
            item["data"] = self.data
        return item

    @classmethod
    def of_item(cls, item: dict[str, Any]) -> Outcome:
        """The outcome an item holds."""
        return cls(
            stored_at=float(item["stored_at"]),
            data=item.get("data"),
            error_type=item.get("error_type"),
            error_message=item.get("error_message"),
        )


def item_size(item: dict[str, Any]) -> int:
    """The item's size by DynamoDB's rule (names and values; numbers at their largest)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode("utf-8"))
        if isinstance(value, str):
            size += len(value.encode("utf-8"))
        elif isinstance(value, bytes):
            size += len(value)
        else:
            size += _NUMBER_BYTES
    return size
