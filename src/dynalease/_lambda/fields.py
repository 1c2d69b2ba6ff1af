"""Lock keys from Lambda events: ``distributed_lock``'s key templates, each placeholder read
by a ``fields`` JMESPath expression, else from the top-level event key of its name
(``{tenant_id}``: ``context.tenant_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Powertools' own package (which the middleware imports first) loads jmespath and its
# function table for its Logger, so importing them here costs nothing more.
import jmespath  # type: ignore[import-untyped]
from aws_lambda_powertools.utilities.jmespath_utils import PowertoolsFunctions
from jmespath.exceptions import (  # type: ignore[import-untyped]
    JMESPathError,
    JMESPathTypeError,
)

from .._keyset import key_set
from ..keys import KeyTemplate, _describe

__all__ = ["TENANT_PLACEHOLDER", "EventKeys", "plain_data"]

TENANT_PLACEHOLDER = "tenant_id"


def plain_data(value: Any) -> Any:
    """The JSON-like data behind a Powertools data class or a Pydantic model (by alias, so
    field names match the event's own), for JMESPath to search.
    """
    raw = getattr(value, "raw_event", None)
    if isinstance(raw, Mapping):
        return raw
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        return dump(by_alias=True, mode="json")
    return value


class EventKeys:
    """Resolve a plan's key templates from an event or a batch record, before any request.

    ``fields`` is compiled here, so a bad expression fails when the handler is decorated.
    """

    __slots__ = ("_expressions", "_options", "_placeholders", "_templates", "_what")

    def __init__(
        self,
        templates: tuple[KeyTemplate, ...],
        fields: Mapping[str, str] | None,
        *,
        what: str = "event",
    ) -> None:
        self._templates = templates
        self._placeholders = tuple(
            dict.fromkeys(name for template in templates for name in template.placeholders)
        )
        self._what = what
        self._expressions: dict[str, Any] = {}
        self._options: Any = None
        if fields is None:
            return
        if not isinstance(fields, Mapping):
            raise TypeError(
                "fields must map placeholder names to JMESPath expressions, e.g. "
                f"{{'customer_id': 'detail.customer_id'}}, got {type(fields).__name__}"
            )
        unknown = [name for name in fields if name not in self._placeholders]
        if unknown:
            whose = (
                f"key template {templates[0].template!r} has the placeholders "
                f"{list(self._placeholders)}"
                if len(templates) == 1
                else f"the keys templates have the placeholders {sorted(self._placeholders)}"
            )
            raise ValueError(f"fields names {unknown} but {whose}; map only those")
        self._options = jmespath.Options(custom_functions=PowertoolsFunctions())
        for name, expression in fields.items():
            if not isinstance(expression, str) or not expression.strip():
                raise TypeError(
                    f"fields[{name!r}] must be a JMESPath expression (a non-empty str), "
                    f"got {_describe(expression)}"
                )
            try:
                self._expressions[name] = jmespath.compile(expression)
            except JMESPathError as error:
                raise ValueError(
                    f"fields[{name!r}] = {expression!r} is not a valid JMESPath expression: "
                    f"{error}".replace("\n", " ")
                ) from None

    def resolve(self, data: Any, context: Any = None) -> tuple[str, ...]:
        """The keys for one event or record; several are checked as a key set."""
        data = plain_data(data)
        values = {name: self._value(name, data, context) for name in self._placeholders}
        keys = [template.resolve(values) for template in self._templates]
        return (keys[0],) if len(keys) == 1 else key_set(None, keys)

    def _value(self, name: str, data: Any, context: Any) -> str:
        expression = self._expressions.get(name)
        if expression is None and name == TENANT_PLACEHOLDER:
            source = "the invocation's tenant id (context.tenant_id)"
            value = getattr(context, "tenant_id", None)
            if value is None:
                raise ValueError(
                    f"placeholder {{{name}}}: {source} is missing; invoke the function "
                    "with a tenant id (tenant isolation mode), or map the placeholder "
                    f"to the {self._what} with fields={{{name!r}: '<JMESPath>'}}"
                )
        elif expression is None:
            source = f"the top-level {self._what} key {name!r}"
            if not isinstance(data, Mapping):
                raise TypeError(
                    f"placeholder {{{name}}} is read from {source}, but the {self._what} is "
                    f"{type(data).__name__}, not an object; map it with "
                    f"fields={{{name!r}: '<JMESPath>'}}"
                )
            value = data.get(name)
        else:
            source = f"fields[{name!r}] = {expression.expression!r}"
            value = self._search(name, expression, data, source)
        if value is None:
            raise ValueError(
                f"placeholder {{{name}}}: {source} found nothing in the {self._what}; "
                f"check the {self._what}'s shape or the expression"
            )
        if not isinstance(value, str):
            hint = (
                "wrap the expression in to_string(...)"
                if expression is not None
                else f"map it with fields={{{name!r}: 'to_string({name})'}}"
            )
            raise TypeError(
                f"placeholder {{{name}}}: {source} gave {_describe(value)}, not a str; {hint} "
                "so every service formats it alike"
            )
        return value

    def _search(self, name: str, expression: Any, data: Any, source: str) -> Any:
        try:
            return expression.search(data, options=self._options)
        except JMESPathTypeError as error:
            # Its own text quotes the value the function refused: event data.
            detail = (
                f"{error.function_name}() takes {' or '.join(error.expected_types)}, "
                f"not {error.actual_type}"
            )
            raise ValueError(
                f"placeholder {{{name}}}: {source} failed on the {self._what}: {detail}"
            ) from None
        # powertools_json raises on bad JSON (ValueError), powertools_base64 on bad
        # padding or non-UTF-8 bytes (binascii.Error and UnicodeError are ValueErrors).
        except (JMESPathError, ValueError, TypeError) as error:
            detail = str(error).replace("\n", " ")
            raise ValueError(
                f"placeholder {{{name}}}: {source} failed on the {self._what}: "
                f"{type(error).__name__}: {detail}"
            ) from None

    def __repr__(self) -> str:
        fields = {name: expr.expression for name, expr in self._expressions.items()}
        templates = [template.template for template in self._templates]
        return f"EventKeys({templates!r}, fields={fields!r})"
