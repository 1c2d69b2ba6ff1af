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
from dataclasses import dataclass
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


@dataclass
class _Synthesis:
    outdir: Path
    process: subprocess.Popen[str]
    started_wall: float
    started: float


@pytest.fixture(scope="session", autouse=True)
def _synthesis(tmp_path_factory: pytest.TempPathFactory, layer_cache: Path) -> Iterator[_Synthesis]:
    """Start ``python infra/app.py`` as soon as the infra tests start.

    It runs on the other core while the in-process construct tests synthesize
    their own stacks; the ``assembly`` fixture waits for it.
    """
    outdir = tmp_path_factory.mktemp("cdk.out")
    started_wall = time.time()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "infra" / "app.py")],
        env={**os.environ, "CDK_OUTDIR": str(outdir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield _Synthesis(outdir, process, started_wall, time.perf_counter())
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope="session")
def assembly(_synthesis: _Synthesis) -> Assembly:
    """``python infra/app.py`` run once, as a user would, without the CDK CLI."""
    _, stderr = _synthesis.process.communicate(timeout=300)
    seconds = time.perf_counter() - _synthesis.started
    assert _synthesis.process.returncode == 0, f"infra/app.py failed:\n{stderr[-4000:]}"
    outdir = _synthesis.outdir
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {
        stack: json.loads((outdir / f"{stack}.template.json").read_text())
        for stack in (LOCK_STACK, EXAMPLE_STACK)
    }
    print(f"\n{stderr.strip()} (waited {seconds:.1f} s)")
    return Assembly(outdir, manifest, templates, seconds, _synthesis.started_wall)
