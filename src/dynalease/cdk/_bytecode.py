"""Bytecode for the layer: find an interpreter of the target Python version and compile with it.

``/opt`` is read-only, so a module without a ``.pyc`` is compiled on every cold start; the
``.pyc`` files are unchecked-hash (PEP 552): no timestamp, so two builds give the same bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

__all__ = ["compile_sources", "find_interpreter", "interpreter_env_var", "running_python"]

# Run with -I, so nothing of the build's environment or working directory is imported;
# ddir records the path the module has in Lambda.
_COMPILE = """
import compileall, py_compile, sys
root, want = sys.argv[1], sys.argv[2]
if "%d.%d" % sys.version_info[:2] != want:
    sys.exit("this interpreter is Python %d.%d, not %s" % (sys.version_info[:2] + (want,)))
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
if not compileall.compile_dir(root, ddir="/opt", quiet=1, invalidation_mode=mode):
    sys.exit(1)
print(sys.implementation.cache_tag)
"""
_COMPILE_TIMEOUT_S = 300
_PROBE_TIMEOUT_S = 30


def interpreter_env_var(version: str) -> str:
    return "DYNALEASE_PYTHON_" + version.replace(".", "_")


def running_python() -> str:
    """The version of the interpreter running this code, e.g. ``'3.11'``: the default target."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _pyenv_candidates(version: str) -> list[Path]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = [
        (int(patch), entry / "bin" / f"python{version}")
        for entry in root.glob(f"{version}.*")
        if (patch := entry.name.removeprefix(f"{version}.")).isdecimal()
    ]
    return [path for _, path in sorted(found, reverse=True)]


def _version_of(path: Path) -> str | None:
    """The ``3.N`` ``path`` runs as, or None if it does not run (e.g. an inactive pyenv shim)."""
    try:
        done = subprocess.run(
            [str(path), "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _given(path: Path, version: str, where: str) -> Path:
    found = _version_of(path) if path.is_file() and os.access(path, os.X_OK) else None
    if found != version:
        what = "is not an executable Python" if found is None else f"is Python {found}"
        raise LookupError(f"{where} {str(path)!r} {what}, not Python {version}")
    return path


def find_interpreter(version: str, interpreter: str | os.PathLike[str] | None = None) -> Path:
    """A Python ``version`` interpreter (``'3.13'``); ``LookupError`` says how to provide one."""
    if interpreter is not None:
        return _given(Path(interpreter), version, "the interpreter")
    explicit = os.environ.get(interpreter_env_var(version))
    if explicit:
        return _given(Path(explicit), version, interpreter_env_var(version))
    if running_python() == version:
        return Path(sys.executable)
    on_path = shutil.which(f"python{version}")
    candidates = ([Path(on_path)] if on_path else []) + _pyenv_candidates(version)
    for candidate in candidates:
        if candidate.is_file() and _version_of(candidate) == version:
            return candidate
    raise LookupError(
        f"no Python {version} interpreter found to compile the layer's bytecode: install "
        f"Python {version} (e.g. pyenv install {version}) so that python{version} is on PATH or "
        f"under $PYENV_ROOT/versions, or set {interpreter_env_var(version)} to its path "
        "(layer/build.py: --interpreter PATH)"
    )


def compile_sources(
    interpreter: Path, version: str, sources: Mapping[str, bytes]
) -> dict[str, bytes]:
    """Compile ``sources`` (zip path: ``.py`` bytes) with ``interpreter``; ``.pyc`` by zip path."""
    with tempfile.TemporaryDirectory(prefix="dynalease-bytecode-") as directory:
        root = Path(directory)
        for name, content in sources.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        done = subprocess.run(
            [str(interpreter), "-I", "-c", _COMPILE, directory, version],
            capture_output=True,
            text=True,
            timeout=_COMPILE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"compiling the layer's bytecode with {interpreter} (for Python {version}) "
                f"failed: {(done.stderr.strip() or done.stdout.strip())[-1500:]}"
            )
        tag = done.stdout.strip()
        compiled: dict[str, bytes] = {}
        for name in sources:
            source = PurePosixPath(name)
            pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
            compiled[str(pyc)] = (root / pyc).read_bytes()
        return compiled
