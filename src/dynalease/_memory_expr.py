"""DynamoDB expressions for the in-memory backend: tokenizer, parser and evaluator.

Condition, update and projection expressions are parsed once per distinct text
(the parse is cached) into immutable trees whose placeholders (``#name``,
``:value``) stay unresolved; :class:`Env` supplies them per request. Values are
low-level AttributeValue dicts such as ``{"S": "x"}``; numbers are canonical
DynamoDB number strings, compared and added as :class:`decimal.Decimal`.

Every problem is raised as :class:`ExpressionError`, which the backend reports as a
``ValidationException``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any, TypeAlias

__all__ = [
    "Env",
    "ExpressionError",
    "ParsedCondition",
    "ParsedProjection",
    "ParsedUpdate",
    "apply_update",
    "canonical_number",
    "check_condition",
    "check_paths",
    "check_update",
    "copy_value",
    "evaluate",
    "get_path",
    "parse_condition",
    "parse_number",
    "parse_projection",
    "parse_update",
    "project",
    "resolve",
    "values_equal",
]

Value: TypeAlias = dict[str, Any]
Item: TypeAlias = dict[str, Value]
#: A document path as written: attribute names (``#x`` placeholders unresolved) and list indexes.
Path: TypeAlias = tuple[str | int, ...]

SET_TYPES = frozenset({"SS", "NS", "BS"})
ORDERED_TYPES = frozenset({"S", "N", "B"})
ALL_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL", "L", "M", "SS", "NS", "BS"})
_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"})
_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
_COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
_CONDITION_FUNCTIONS = frozenset(
    {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"}
)
_FUNCTIONS = _CONDITION_FUNCTIONS | {"size", "if_not_exists", "list_append"}
_MAX_IN_OPERANDS = 100
_MAX_DIGITS = 38
#: Wide enough that normalizing or adding in-range numbers never rounds.
_WIDE = Context(prec=400)
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)|(?P<name_ref>#[A-Za-z0-9_]+)|(?P<value_ref>:[A-Za-z0-9_]+)|(?P<int>\d+)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><>|<=|>=|[=<>()\[\],.+\-])"
)


class ExpressionError(Exception):
    """An invalid expression, placeholder, operand or document path."""


# --- numbers -----------------------------------------------------------------


def parse_number(text: object) -> Decimal:
    """A DynamoDB number string as a Decimal, checked against DynamoDB's limits."""
    if not isinstance(text, str) or not _NUMBER_RE.fullmatch(text):
        raise ExpressionError(f"A value provided cannot be converted into a number: {text!r}")
    number = Decimal(text)
    return _check_range(number)


def _check_range(number: Decimal) -> Decimal:
    if number.is_zero():
        return Decimal(0)
    if len(number.normalize(_WIDE).as_tuple().digits) > _MAX_DIGITS:
        raise ExpressionError("Attempting to store more than 38 significant digits in a Number")
    if number.adjusted() > 125:
        raise ExpressionError(
            "Number overflow. Attempting to store a number with magnitude larger than "
            "supported range"
        )
    if number.adjusted() < -130:
        raise ExpressionError(
            "Number underflow. Attempting to store a number with magnitude smaller than "
            "supported range"
        )
    return number


def canonical_number(number: Decimal) -> str:
    """The number as DynamoDB renders it: no exponent, no trailing zeros (``"3"``, ``"1.5"``)."""
    if number.is_zero():
        return "0"
    return format(number.normalize(_WIDE), "f")


# --- values ------------------------------------------------------------------


def copy_value(value: Value) -> Value:
    """A copy of a (normalized) AttributeValue that shares no mutable state."""
    ((kind, content),) = value.items()
    if kind == "M":
        return {"M": {name: copy_value(v) for name, v in content.items()}}
    if kind == "L":
        return {"L": [copy_value(v) for v in content]}
    if kind in SET_TYPES:
        return {kind: list(content)}
    return {kind: content}


def _kind(value: Value) -> str:
    return next(iter(value))


def _set_members(value: Value) -> set[Any]:
    kind, content = next(iter(value.items()))
    if kind == "NS":
        return {Decimal(n) for n in content}
    return set(content)


def values_equal(a: Value, b: Value) -> bool:
    """DynamoDB equality: same type and value; sets ignore order; lists and maps compare deeply."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    x, y = a[kind], b[kind]
    if kind == "N":
        return bool(Decimal(x) == Decimal(y))
    if kind in SET_TYPES:
        return _set_members(a) == _set_members(b)
    if kind == "L":
        return len(x) == len(y) and all(values_equal(p, q) for p, q in zip(x, y, strict=True))
    if kind == "M":
        return x.keys() == y.keys() and all(values_equal(x[k], y[k]) for k in x)
    return bool(x == y)


def _ordered(value: Value) -> Any:
    kind = _kind(value)
    return Decimal(value["N"]) if kind == "N" else value[kind]


# --- trees -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathOperand:
    """A document path (``a.b[0]``)."""

    path: Path


@dataclass(frozen=True, slots=True)
class ValueOperand:
    """An ``:value`` placeholder."""

    name: str


@dataclass(frozen=True, slots=True)
class Call:
    """A function call: ``size``/``if_not_exists``/``list_append`` or a condition function."""

    name: str
    args: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Arithmetic:
    """``left + right`` or ``left - right`` in a SET action."""

    op: str
    left: Operand
    right: Operand


Operand: TypeAlias = PathOperand | ValueOperand | Call | Arithmetic


@dataclass(frozen=True, slots=True)
class Compare:
    """``left <op> right`` for one of ``= <> < <= > >=``."""

    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True, slots=True)
class Between:
    """``subject BETWEEN low AND high``."""

    subject: Operand
    low: Operand
    high: Operand


@dataclass(frozen=True, slots=True)
class In:
    """``subject IN (a, b, ...)``."""

    subject: Operand
    options: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Logical:
    """``AND`` / ``OR`` of two conditions."""

    op: str
    left: Condition
    right: Condition


@dataclass(frozen=True, slots=True)
class Not:
    """``NOT condition``."""

    inner: Condition


Condition: TypeAlias = Compare | Between | In | Logical | Not | Call


@dataclass(frozen=True, slots=True)
class Action:
    """One update action: clause (SET/REMOVE/ADD/DELETE), target path and operand."""

    clause: str
    path: Path
    operand: Operand | None


@dataclass(frozen=True, slots=True)
class ParsedCondition:
    """A parsed condition expression and the placeholders it uses."""

    root: Condition
    names: frozenset[str]
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class ParsedUpdate:
    """A parsed update expression (actions in text order) and the placeholders it uses."""

    actions: tuple[Action, ...]
    names: frozenset[str]
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class ParsedProjection:
    """A parsed projection expression and the name placeholders it uses."""

    paths: tuple[Path, ...]
    names: frozenset[str]
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class Env:
    """One request's ExpressionAttributeNames and ExpressionAttributeValues."""

    names: dict[str, str]
    values: dict[str, Value]


# --- parsing -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # name, name_ref, value_ref, int, op, end
    text: str
    pos: int


def _tokenize(text: str, label: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise ExpressionError(
                f'Invalid {label}: Syntax error; token: "{text[pos]}", '
                f'near: "{text[pos : pos + 10]}"'
            )
        kind = match.lastgroup or ""
        if kind != "ws":
            tokens.append(_Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Token("end", "<EOF>", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, label: str) -> None:
        if not text.strip():
            raise ExpressionError(f"Invalid {label}: The expression can not be empty;")
        self.text = text
        self.label = label
        self.tokens = _tokenize(text, label)
        self.index = 0
        self.names: set[str] = set()
        self.values: set[str] = set()

    # token helpers
    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.peek()
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def at_op(self, op: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == "op" and token.text == op

    def at_keyword(self, word: str) -> bool:
        token = self.peek()
        return token.kind == "name" and token.text.upper() == word

    def expect_op(self, op: str) -> None:
        if not self.at_op(op):
            raise self.error()
        self.advance()

    def expect_end(self) -> None:
        if self.peek().kind != "end":
            raise self.error()

    def error(self, token: _Token | None = None) -> ExpressionError:
        token = token or self.peek()
        near = self.text[max(0, token.pos - 10) : token.pos + 10]
        return ExpressionError(
            f'Invalid {self.label}: Syntax error; token: "{token.text}", near: "{near}"'
        )

    def fail(self, message: str) -> ExpressionError:
        return ExpressionError(f"Invalid {self.label}: {message}")

    # paths and operands
    def path(self) -> Path:
        elements: list[str | int] = [self.path_name()]
        while True:
            if self.at_op("."):
                self.advance()
                elements.append(self.path_name())
            elif self.at_op("["):
                self.advance()
                token = self.advance()
                if token.kind != "int":
                    raise self.error(token)
                elements.append(int(token.text))
                self.expect_op("]")
            else:
                return tuple(elements)

    def path_name(self) -> str:
        token = self.advance()
        if token.kind == "name_ref":
            self.names.add(token.text)
            return token.text
        if token.kind == "name" and token.text.upper() not in _KEYWORDS:
            return token.text
        raise self.error(token)

    def call_args(self, *, update: bool = False) -> tuple[Operand, ...]:
        self.expect_op("(")
        args = [self.operand(update=update)]
        while self.at_op(","):
            self.advance()
            args.append(self.operand(update=update))
        self.expect_op(")")
        return tuple(args)

    def operand(self, *, update: bool = False) -> Operand:
        token = self.peek()
        if token.kind == "value_ref":
            self.advance()
            self.values.add(token.text)
            return ValueOperand(token.text)
        if token.kind == "name" and self.at_op("(", 1):
            self.advance()
            allowed = {"if_not_exists", "list_append"} if update else {"size"}
            if token.text not in _FUNCTIONS:
                raise self.fail(f"Invalid function name; function: {token.text}")
            if token.text not in allowed:
                raise self.fail(
                    "The function is not allowed to be used this way in an expression; "
                    f"function: {token.text}"
                )
            return self.check_call(Call(token.text, self.call_args(update=update)))
        return PathOperand(self.path())

    def check_call(self, call: Call) -> Call:
        arity = {
            "size": 1,
            "attribute_exists": 1,
            "attribute_not_exists": 1,
            "attribute_type": 2,
            "begins_with": 2,
            "contains": 2,
            "if_not_exists": 2,
            "list_append": 2,
        }[call.name]
        if len(call.args) != arity:
            raise self.fail(
                "Incorrect number of operands for operator or function; operator or function: "
                f"{call.name}, number of operands: {len(call.args)}"
            )
        needs_path = call.name in {"size", "attribute_exists", "attribute_not_exists"}
        first_is_path = isinstance(call.args[0], PathOperand)
        if (needs_path or call.name in {"attribute_type", "if_not_exists"}) and not first_is_path:
            raise self.fail(
                f"Operator or function requires a document path; operator or function: {call.name}"
            )
        if call.name == "attribute_type" and not isinstance(call.args[1], ValueOperand):
            raise self.fail(
                "Incorrect operand type for operator or function; operator or function: "
                "attribute_type, operand type: path"
            )
        return call

    # conditions
    def condition(self) -> Condition:
        left = self.conjunction()
        while self.at_keyword("OR"):
            self.advance()
            left = Logical("OR", left, self.conjunction())
        return left

    def conjunction(self) -> Condition:
        left = self.negation()
        while self.at_keyword("AND"):
            self.advance()
            left = Logical("AND", left, self.negation())
        return left

    def negation(self) -> Condition:
        if self.at_keyword("NOT"):
            self.advance()
            return Not(self.negation())
        return self.predicate()

    def predicate(self) -> Condition:
        token = self.peek()
        if self.at_op("("):
            self.advance()
            inner = self.condition()
            self.expect_op(")")
            return inner
        if token.kind == "name" and self.at_op("(", 1) and token.text != "size":
            self.advance()
            if token.text not in _CONDITION_FUNCTIONS:
                if token.text in {"if_not_exists", "list_append"}:
                    raise self.fail(
                        "The function is not allowed in a condition expression; "
                        f"function: {token.text}"
                    )
                raise self.fail(f"Invalid function name; function: {token.text}")
            return self.check_call(Call(token.text, self.call_args()))
        left = self.operand()
        if self.at_keyword("BETWEEN"):
            self.advance()
            low = self.operand()
            if not self.at_keyword("AND"):
                raise self.error()
            self.advance()
            return Between(left, low, self.operand())
        if self.at_keyword("IN"):
            self.advance()
            self.expect_op("(")
            options = [self.operand()]
            while self.at_op(","):
                self.advance()
                options.append(self.operand())
            self.expect_op(")")
            if len(options) > _MAX_IN_OPERANDS:
                raise self.fail(
                    "The IN operator is provided with too many operands; number of operands: "
                    f"{len(options)}"
                )
            return In(left, tuple(options))
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARATORS:
            self.advance()
            return Compare(token.text, left, self.operand())
        raise self.error()

    # updates
    def update(self) -> tuple[Action, ...]:
        actions: list[Action] = []
        seen: set[str] = set()
        while self.peek().kind != "end":
            token = self.advance()
            clause = token.text.upper() if token.kind == "name" else ""
            if clause not in _CLAUSES:
                raise self.error(token)
            if clause in seen:
                raise self.fail(
                    f'The "{clause}" section can only be used once in an update expression;'
                )
            seen.add(clause)
            while True:
                actions.append(self.action(clause))
                if not self.at_op(","):
                    break
                self.advance()
        return tuple(actions)

    def action(self, clause: str) -> Action:
        path = self.path()
        if clause == "REMOVE":
            return Action(clause, path, None)
        if clause == "SET":
            self.expect_op("=")
            value = self.operand(update=True)
            token = self.peek()
            if token.kind == "op" and token.text in {"+", "-"}:
                self.advance()
                value = Arithmetic(token.text, value, self.operand(update=True))
            return Action(clause, path, value)
        token = self.advance()
        if token.kind != "value_ref":
            raise self.error(token)
        self.values.add(token.text)
        return Action(clause, path, ValueOperand(token.text))


@functools.lru_cache(maxsize=1024)
def parse_condition(text: str, label: str = "ConditionExpression") -> ParsedCondition:
    """Parse (and cache) a condition expression."""
    parser = _Parser(text, label)
    root = parser.condition()
    parser.expect_end()
    return ParsedCondition(root, frozenset(parser.names), frozenset(parser.values))


@functools.lru_cache(maxsize=1024)
def parse_update(text: str) -> ParsedUpdate:
    """Parse (and cache) an update expression."""
    parser = _Parser(text, "UpdateExpression")
    actions = parser.update()
    return ParsedUpdate(actions, frozenset(parser.names), frozenset(parser.values))


@functools.lru_cache(maxsize=1024)
def parse_projection(text: str) -> ParsedProjection:
    """Parse (and cache) a projection expression."""
    parser = _Parser(text, "ProjectionExpression")
    paths = [parser.path()]
    while parser.at_op(","):
        parser.advance()
        paths.append(parser.path())
    parser.expect_end()
    return ParsedProjection(tuple(paths), frozenset(parser.names), frozenset())


# --- paths -------------------------------------------------------------------


def resolve(path: Path, env: Env) -> Path:
    """The path with ``#name`` placeholders replaced by the attribute names they stand for."""
    return tuple(env.names[e] if isinstance(e, str) and e.startswith("#") else e for e in path)


def get_path(item: Item, path: Path) -> Value | None:
    """The value at a resolved path (a reference into ``item``), or None when absent."""
    first = path[0]
    current = item.get(first) if isinstance(first, str) else None
    for element in path[1:]:
        if current is None:
            return None
        if isinstance(element, int):
            items = current.get("L")
            current = items[element] if items is not None and element < len(items) else None
        else:
            members = current.get("M")
            current = members.get(element) if members is not None else None
    return current


def _render(path: Path) -> str:
    text = ""
    for element in path:
        text += f"[{element}]" if isinstance(element, int) else f".{element}"
    return text.lstrip(".")


def check_paths(paths: list[Path]) -> None:
    """Reject resolved paths that overlap (one is a prefix of another) or conflict."""
    for i, one in enumerate(paths):
        for two in paths[i + 1 :]:
            for a, b in zip(one, two, strict=False):
                if type(a) is not type(b):
                    raise ExpressionError(
                        "Invalid expression: Two document paths conflict with each other; must "
                        f"remove or rewrite one of these paths; path one: [{_render(one)}], "
                        f"path two: [{_render(two)}]"
                    )
                if a != b:
                    break
            else:
                raise ExpressionError(
                    "Invalid expression: Two document paths overlap with each other; must remove "
                    f"or rewrite one of these paths; path one: [{_render(one)}], path two: "
                    f"[{_render(two)}]"
                )


class _Leaf:
    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value


def project(item: Item, paths: list[Path]) -> Item:
    """A copy of only the given resolved paths of ``item`` (list elements keep their order)."""
    root: dict[str | int, Any] = {}
    for path in paths:
        value = get_path(item, path)
        if value is None:
            continue
        node = root
        for element in path[:-1]:
            node = node.setdefault(element, {})
        node[path[-1]] = _Leaf(copy_value(value))

    def build(node: Any) -> Value:
        if isinstance(node, _Leaf):
            return node.value
        if all(isinstance(k, int) for k in node):
            return {"L": [build(node[k]) for k in sorted(node)]}
        return {"M": {k: build(v) for k, v in node.items()}}

    return {str(name): build(node) for name, node in root.items()}


# --- static checks -----------------------------------------------------------


def _operand_error(function: str, kind: str, label: str) -> ExpressionError:
    return ExpressionError(
        f"Invalid {label}: Incorrect operand type for operator or function; operator or "
        f"function: {function}, operand type: {kind}"
    )


def check_condition(parsed: ParsedCondition, env: Env, label: str = "ConditionExpression") -> None:
    """Checks that depend on the request's values (e.g. ``a < :list`` is invalid)."""

    def constant(operand: Operand) -> Value | None:
        return env.values[operand.name] if isinstance(operand, ValueOperand) else None

    def ordered(function: str, *operands: Operand) -> None:
        for operand in operands:
            value = constant(operand)
            if value is not None and _kind(value) not in ORDERED_TYPES:
                raise _operand_error(function, _kind(value), label)

    def walk(node: Condition) -> None:
        if isinstance(node, Logical):
            walk(node.left)
            walk(node.right)
        elif isinstance(node, Not):
            walk(node.inner)
        elif isinstance(node, Compare) and node.op not in {"=", "<>"}:
            ordered(node.op, node.left, node.right)
        elif isinstance(node, Between):
            ordered("BETWEEN", node.subject, node.low, node.high)
            low, high = constant(node.low), constant(node.high)
            if (
                low is not None
                and high is not None
                and _kind(low) == _kind(high)
                and _ordered(low) > _ordered(high)
            ):
                raise ExpressionError(
                    f"Invalid {label}: The BETWEEN operator requires upper bound to be greater "
                    f"than or equal to lower bound; lower bound operand: AttributeValue: {low}, "
                    f"upper bound operand: AttributeValue: {high}"
                )
        elif isinstance(node, Call) and node.name == "attribute_type":
            wanted = constant(node.args[1])
            assert wanted is not None  # the parser only accepts a :value here
            if _kind(wanted) != "S":
                raise _operand_error("attribute_type", _kind(wanted), label)
            if wanted["S"] not in ALL_TYPES:
                raise ExpressionError(
                    f"Invalid {label}: Invalid attribute type name found; type: {wanted['S']}, "
                    "valid types: {B,NULL,SS,BOOL,L,BS,N,NS,S,M}"
                )
        elif isinstance(node, Call) and node.name == "begins_with":
            for operand in node.args:
                value = constant(operand)
                if value is not None and _kind(value) not in {"S", "B"}:
                    raise _operand_error("begins_with", _kind(value), label)

    walk(parsed.root)


def check_update(parsed: ParsedUpdate, env: Env, key_names: tuple[str, ...]) -> list[Path]:
    """Request-level checks of an update; returns the resolved target paths in action order."""
    paths = [resolve(action.path, env) for action in parsed.actions]
    for path in paths:
        if path[0] in key_names:
            raise ExpressionError(
                f"One or more parameter values were invalid: Cannot update attribute {path[0]}. "
                "This attribute is part of the key"
            )
    check_paths(paths)

    def walk(operand: Operand) -> None:
        if isinstance(operand, Arithmetic):
            for side in (operand.left, operand.right):
                if isinstance(side, ValueOperand) and _kind(env.values[side.name]) != "N":
                    raise _operand_error(
                        operand.op, _kind(env.values[side.name]), "UpdateExpression"
                    )
                walk(side)
        elif isinstance(operand, Call):
            for arg in operand.args:
                if (
                    operand.name == "list_append"
                    and isinstance(arg, ValueOperand)
                    and _kind(env.values[arg.name]) != "L"
                ):
                    raise _operand_error(
                        "list_append", _kind(env.values[arg.name]), "UpdateExpression"
                    )
                walk(arg)

    for action in parsed.actions:
        if action.operand is None:
            continue
        walk(action.operand)
        if action.clause in {"ADD", "DELETE"}:
            assert isinstance(action.operand, ValueOperand)
            kind = _kind(env.values[action.operand.name])
            allowed = SET_TYPES | {"N"} if action.clause == "ADD" else SET_TYPES
            if kind not in allowed:
                raise _operand_error(action.clause, kind, "UpdateExpression")
    return paths


# --- evaluation --------------------------------------------------------------


def _operand_value(operand: Operand, item: Item, env: Env) -> Value | None:
    if isinstance(operand, ValueOperand):
        return env.values[operand.name]
    if isinstance(operand, PathOperand):
        return get_path(item, resolve(operand.path, env))
    if isinstance(operand, Call) and operand.name == "size":
        value = _operand_value(operand.args[0], item, env)
        if value is None:
            return None
        kind, content = next(iter(value.items()))
        if kind in {"S", "B", "L", "M"} or kind in SET_TYPES:
            return {"N": str(len(content))}
        return None
    raise ExpressionError(f"Unsupported operand: {operand!r}")  # pragma: no cover


def _compare(op: str, a: Value | None, b: Value | None) -> bool:
    if op == "=":
        return a is not None and b is not None and values_equal(a, b)
    if op == "<>":
        return not (a is not None and b is not None and values_equal(a, b))
    if a is None or b is None or _kind(a) != _kind(b) or _kind(a) not in ORDERED_TYPES:
        return False
    x, y = _ordered(a), _ordered(b)
    return bool({"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op])


def _condition_call(call: Call, item: Item, env: Env) -> bool:
    subject = _operand_value(call.args[0], item, env)
    if call.name == "attribute_exists":
        return subject is not None
    if call.name == "attribute_not_exists":
        return subject is None
    other = _operand_value(call.args[1], item, env)
    if subject is None or other is None:
        return False
    kind, other_kind = _kind(subject), _kind(other)
    if call.name == "attribute_type":
        return bool(kind == other["S"])
    if call.name == "begins_with":
        return (
            kind == other_kind
            and kind in {"S", "B"}
            and bool(subject[kind].startswith(other[kind]))
        )
    # contains
    if kind in {"S", "B"}:
        return other_kind == kind and bool(other[kind] in subject[kind])
    if kind in SET_TYPES:
        return other_kind == kind[0] and any(
            values_equal({other_kind: member}, other) for member in subject[kind]
        )
    if kind == "L":
        return any(values_equal(element, other) for element in subject["L"])
    return False


def evaluate(parsed: ParsedCondition, item: Item | None, env: Env) -> bool:
    """Whether the condition holds for ``item`` (None or ``{}`` for a missing item)."""
    current: Item = item or {}

    def walk(node: Condition) -> bool:
        if isinstance(node, Logical):
            if node.op == "AND":
                return walk(node.left) and walk(node.right)
            return walk(node.left) or walk(node.right)
        if isinstance(node, Not):
            return not walk(node.inner)
        if isinstance(node, Compare):
            left = _operand_value(node.left, current, env)
            return _compare(node.op, left, _operand_value(node.right, current, env))
        if isinstance(node, Between):
            subject = _operand_value(node.subject, current, env)
            low = _operand_value(node.low, current, env)
            high = _operand_value(node.high, current, env)
            return _compare(">=", subject, low) and _compare("<=", subject, high)
        if isinstance(node, In):
            subject = _operand_value(node.subject, current, env)
            return any(
                _compare("=", subject, _operand_value(option, current, env))
                for option in node.options
            )
        return _condition_call(node, current, env)

    return walk(parsed.root)


_TYPE_ERROR = "An operand in the update expression has an incorrect data type"
_INVALID_PATH = "The document path provided in the update expression is invalid for update"


def _update_value(operand: Operand, item: Item, env: Env) -> Value:
    if isinstance(operand, ValueOperand):
        return copy_value(env.values[operand.name])
    if isinstance(operand, PathOperand):
        value = get_path(item, resolve(operand.path, env))
        if value is None:
            raise ExpressionError(
                "The provided expression refers to an attribute that does not exist in the item"
            )
        return copy_value(value)
    if isinstance(operand, Arithmetic):
        left = _update_value(operand.left, item, env)
        right = _update_value(operand.right, item, env)
        if _kind(left) != "N" or _kind(right) != "N":
            raise ExpressionError(_TYPE_ERROR)
        return {"N": _arithmetic(operand.op, Decimal(left["N"]), Decimal(right["N"]))}
    if operand.name == "if_not_exists":
        assert isinstance(operand.args[0], PathOperand)
        existing = get_path(item, resolve(operand.args[0].path, env))
        if existing is not None:
            return copy_value(existing)
        return _update_value(operand.args[1], item, env)
    # list_append
    first = _update_value(operand.args[0], item, env)
    second = _update_value(operand.args[1], item, env)
    if _kind(first) != "L" or _kind(second) != "L":
        raise ExpressionError(_TYPE_ERROR)
    return {"L": first["L"] + second["L"]}


def _arithmetic(op: str, a: Decimal, b: Decimal) -> str:
    result = _WIDE.add(a, b) if op == "+" else _WIDE.subtract(a, b)
    return canonical_number(_check_range(result))


def _set_path(item: Item, path: Path, value: Value) -> None:
    if len(path) == 1:
        item[str(path[0])] = value
        return
    parent = get_path(item, path[:-1])
    last = path[-1]
    if isinstance(last, int) and parent is not None and "L" in parent:
        elements = parent["L"]
        if last < len(elements):
            elements[last] = value
        else:
            elements.append(value)
    elif isinstance(last, str) and parent is not None and "M" in parent:
        parent["M"][last] = value
    else:
        raise ExpressionError(_INVALID_PATH)


def _remove_path(item: Item, path: Path) -> None:
    if len(path) == 1:
        item.pop(str(path[0]), None)
        return
    parent = get_path(item, path[:-1])
    last = path[-1]
    if parent is None:
        return
    if isinstance(last, int) and "L" in parent:
        if last < len(parent["L"]):
            del parent["L"][last]
    elif isinstance(last, str) and "M" in parent:
        parent["M"].pop(last, None)
    else:
        raise ExpressionError(_INVALID_PATH)


def _removal_order(path: Path) -> tuple[tuple[int, str | int], ...]:
    return tuple((1, e) if isinstance(e, int) else (0, e) for e in path)


def apply_update(parsed: ParsedUpdate, paths: list[Path], item: Item, env: Env) -> Item:
    """The item after the update (``item`` itself is not changed).

    Every SET value is computed from the item as it was before the update, as
    DynamoDB does; REMOVE on list elements uses the original indexes.
    """
    result = {name: copy_value(value) for name, value in item.items()}
    pending = [
        (path, _update_value(action.operand, item, env))
        for action, path in zip(parsed.actions, paths, strict=True)
        if action.clause == "SET" and action.operand is not None
    ]
    for path, value in pending:
        _set_path(result, path, value)
    removals = [p for a, p in zip(parsed.actions, paths, strict=True) if a.clause == "REMOVE"]
    for path in sorted(removals, key=_removal_order, reverse=True):
        _remove_path(result, path)
    for action, path in zip(parsed.actions, paths, strict=True):
        if action.clause not in {"ADD", "DELETE"}:
            continue
        assert isinstance(action.operand, ValueOperand)
        given = env.values[action.operand.name]
        current = get_path(result, path)
        if action.clause == "ADD":
            _set_path(result, path, _add(current, given))
        elif current is not None:
            remaining = _delete(current, given)
            if remaining is None:
                _remove_path(result, path)
            else:
                _set_path(result, path, remaining)
    return result


def _add(current: Value | None, given: Value) -> Value:
    if current is None:
        return copy_value(given)
    kind = _kind(given)
    if _kind(current) != kind:
        raise ExpressionError(_TYPE_ERROR)
    if kind == "N":
        return {"N": _arithmetic("+", Decimal(current["N"]), Decimal(given["N"]))}
    merged = list(current[kind])
    members = _set_members(current)
    for member in given[kind]:
        probe = Decimal(member) if kind == "NS" else member
        if probe not in members:
            members.add(probe)
            merged.append(member)
    return {kind: merged}


def _delete(current: Value, given: Value) -> Value | None:
    kind = _kind(given)
    if _kind(current) != kind:
        raise ExpressionError(_TYPE_ERROR)
    drop = _set_members(given)
    kept = [m for m in current[kind] if (Decimal(m) if kind == "NS" else m) not in drop]
    return {kind: kept} if kept else None
