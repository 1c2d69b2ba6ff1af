"""Key templates: ``"customer:{customer_id}"`` bound to a function's arguments.

A template is parsed once, when a function is decorated, so template mistakes
surface at import time rather than on the first call. Resolving runs on every
call and before any request, so argument mistakes fail the way Python itself
would fail a bad call, without touching DynamoDB.

With more than one placeholder each value is framed as
``<UTF-8 byte length>:<value>``: ``"{tenant}:{id}"`` with ``"acme"`` and
``"123"`` is ``"4:acme:3:123"``. ``{{`` and ``}}`` are literal braces. Resolved
keys are 1..2,048 UTF-8 bytes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sized
from typing import Any

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_PERMITS",
    "PERMIT_PREFIX",
    "BoundKey",
    "KeyTemplate",
    "permit_keys",
    "validate_key",
]

MAX_KEY_BYTES = 2048
"""Largest resolved key, in UTF-8 bytes (DynamoDB's limit for a partition key)."""

PERMIT_PREFIX = "dynalease-permit:"
"""Reserved for semaphore permit rows (``dynalease-permit:<i>:<key>``): no lock key starts so."""

RESULT_PREFIX = "dynalease-result:"
"""Reserved for single-flight result items (``dynalease-result:<key>``): no lock key starts so."""

MAX_PERMITS = 100
"""Most permits a semaphore may have: one ``BatchGetItem`` reads at most 100 rows."""

#: A template's tokens: an escaped brace, a placeholder (perhaps unclosed), a lone '}'.
_TOKEN = re.compile(r"\{\{|\}\}|\{[^}]*\}?|\}")

_DIRECT_KINDS = frozenset(
    {
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    }
)


def _describe(value: object) -> str:
    """``"dict of 3 items"``: the type and size of a value, never the value itself.

    Values reach messages from events and rows (a card number, a customer's name), and
    messages reach the invoker and the logs; a number's digits may be just such data.
    """
    if value is None:
        return "None"
    name = type(value).__name__
    unit = "character" if isinstance(value, str) else "item"
    if isinstance(value, bytes | bytearray | memoryview):
        unit = "byte"
    try:
        size = len(value) if isinstance(value, Sized) else None
    except Exception:  # a __len__ that fails: the type is enough
        size = None
    if size is None:
        return name
    return f"{name} of {size} {unit}{'' if size == 1 else 's'}"


def _convert_hint(value: object) -> str:
    """What to do about a non-``str`` key value; ``str(None)`` would be the key "None"."""
    if value is None:
        return (
            "the value is missing: pass the identifier the lock is for (str(None) would "
            "lock the literal key 'None', shared by every caller missing it)"
        )
    return "convert it to the text you mean (for example str(order_id)) before calling"


def validate_key(key: object, *, parameter: str = "key") -> str:
    """Return ``key`` if it is a ``str`` of 1..2,048 UTF-8 bytes, else raise.

    Raises ``TypeError`` for a non-``str`` and ``ValueError`` for an empty key, a
    key with lone surrogates (which DynamoDB cannot store) or one that is too long.
    ``parameter`` names the value in the messages.
    """
    if not isinstance(key, str):
        raise TypeError(f"{parameter} must be a str, got {_describe(key)}; {_convert_hint(key)}")
    size = _utf8_size(key, parameter)
    if size == 0:
        raise ValueError(f"{parameter} is empty (0 UTF-8 bytes); a key needs at least 1 byte")
    if size > MAX_KEY_BYTES:
        raise ValueError(
            f"{parameter} is {size} UTF-8 bytes, over the {MAX_KEY_BYTES}-byte limit; "
            "use shorter identifiers or a hash of long ones"
        )
    if key.startswith(PERMIT_PREFIX):
        raise ValueError(
            f"{parameter} {key!r} starts with {PERMIT_PREFIX!r}, which is reserved for "
            "semaphore permit rows (docs/semaphores.md); lock the semaphore's own key with "
            "DistributedSemaphore, or choose a key without that prefix"
        )
    if key.startswith(RESULT_PREFIX):
        raise ValueError(
            f"{parameter} {key!r} starts with {RESULT_PREFIX!r}, which is reserved for "
            "single-flight result items (docs/single-flight.md); choose a key without it"
        )
    return key


def _utf8_size(key: str, parameter: str) -> int:
    try:
        return len(key.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{parameter} is not valid UTF-8 text: lone surrogate {key[error.start]!r} at "
            f"index {error.start}; decode external bytes with errors='replace' first"
        ) from None


def permit_keys(key: object, permits: object) -> tuple[str, ...]:
    """The row keys of a semaphore's permits: ``dynalease-permit:<i>:<key>``, i = 1..permits.

    ``key`` is validated like a lock key (so no lock key can equal a permit
    key) and must leave room for the prefix within the 2,048-byte limit;
    ``permits`` is an ``int`` in 1..100:

        >>> permit_keys("reindex", 2)
        ('dynalease-permit:1:reindex', 'dynalease-permit:2:reindex')
    """
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError(f"permits must be an int, got {_describe(permits)}")
    if not 1 <= permits <= MAX_PERMITS:
        raise ValueError(
            f"permits must be between 1 and {MAX_PERMITS} (one BatchGetItem reads every "
            f"permit), got {permits}"
        )
    name = validate_key(key)
    longest = f"{PERMIT_PREFIX}{permits}:"
    if len(longest.encode("utf-8")) + len(name.encode("utf-8")) > MAX_KEY_BYTES:
        raise ValueError(
            f"key is too long for a semaphore: its permit rows add {len(longest)} bytes "
            f"({longest!r}) and must stay within {MAX_KEY_BYTES} UTF-8 bytes; use a shorter key"
        )
    return tuple(f"{PERMIT_PREFIX}{index}:{name}" for index in range(1, permits + 1))


def _placeholder_problem(name: str) -> str | None:
    """Why ``{name}`` is not an accepted placeholder, or None if it is."""
    if name == "":
        return "an empty placeholder {}; name an argument, e.g. {customer_id}"
    if name.isdigit():
        return f"a positional placeholder {{{name}}}; name an argument instead"
    # str.format features are rejected rather than ignored: silently dropping a
    # conversion or format spec would give another service a different key.
    if "!" in name:
        return f"a conversion in {{{name}}}; conversions are not supported, pass a str"
    if ":" in name:
        return f"a format spec in {{{name}}}; format specs are not supported, pass a str"
    if "." in name or "[" in name:
        return f"attribute or index access in {{{name}}}; pass the value as its own argument"
    if "{" in name:
        return f"an unmatched '{{' before {{{name.rsplit('{', 1)[-1]}}}; write '{{{{' for a brace"
    if not name.isidentifier():
        return f"{{{name}}}, which is not a Python identifier; use an argument name"
    return None


def _parse(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(literals, names)``, interleaved: ``literals[0] names[0] literals[1] ...``."""
    literals: list[str] = []
    names: list[str] = []
    text, start = "", 0
    for token in _TOKEN.finditer(template):
        text += template[start : token.start()]
        start = token.end()
        found = token.group()
        if found in ("{{", "}}"):
            text += found[0]
        elif found == "}":
            raise ValueError(
                f"key template {template!r} has an unmatched '}}'; write '}}}}' for a literal brace"
            )
        else:
            problem = (
                _placeholder_problem(found[1:-1])
                if found.endswith("}")
                else "an unmatched '{'; write '{{' for a literal brace"
            )
            if problem is not None:
                raise ValueError(f"key template {template!r} has {problem}")
            literals.append(text)
            names.append(found[1:-1])
            text = ""
    literals.append(text + template[start:])
    return tuple(literals), tuple(names)


class KeyTemplate:
    """A lock-key template such as ``"customer:{customer_id}"``, parsed on construction.

    Placeholders are ``{name}`` with ``name`` a Python identifier; ``{{`` and
    ``}}`` are literal braces. Anything else ``str.format`` would accept
    (``{}``, ``{0}``, ``{a.b}``, ``{a[0]}``, ``{a!r}``, ``{a:>3}``) is a
    ``ValueError`` here, as are unmatched braces.

    Within one template, different values give different keys. Across templates on one
    table they may not: a single value is placed as given, so ``"customer:{id}"`` with
    ``id="7:invoice"`` is the key of ``"customer:{id}:invoice"`` with ``id="7"``. Give
    each template on a table a literal start that no other's begins with
    (``"customer:{id}"`` and ``"invoice:{id}"``, not ``"customer:{id}:invoice"``).
    Framing single values too would change every existing key, and a deploy that mixed
    old and new keys would let two holders of one lock run at once.
    """

    __slots__ = ("_framed", "_literals", "_names", "_placeholders", "_template")

    def __init__(self, template: str) -> None:
        if not isinstance(template, str):
            raise TypeError(
                f"key template must be a str such as 'customer:{{customer_id}}', "
                f"got {_describe(template)}"
            )
        self._template = template
        self._literals, self._names = _parse(template)
        # One value cannot collide with anything, so it stays readable; with two
        # or more, framing is what keeps ("a:b", "c") and ("a", "b:c") apart.
        self._framed = len(self._names) > 1
        self._placeholders = tuple(dict.fromkeys(self._names))

    @property
    def template(self) -> str:
        """The template text as given."""
        return self._template

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Distinct placeholder names, in order of first appearance."""
        return self._placeholders

    def resolve(self, values: Mapping[str, object]) -> str:
        """Return the key for ``values``, which must map every placeholder to a ``str``.

        A missing placeholder is a ``ValueError``, a non-``str`` value a
        ``TypeError``; the resolved key must be 1..2,048 UTF-8 bytes.
        """
        literals = self._literals
        parts = [literals[0]]
        for index, name in enumerate(self._names, 1):
            try:
                value = values[name]
            except KeyError:
                raise ValueError(
                    f"key template {self._template!r} needs a value for placeholder {{{name}}}"
                ) from None
            if not isinstance(value, str):
                # No implicit str(): 123 and "123" or 1.0 and "1.0" must not be
                # left to each caller's formatting to agree on.
                raise TypeError(
                    f"placeholder {{{name}}} got {_describe(value)}; {_convert_hint(value)}"
                )
            if self._framed:
                size = _utf8_size(value, f"placeholder {{{name}}}")
                parts.append(f"{size}:{value}")
            else:
                parts.append(value)
            parts.append(literals[index])
        return validate_key("".join(parts), parameter=f"key from template {self._template!r}")

    def bind(self, function: Callable[..., Any]) -> BoundKey:
        """Bind to ``function``'s parameters; see `BoundKey`."""
        return BoundKey(self, function)

    def __repr__(self) -> str:
        return f"KeyTemplate({self._template!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyTemplate):
            return NotImplemented
        return self._template == other._template

    def __hash__(self) -> int:
        return hash(self._template)


class BoundKey:
    """A key template bound to one function's signature, built at decoration time.

    Every placeholder must name a parameter that can be passed by position or
    keyword; ``*args`` and ``**kwargs`` parameters do not count. The signature is
    read once with `inspect.signature`, which follows ``__wrapped__`` and
    leaves ``self`` out of bound methods.
    """

    __slots__ = ("_defaults", "_name", "_signature", "_template")

    def __init__(self, template: KeyTemplate, function: Callable[..., Any]) -> None:
        self._template = template
        self._name: str = getattr(function, "__qualname__", None) or repr(function)
        try:
            self._signature = inspect.signature(function)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"key template {template.template!r} cannot be bound to {self._name}: "
                f"its signature is not readable ({error})"
            ) from None
        parameters = self._signature.parameters
        for name in template.placeholders:
            parameter = parameters.get(name)
            if parameter is None or parameter.kind not in _DIRECT_KINDS:
                why = "is not a parameter of" if parameter is None else "is the variadic *name of"
                direct = [each for each, p in parameters.items() if p.kind in _DIRECT_KINDS]
                raise ValueError(
                    f"key template {template.template!r} uses {{{name}}}, which {why} "
                    f"{self._name}{self._signature}; placeholders must be direct argument "
                    f"names, one of {direct}"
                )
        # Only the defaults a placeholder can need, so a call does not pay for
        # BoundArguments.apply_defaults() filling in every other parameter.
        self._defaults = {
            name: parameters[name].default
            for name in template.placeholders
            if parameters[name].default is not inspect.Parameter.empty
        }

    @property
    def template(self) -> KeyTemplate:
        """The template this key resolves."""
        return self._template

    @property
    def signature(self) -> inspect.Signature:
        """The function's signature, as read at bind time."""
        return self._signature

    def resolve(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """Return the key for one call of the function with ``args`` and ``kwargs``.

        Arguments the function would not accept raise ``TypeError`` naming the
        function, as calling it would, before any request is made.
        """
        try:
            arguments = self._signature.bind(*args, **kwargs).arguments
        except TypeError as error:
            raise TypeError(f"{self._name}(): {error}") from None
        defaults = self._defaults
        # A placeholder absent after a successful bind has a default: required
        # parameters are always bound, and variadic ones were refused in __init__.
        values = {
            name: arguments[name] if name in arguments else defaults[name]
            for name in self._template.placeholders
        }
        return self._template.resolve(values)

    def __repr__(self) -> str:
        return f"BoundKey({self._template.template!r}, {self._name})"
