"""docs/api.md names every public name of every public module."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from dynalease.metrics import LockMetrics

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES = [
    "dynalease",
    "dynalease.client",
    "dynalease.lock",
    "dynalease.transaction",
    "dynalease.exceptions",
    "dynalease.metrics",
    "dynalease.semaphore",
    "dynalease.single_flight",
    "dynalease.election",
    "dynalease.keys",
    "dynalease.shutdown",
    "dynalease.testing",
    "dynalease.constants",
    "dynalease.admin",
    "dynalease.middleware",
    "dynalease.cdk",
]


def exported(module_name: str) -> list[str]:
    """The module's ``__all__``, read from its source (importing the CDK takes seconds)."""
    path = ROOT / "src" / Path(*module_name.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{module_name} has no __all__")


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_the_api_reference_covers_every_exported_name(module_name: str) -> None:
    reference = (ROOT / "docs" / "api.md").read_text()
    assert f"## `{module_name}`" in reference, f"docs/api.md has no section for {module_name}"
    missing = [name for name in exported(module_name) if f"`{name}" not in reference]
    assert not missing, f"docs/api.md does not mention {module_name}.{missing}"


def test_the_exceptions_table_has_a_row_for_every_exception() -> None:
    """Each of ``dynalease.exceptions.__all__`` is a row of docs/api.md's exceptions table."""
    reference = (ROOT / "docs" / "api.md").read_text()
    section = reference.split("## `dynalease.exceptions`", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    names = set(exported("dynalease.exceptions")) - {"DynaleaseError"}  # the sentence above
    assert names - rows == set(), f"docs/api.md's exceptions table lacks {sorted(names - rows)}"
    assert {"LockUnavailable", "GuardReused"} <= rows


def test_the_lock_metrics_table_explains_all_thirteen_fields() -> None:
    """Under LockMetrics, one row per field: what it counts and the request it comes from."""
    reference = (ROOT / "docs" / "api.md").read_text()
    section = reference.split("### `LockMetrics`", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("`")[1]: line.split("|")[3:5]
        for line in section.splitlines()
        if line.startswith("| `")
    }
    fields = [field.name for field in dataclasses.fields(LockMetrics)]
    assert len(fields) == 13 and sorted(rows) == sorted(fields)
    for name, (counts, request) in rows.items():
        assert counts.strip() and request.strip(), name
        assert any(op in request for op in ("PutItem", "GetItem", "UpdateItem", "DeleteItem")) or (
            "any" in request
        ), name
