"""Each of ``LeaseCore``'s fields has one owner: its attributes are written in ``base.py``
alone (issue 46), and there are at most 15 of them (31 before that issue, 19 before the
``Held`` value took version, validity, takeover and token).

Read with :mod:`ast`: an assignment to ``<anything>.<name>`` anywhere in the package, where
``name`` is one of the attributes ``LeaseCore`` sets on ``self``, counts as a write, except
another class's writes to its own ``self`` and the transports (which never see a lease; an
HTTP connection has a ``deadline`` of its own).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "dynalease"
MAX_ATTRIBUTES = 15
OWNERS = {"LeaseCore", "Lease"}


def _core_attributes() -> set[str]:
    tree = ast.parse((PACKAGE / "_engine" / "base.py").read_text())
    core = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LeaseCore")
    return {
        node.attr
        for node in ast.walk(core)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    for target in found:
        flat.extend(target.elts if isinstance(target, ast.Tuple) else [target])
    return flat


def _writers(attributes: set[str]) -> dict[str, set[str]]:
    writers: dict[str, set[str]] = {name: set() for name in attributes}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith("_transport/"):
            continue

        def visit(node: ast.AST, cls: str | None, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                for target in _targets(child):
                    while isinstance(target, ast.Subscript):
                        target = target.value
                    if not isinstance(target, ast.Attribute) or target.attr not in attributes:
                        continue
                    own = isinstance(target.value, ast.Name) and target.value.id == "self"
                    if not own or cls in OWNERS:
                        writers[target.attr].add(module)
                visit(child, child.name if isinstance(child, ast.ClassDef) else cls)

        visit(ast.parse(path.read_text()), None)
    return writers


def test_lease_core_has_at_most_fifteen_attributes() -> None:
    attributes = _core_attributes()
    assert len(attributes) <= MAX_ATTRIBUTES, sorted(attributes)


def test_every_lease_core_attribute_is_written_in_base_alone() -> None:
    writers = _writers(_core_attributes())
    elsewhere = {name: sorted(where - {"_engine/base.py"}) for name, where in writers.items()}
    assert {name: where for name, where in elsewhere.items() if where} == {}
