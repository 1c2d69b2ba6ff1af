"""Plain Python values <-> DynamoDB AttributeValues.

Numbers are stored exactly (a ``float`` through ``Decimal(str(value))``: ``0.1`` as
``0.1``) and come back as ``int`` when integral, else ``float``; binary as ``bytes``.
``decimal`` loads with the first number that needs it: integers never do (nor does a
lock, whose rows hold integers only).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Set
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from decimal import Decimal

__all__ = ["from_attribute", "from_item", "to_attribute", "to_item"]


def to_attribute(value: Any, *, path: str = "value") -> dict[str, Any]:
    """One Python value as an AttributeValue; ``path`` names it in error messages."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if _is_number(value):
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


def _is_number(value: object) -> TypeGuard[int | float | Decimal]:
    """An int, float or Decimal (a bool too: callers that store it as BOOL ask first)."""
    if isinstance(value, int | float):
        return True
    # A Decimal exists only once its module is loaded: no need to load it to ask.
    decimal = sys.modules.get("decimal")
    return decimal is not None and isinstance(value, decimal.Decimal)


def _exact(text: str) -> Decimal:
    """``text`` as a Decimal: the module loads with the first number that needs one."""
    from decimal import Decimal

    return Decimal(text)


def _number(value: int | float | Decimal, path: str) -> str:
    if isinstance(value, int):
        return str(value)
    number = _exact(str(value)) if isinstance(value, float) else value
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
    if all(_is_number(m) and not isinstance(m, bool) for m in members):
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
    try:
        return int(text)  # Decimal reads every text int() reads as the same integer
    except ValueError:
        number = _exact(text)
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
