"""Key templates: ``"customer:{customer_id}"`` bound to a function's arguments.

With more than one placeholder each value is framed as
``<UTF-8 byte length>:<value>``, so ``"{tenant}:{id}"`` with ``"acme"`` and
``"123"`` is ``"4:acme:3:123"`` and no choice of values can collide.
``{{`` and ``}}`` are literal braces. Resolved keys are 1..2,048 UTF-8 bytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_KEY_BYTES", "BoundKey", "KeyTemplate", "validate_key"]

MAX_KEY_BYTES = 2048


def validate_key(key: object, *, parameter: str = "key") -> str:
    """Check a resolved lock key: a str of 1..2,048 UTF-8 bytes."""
    if not isinstance(key, str):
        raise TypeError(f"{parameter} must be a str, got {type(key).__name__}; convert it first")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{parameter} {key!r} is not valid UTF-8 text") from None
    if not 1 <= size <= MAX_KEY_BYTES:
        raise ValueError(
            f"{parameter} must be 1..{MAX_KEY_BYTES} UTF-8 bytes, got {size} bytes; "
            "use a shorter key (for example a hash of long identifiers)"
        )
    return key


def _parse(template: str) -> list[tuple[bool, str]]:
    """Split a template into (is_placeholder, text) segments."""
    segments: list[tuple[bool, str]] = []
    literal: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char == "{" and template.startswith("{{", i):
            literal.append("{")
            i += 2
        elif char == "}" and template.startswith("}}", i):
            literal.append("}")
            i += 2
        elif char == "{":
            end = template.find("}", i)
            if end < 0:
                raise ValueError(
                    f"key template {template!r} has an unmatched '{{'; write '{{{{' for a brace"
                )
            name = template[i + 1 : end]
            if not name.isidentifier():
                raise ValueError(
                    f"key template {template!r} has placeholder {{{name}}}: placeholders must be "
                    "argument names like {customer_id}, without formats, indexes or attributes"
                )
            if literal:
                segments.append((False, "".join(literal)))
                literal = []
            segments.append((True, name))
            i = end + 1
        elif char == "}":
            raise ValueError(
                f"key template {template!r} has an unmatched '}}'; write '}}}}' for a brace"
            )
        else:
            literal.append(char)
            i += 1
    if literal:
        segments.append((False, "".join(literal)))
    return segments


class KeyTemplate:
    """A parsed key template; parsing errors are raised at construction."""

    def __init__(self, template: str) -> None:
        if not isinstance(template, str):
            raise TypeError(f"key must be a str template, got {type(template).__name__}")
        self.template = template
        self._segments = _parse(template)
        names = [text for is_name, text in self._segments if is_name]
        self._framed = len(names) > 1
        self.placeholders: tuple[str, ...] = tuple(dict.fromkeys(names))

    def resolve(self, values: Mapping[str, object]) -> str:
        """The key for these placeholder values (each must be a str)."""
        parts: list[str] = []
        for is_name, text in self._segments:
            if not is_name:
                parts.append(text)
                continue
            if text not in values:
                raise ValueError(f"key template {self.template!r} needs a value for {{{text}}}")
            value = values[text]
            if not isinstance(value, str):
                raise TypeError(
                    f"placeholder {{{text}}} got {type(value).__name__} {value!r}; "
                    "convert it to str before calling"
                )
            parts.append(
                f"{len(value.encode('utf-8', 'surrogatepass'))}:{value}" if self._framed else value
            )
        return validate_key("".join(parts))

    def bind(self, function: Callable[..., Any]) -> BoundKey:
        """Bind to a function's parameters; unknown placeholders fail here."""
        return BoundKey(self, function)

    def __repr__(self) -> str:
        return f"KeyTemplate({self.template!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyTemplate) and other.template == self.template

    def __hash__(self) -> int:
        return hash(self.template)


class BoundKey:
    """A template bound to one function's signature, resolved on every call."""

    def __init__(self, template: KeyTemplate, function: Callable[..., Any]) -> None:
        self.template = template
        self._name = getattr(function, "__qualname__", repr(function))
        self._signature = inspect.signature(function)
        direct = {
            name
            for name, parameter in self._signature.parameters.items()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        }
        for name in template.placeholders:
            if name not in direct:
                raise ValueError(
                    f"key template {template.template!r} uses {{{name}}}, which is not an "
                    f"argument of {self._name}{self._signature}; use one of {sorted(direct)}"
                )

    def resolve(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key for one call's arguments."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self._name}(): {error}") from None
        bound.apply_defaults()
        return self.template.resolve(bound.arguments)
