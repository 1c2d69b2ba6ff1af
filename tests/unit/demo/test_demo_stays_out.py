"""The demo is dev tooling: the library never loads it, and it never loads the command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _loaded_after(code: str, packages: tuple[str, ...]) -> list[str]:
    # A fresh interpreter: this test process has imported half the package already.
    wanted = [package.split(".") for package in packages]
    probe = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[:2] in {wanted!r})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    found: list[str] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("module", ["dynalease", "dynalease.middleware"])
def test_importing_the_library_or_the_middleware_never_imports_the_demo(module: str) -> None:
    assert _loaded_after(f"import {module}", ("dynalease_dev.demo", "dynalease.cli")) == []


def test_the_demo_and_its_processes_never_import_the_command() -> None:
    code = (
        "import dynalease_dev.demo.runner, dynalease_dev.demo.worker, "
        "dynalease_dev.demo.lambda_invocations, dynalease._tooling.local_server"
    )
    assert _loaded_after(code, ("dynalease.cli",)) == []


def test_asking_the_command_for_help_does_not_import_the_demo() -> None:
    code = (
        "import contextlib, io, dynalease_dev.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    dynalease_dev.cli.main(['demo', '--help'])"
    )
    assert _loaded_after(code, ("dynalease_dev.demo",)) == []
