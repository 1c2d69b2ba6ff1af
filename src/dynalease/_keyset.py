"""A multi-key lock's ``keys=[...]``: 1..100 distinct keys (one ``TransactWriteItems``
writes them all), each checked like a lock's ``key`` and, for a decorator, a template."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .keys import BoundKey, KeyTemplate, validate_key

__all__ = ["MAX_KEYS", "BoundKeys", "KeysTemplate", "key_set"]

#: DynamoDB's limit on the actions of one transaction: a guard writes one row per key.
MAX_KEYS = 100


def key_set(key: object, keys: object, *, fencing: bool = False) -> tuple[str, ...]:
    """The keys a guard holds: ``(key,)``, or every one of ``keys``, checked."""
    if keys is None:
        return (validate_key(key),)
    if key is not None:
        raise ValueError(
            "pass either key=... or keys=[...], not both; a multi-key lock takes its first "
            "key as one of keys"
        )
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        raise TypeError(
            f"keys must be a list or tuple of str keys, got {type(keys).__name__}; "
            "for one key pass key=... instead"
        )
    if not keys:
        raise ValueError("keys is empty; a multi-key lock needs 1 to 100 keys")
    if len(keys) > MAX_KEYS:
        raise ValueError(
            f"keys has {len(keys)} keys, over the limit of {MAX_KEYS} (one DynamoDB "
            "transaction writes at most 100 rows); split the work or lock a coarser key"
        )
    checked = tuple(
        validate_key(entry, parameter=f"keys[{index}]") for index, entry in enumerate(keys)
    )
    seen: dict[str, int] = {}
    for index, entry in enumerate(checked):
        if entry in seen:
            # Indices only: a key resolved from an event may be personal data.
            raise ValueError(
                f"keys[{index}] repeats keys[{seen[entry]}]; each key may appear once in a "
                "multi-key lock"
            )
        seen[entry] = index
    if fencing and len(checked) > 1:
        raise ValueError(
            "fencing=True is not available with several keys: a fencing token orders one "
            "key's owners; lock the key your storage checks tokens for with a guard of its own"
        )
    return checked


class KeysTemplate:
    """The ``keys`` of a decorator: one :class:`KeyTemplate` per entry."""

    def __init__(self, keys: object, key: object = None) -> None:
        if key is not None:
            key_set(key, keys)  # raises: key and keys together
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
            raise TypeError(
                f"keys must be a list or tuple of key templates, got {type(keys).__name__}"
            )
        if not 1 <= len(keys) <= MAX_KEYS:
            raise ValueError(f"keys must hold 1 to {MAX_KEYS} key templates, got {len(keys)}")
        self.templates = tuple(KeyTemplate(entry) for entry in keys)

    def bind(self, function: Callable[..., Any]) -> BoundKeys:
        return BoundKeys(tuple(template.bind(function) for template in self.templates))


class BoundKeys:
    """Every template of a decorator's ``keys``, bound to one function."""

    def __init__(self, bound: tuple[BoundKey, ...]) -> None:
        self._bound = bound

    def resolve(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
        return key_set(None, [bound.resolve(args, kwargs) for bound in self._bound])
