"""The package's structure, as docs/architecture.md draws it, checked against the code.

Every ``import`` in ``src/dynalease`` (module level, inside functions and under
``TYPE_CHECKING`` alike) is read with :mod:`ast`; the modules must form no
cycle, each room may import only the rooms below it, and no module may grow
past the size the style guide sets.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "dynalease"
#: The development tools, a distribution of their own (dev/): they sit on the library.
DEV_PACKAGE = SRC.parent / "dev" / "dynalease_dev"
MAX_LINES = 420  # "a few hundred lines at most"; ~400 with a little slack for docstrings

#: Room -> the rooms its modules may import (besides their own). Faces sit on the
#: engine; transports plug in below the engine's store interface; Lambda, CLI, CDK
#: and testing each sit on the faces and never the other way round.
BASE = {"exceptions", "constants", "_redact", "_tracing", "_compute_modes"}
ALLOWED: dict[str, set[str]] = {
    "exceptions": {"_redact"},
    "constants": set(),
    "_compute_modes": {"constants"},
    "_redact": {"constants"},
    # _spans: the spans themselves, loaded (with OpenTelemetry) only once someone traces.
    "_tracing": {"_redact", "exceptions", "_spans"},
    "_spans": {"_redact", "exceptions"},
    # _meters: OpenTelemetry metrics, imported from nobody's cold path but the guards'.
    "_meters": {"_redact", "exceptions", "_tracing"},
    "metrics": BASE,
    "keys": BASE,
    "fencing": BASE,
    "shutdown": BASE,
    # _calls: each kind's options base checks the client and the durations (the engine's).
    "_calls": BASE | {"keys", "_engine", "client"},
    "_keyset": BASE | {"keys"},
    # _engine: _values only for the holder's user metadata, when a guard is given some.
    "_engine": BASE | {"metrics", "_values"},
    "_values": BASE,
    "_transport": BASE | {"_engine", "_values"},
    # _transport: the endpoint requests went to, for messages that name it.
    "_advice": BASE | {"_transport"},
    "lock": BASE
    | {"_engine", "metrics", "keys", "client", "transaction", "shutdown", "_calls", "_advice"}
    | {"_keyset", "_meters"},
    "transaction": BASE | {"_engine", "_values", "client"},
    "client": BASE | {"_engine", "_transport", "_values"},
    "semaphore": BASE | {"_engine", "keys", "client", "lock", "_calls"},
    "_results": BASE | {"keys"},
    "single_flight": BASE | {"_results", "keys", "client", "lock", "_lambda", "_calls"},
    "_election": BASE | {"_engine", "client"},
    "election": BASE | {"_engine", "_election", "keys", "client", "lock", "_calls"},
    "fair": BASE | {"_engine", "client", "lock", "_calls"},
    "_rwguards": BASE | {"_engine", "keys", "client", "lock", "metrics", "_calls"},
    "rwlock": BASE | {"_engine", "keys", "client", "lock", "_calls", "_rwguards"},
    # _lambda: SnapStart's hooks, registered on import where the runtime runs them.
    "__init__": BASE
    | {"client", "lock", "semaphore", "transaction", "metrics", "_lambda"}
    | {"rwlock"},
    "_lambda": BASE
    | {"_engine", "client", "lock", "semaphore", "keys", "_keyset", "metrics", "_calls"}
    | {"rwlock"},
    "middleware": BASE
    | {"_lambda", "client", "lock", "keys", "_keyset", "metrics"}
    | {"single_flight"},
    "admin": BASE | {"_engine", "_values", "client", "keys"},
    "testing": BASE | {"_engine", "_transport", "_values", "client"},
    "cdk": BASE,
    "_extension": BASE | {"_engine", "_transport", "client"},
    "_tooling": BASE | {"_engine", "client", "testing", "_advice", "_results"},
    "cli": BASE
    | {
        "__init__",
        "_engine",
        "_values",
        "_lambda",
        "_tooling",
        "client",
        "lock",
        "semaphore",
        "election",
        "transaction",
        "keys",
        "_keyset",
    }
    | {"metrics", "testing", "admin"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The dynalease modules that ``name`` imports, anywhere in its text."""
    modules = _modules()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if candidate in modules:
                    found.add(candidate)
                elif target in modules:
                    found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
    found.discard(name)
    return found


@cache
def _graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(_imports(name, path)) for name, path in _modules().items()}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_module_imports_another_in_a_circle() -> None:
    assert _cycles(_graph()) == []


def test_every_room_is_known_to_the_layer_rules() -> None:
    rooms = {_room(module) for module in _modules()}
    assert rooms <= set(ALLOWED), f"add {sorted(rooms - set(ALLOWED))} to ALLOWED and the docs"


def test_each_room_imports_only_the_rooms_below_it() -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _room(target) != _room(module) and _room(target) not in ALLOWED.get(_room(module), set())
    )
    assert wrong == []


def test_no_module_is_longer_than_a_few_hundred_lines() -> None:
    long = {
        name: lines
        for name, path in _modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_library_never_imports_the_development_tools() -> None:
    """They are ``dynalease-dev``'s, which sits on the library (``dynalease`` has no ``demo``)."""
    importing = sorted(
        name
        for name, path in _modules().items()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dynalease_dev"))
        or (
            isinstance(node, ast.Import)
            and any(alias.name.startswith("dynalease_dev") for alias in node.names)
        )
    )
    assert importing == []


def test_no_development_tool_is_longer_than_a_few_hundred_lines() -> None:
    long = {
        str(path.relative_to(DEV_PACKAGE)): lines
        for path in sorted(DEV_PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _asyncio_used_unbound(tree: ast.Module) -> list[int]:
    """Lines that use the name ``asyncio`` at run time where nothing binds it.

    Modules on a sync hold's path import ``asyncio`` only inside the functions that
    run on the loop (see ``_engine/runtime.py``); a function that uses it without
    importing it would fail with ``NameError``, perhaps only on a rare error path.
    Annotations do not count: ``from __future__ import annotations`` keeps them text.
    """
    annotations: set[int] = set()
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [arguments.vararg, arguments.kwarg]
            found += [argument.annotation for argument in every if argument is not None]
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        annotations.update(id(sub) for expr in found if expr is not None for sub in ast.walk(expr))

    def binds(body: list[ast.stmt]) -> bool:
        return any(
            isinstance(statement, ast.Import)
            and any(alias.name == "asyncio" and alias.asname is None for alias in statement.names)
            for statement in body
        )

    unbound: list[int] = []

    def visit(node: ast.AST, bound: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = bound
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = bound or binds(child.body)
            used = isinstance(child, ast.Name) and child.id == "asyncio"
            if used and not bound and id(child) not in annotations:
                unbound.append(child.lineno)
            visit(child, inner)

    visit(tree, binds(tree.body))
    return unbound


def test_the_unbound_asyncio_finder_finds_a_use_without_an_import() -> None:
    tree = ast.parse(
        "def run(delay: asyncio.Future) -> None:\n"
        "    import asyncio\n"
        "    asyncio.sleep(delay)\n"
        "def late() -> None:\n"
        "    asyncio.sleep(1)\n"
    )
    assert _asyncio_used_unbound(tree) == [5]


def test_no_function_uses_asyncio_without_importing_it() -> None:
    unbound = {
        name: lines
        for name, path in _modules().items()
        if (lines := _asyncio_used_unbound(ast.parse(path.read_text(), str(path))))
    }
    assert unbound == {}
