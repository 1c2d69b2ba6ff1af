"""docs/architecture.md names every module in src/dynalease and dev/dynalease_dev, and only
modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "dynalease"
DEV = ROOT / "dev"  # the development tools' distribution: its modules are named dynalease_dev/...
PAGE = ROOT / "docs" / "architecture.md"


def _rooms_section() -> str:
    text = PAGE.read_text()
    start = text.index("\n## The rooms\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_the_architecture_page_names_every_module_and_no_other() -> None:
    named = set(re.findall(r"^\| `([\w/]+\.py)` \|", _rooms_section(), flags=re.M))
    actual = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}
    actual |= {path.relative_to(DEV).as_posix() for path in (DEV / "dynalease_dev").rglob("*.py")}
    assert sorted(actual - named) == [], "add these modules to docs/architecture.md"
    assert sorted(named - actual) == [], "docs/architecture.md names modules that do not exist"


def test_the_readme_links_the_architecture_page() -> None:
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()
