"""``lambda_cold`` as Lambda loads a function: from layers, by an interpreter of their version.

Lambda unpacks layers under ``/opt`` and the function under ``/var/task``, both
read-only: Python uses the bytecode a layer carries and compiles from source, on
every cold start, what has none. So each run here is:

- the library's layer, unpacked: dynalease's zip as ``LockLayer`` ships it for
  that Python version (``build_layer(python=...)``, bytecode included), or pydynox
  1.8 with the same Powertools release installed by ``pip install --target``
  (which compiles bytecode, as publishing a pip-built layer does);
- a stand-in for ``/var/runtime``: boto3 and its dependencies, pip-installed for
  that version (what the Lambda Python runtime ships; dynalease's layer leaves them
  out, and Powertools needs jmespath from there);
- the handler modules and the child script copied to a "task" directory without
  bytecode, as a function's own code usually is;
- ``PYTHONDONTWRITEBYTECODE=1``: nothing is written, so what has no bytecode is
  compiled in every run, as on Lambda (a read-only directory would not stop root);
- a fresh interpreter of that version: Powertools' ``Logger``, the handler module,
  the first locked invoke against the benchmark's moto server
  (:func:`benchmarks.child.lambda_cold`).

The pip-installed directories are kept in ``~/.cache/dynalease/bench`` (they need
the package index once); the unpacked layers and the task directory are made
afresh in a temporary directory for each benchmark process.
"""

from __future__ import annotations

import atexit
import importlib.metadata as metadata
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynalease.cdk._bytecode import find_interpreter
from dynalease.cdk.build import PYTHON_VERSIONS, build_layer, default_cache_dir

PYDYNOX = "pydynox==1.8.0"
BENCH = Path(__file__).resolve().parent
_TASK_FILES = ("__init__.py", "child.py", "libs.py", "handlers")


@dataclass(frozen=True)
class Runtime:
    """One Python version's interpreter and the directories a cold start reads."""

    version: str
    interpreter: Path
    task: Path
    runtime_packages: Path
    layers: dict[str, Path]
    """Library name -> the directory on ``sys.path`` holding its layer's packages."""


_PREPARED: dict[str, Runtime] = {}
_WORK: list[Path] = []


def available(requested: list[str] | None = None) -> list[str]:
    """The Python versions (of ``requested``, default all) with an interpreter on this machine."""
    found = []
    for version in requested or PYTHON_VERSIONS:
        try:
            find_interpreter(version)
        except LookupError:
            continue
        found.append(version)
    return found


def _work() -> Path:
    if not _WORK:
        directory = Path(tempfile.mkdtemp(prefix="dynalease-cold-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        _WORK.append(directory)
    return _WORK[0]


def _pip_target(interpreter: Path, target: Path, requirements: list[str]) -> Path:
    """``pip install --target`` once per set of requirements; reused while it is complete."""
    done = target / ".complete"
    if done.is_file():
        return target
    shutil.rmtree(target, ignore_errors=True)
    command = [str(interpreter), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-user", "--target", str(target), *requirements]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed; the cold-start benchmark needs these packages for "
            f"{interpreter}:\n{result.stderr[-2000:]}"
        )
    done.write_text(" ".join(requirements) + "\n")
    return target


def _task(work: Path) -> Path:
    task = work / "task"
    if not task.is_dir():
        for name in _TASK_FILES:
            source = BENCH / name
            if source.is_dir():
                shutil.copytree(source, task / "benchmarks" / name, ignore=_no_bytecode)
            else:
                (task / "benchmarks").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, task / "benchmarks" / name)
    return task


def _no_bytecode(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__" or name.endswith(".pyc")]


def prepare(version: str, *, bytecode: bool = True) -> Runtime:
    """Build and unpack both layers for ``version`` (once per process).

    ``bytecode=False`` unpacks dynalease's layer without its ``__pycache__``, as
    layers were built before they carried bytecode, for comparison.
    """
    key = f"{version}/{bytecode}"
    if key in _PREPARED:
        return _PREPARED[key]
    interpreter = find_interpreter(version)
    work = _work()
    cache = default_cache_dir().parent / "bench"
    powertools = metadata.version("aws-lambda-powertools")
    tag = version.replace(".", "")
    pydynox = _pip_target(
        interpreter,
        cache / f"pydynox-1.8.0-powertools-{powertools}-py{tag}",
        [PYDYNOX, f"aws-lambda-powertools=={powertools}"],
    )
    runtime_packages = _pip_target(
        interpreter, cache / f"runtime-py{tag}", [f"boto3=={metadata.version('boto3')}"]
    )
    build = build_layer(python=version)
    unpacked = work / f"dynalease-layer-{version}-{'bytecode' if bytecode else 'source'}"
    with zipfile.ZipFile(build.zip_path) as archive:
        for member in archive.infolist():
            if bytecode or "__pycache__" not in member.filename:
                archive.extract(member, unpacked)
    prepared = Runtime(
        version=version,
        interpreter=interpreter,
        task=_task(work),
        runtime_packages=runtime_packages,
        layers={"dynalease": unpacked / "python", "pydynox": pydynox},
    )
    _PREPARED[key] = prepared
    return prepared


def run(
    lib: str, runtime: Runtime, endpoint: str, table: str, *, init_type: str = "on-demand"
) -> tuple[dict[str, Any], float, float]:
    """One cold start of ``lib``'s handler: the child's figures, spawn-to-exit wall, child CPU.

    ``init_type`` is the environment's ``AWS_LAMBDA_INITIALIZATION_TYPE``, as Lambda sets it.
    """
    layer = runtime.layers[lib]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(runtime.task), str(layer), str(runtime.runtime_packages)]),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        DYNALEASE_BENCH_LAYER=str(layer),
        AWS_LAMBDA_INITIALIZATION_TYPE=init_type,
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [str(runtime.interpreter), "-m", "benchmarks.child", "lambda_cold", lib, endpoint, table],
        cwd=runtime.task,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"cold start of {lib} on Python {runtime.version} failed:\n{done.stderr[-2000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report, wall, cpu
