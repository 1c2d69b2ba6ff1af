"""Under ``CI=true`` nothing may skip: a missing tool (faketime, Node) must fail the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SKIPPING = """
import pytest

def test_that_skips_at_run_time():
    pytest.skip("faketime is not installed")

@pytest.mark.skipif(True, reason="dynalite is not installed")
def test_that_skips_by_marker():
    pass
"""


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )


def test_a_skip_fails_the_run_in_ci_and_says_what_to_install(tmp_path: Path) -> None:
    completed = _run(tmp_path, "true")
    assert completed.returncode == 1, completed.stdout
    assert "CI=true but this test would skip" in completed.stdout
    assert "faketime is not installed" in completed.stdout
    assert "dynalite is not installed" in completed.stdout
    assert "skipped" not in completed.stdout.splitlines()[-1]


def test_outside_ci_a_skip_is_only_a_skip(tmp_path: Path) -> None:
    completed = _run(tmp_path, None)
    assert completed.returncode == 0, completed.stdout
    assert "2 skipped" in completed.stdout.splitlines()[-1]


def test_make_test_runs_every_test_directory() -> None:
    """`make test` splits the suite over two pytest runs: together they cover every folder."""
    makefile = (TESTS.parent / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    recipe = recipe.replace("\\\n", " ")  # a command continued over lines is one command
    named: set[str] = set()
    # A line may run several commands side by side, separated by `::`.
    commands = [part for line in recipe.splitlines() for part in line.split(" :: ")]
    for command in commands:
        if "$(BIN)/pytest " in command and "DYNALEASE_TRANSPORT" not in command:
            named |= {word for word in command.split() if word.startswith("tests/")}
    folders = {
        f"tests/{path.name}"
        for path in TESTS.iterdir()
        if path.is_dir() and any(path.rglob("test_*.py")) and path.name != "support"
    }
    assert folders <= named, f"`make test` never runs {sorted(folders - named)}"
