"""Infra fixtures: the CDK app synthesized once per session, and a fresh layer cache.

jsii starts a Node process and loads aws-cdk-lib on first import, which takes
seconds, so every app template here comes from one synthesis shared by the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from infra_helpers import EXAMPLE_STACK, LOCK_STACK, ROOT, Assembly

# Before aws_cdk is imported anywhere: the import starts jsii, which reads this.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture(scope="session", autouse=True)
def layer_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache the tests start empty, so they build the layer instead of reusing one."""
    path = tmp_path_factory.mktemp("layer-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DYNALEASE_LAYER_CACHE", str(path))
        yield path


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory, layer_cache: Path) -> Assembly:
    """``python infra/app.py`` run once, as a user would, without the CDK CLI."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    started_wall = time.time()
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "app.py")],
        env={**os.environ, "CDK_OUTDIR": str(outdir)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    seconds = time.perf_counter() - started
    assert result.returncode == 0, f"infra/app.py failed:\n{result.stderr[-4000:]}"
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {
        stack: json.loads((outdir / f"{stack}.template.json").read_text())
        for stack in (LOCK_STACK, EXAMPLE_STACK)
    }
    print(f"\ninfra/app.py synthesized in {seconds:.1f} s")
    return Assembly(outdir, manifest, templates, seconds, started_wall)
