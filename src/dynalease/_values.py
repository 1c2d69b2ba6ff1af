"""Plain Python values <-> DynamoDB AttributeValues.

Numbers are stored exactly (a ``float`` through ``Decimal(str(value))``: ``0.1`` as
``0.1``) and come back as ``int`` when integral, else ``float``; binary as ``bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from decimal import Decimal
from typing import Any

__all__ = ["from_attribute", "from_item", "to_attribute", "to_item"]


def to_attribute(value: Any, *, path: str = "value") -> dict[str, Any]:
    """One Python value as an AttributeValue; ``path`` names it in error messages."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | float | Decimal):
        return {"N": _number(value, path)}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"B": bytes(value)}
    if isinstance(value, Mapping):
        return {"M": _map(value, path)}
    if isinstance(value, list | tuple):
        return {"L": [to_attribute(v, path=f"{path}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, Set):
        return _set(value, path)
    raise TypeError(
        f"{path}: values of type {type(value).__name__} cannot be stored in DynamoDB; "
        "use str, int, float, Decimal, bytes, bool, None, list, dict or a set"
    )


def _number(value: int | float | Decimal, path: str) -> str:
    if isinstance(value, int):
        return str(value)
    number = Decimal(str(value)) if isinstance(value, float) else value
    if not number.is_finite():
        raise ValueError(f"{path}: DynamoDB cannot store {value!r}; use a finite number")
    return str(number)


def _map(value: Mapping[Any, Any], path: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, item in value.items():
        if not isinstance(name, str):
            raise TypeError(f"{path}: map keys must be str, got {type(name).__name__} {name!r}")
        result[name] = to_attribute(item, path=f"{path}.{name}")
    return result


def _set(value: Set[Any], path: str) -> dict[str, Any]:
    if not value:
        raise ValueError(f"{path}: DynamoDB cannot store an empty set; omit the attribute")
    members = list(value)
    if all(isinstance(m, str) for m in members):
        return {"SS": sorted(members)}
    if all(isinstance(m, int | float | Decimal) and not isinstance(m, bool) for m in members):
        return {"NS": [_number(m, path) for m in members]}
    if all(isinstance(m, bytes | bytearray) for m in members):
        return {"BS": sorted(bytes(m) for m in members)}
    raise TypeError(f"{path}: a set must hold only str, only numbers or only bytes")


def to_item(item: Mapping[str, Any], *, name: str = "item") -> dict[str, Any]:
    """A whole item (or key) as AttributeValues."""
    if not isinstance(item, Mapping):
        raise TypeError(
            f"{name} must be a dict of attribute names to values, got {type(item).__name__}"
        )
    return _map(item, name)


def from_attribute(value: Mapping[str, Any]) -> Any:
    """One AttributeValue as a plain Python value."""
    ((tag, data),) = value.items()
    if tag not in _DECODE:
        raise ValueError(f"unknown DynamoDB attribute type {tag!r}")
    return _DECODE[tag](data)


def _from_number(text: str) -> int | float:
    number = Decimal(text)
    if number == number.to_integral_value():
        return int(number)
    return float(number)


_DECODE: dict[str, Callable[[Any], Any]] = {
    "S": lambda data: data,
    "N": _from_number,
    "BOOL": bool,
    "NULL": lambda data: None,
    "B": bytes,
    "M": lambda data: {k: from_attribute(v) for k, v in data.items()},
    "L": lambda data: [from_attribute(v) for v in data],
    "SS": set,
    "NS": lambda data: {_from_number(v) for v in data},
    "BS": lambda data: {bytes(v) for v in data},
}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A whole item as plain Python values."""
    return {name: from_attribute(value) for name, value in item.items()}
