"""``python -m benchmarks.extension_init``: the recovery extension's init, with bytecode or not.

Lambda bills INIT, and an extension's init is part of it: the sandbox waits
until every extension has asked for its first event. This starts the layer's
``extensions/dynalease-recovery`` launcher (``/bin/sh``, then the Python of the
layer's version running ``dynalease._extension.recovery``) against a local
Extensions API (:mod:`dynalease_dev.lambda_api`) and times process start to
its first ``event/next`` request, ``--starts`` times (default 10) per Python
version found here, from:

- the layer zip as built for that version (``build_layer(python=...)``), whose
  bytecode the importer uses;
- the same files without ``__pycache__``: every module compiled at each start.

Both run with ``PYTHONDONTWRITEBYTECODE=1``, as on Lambda's read-only ``/opt``.
Each start's ``event/next`` is answered with a ``SHUTDOWN`` the extension does
not recover on, so it exits at once.

    python -m benchmarks.extension_init
    python -m benchmarks.extension_init --python 3.13 --starts 20
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

from dynalease_dev.lambda_api import Answer, ApiServer, registered

from dynalease.cdk._bytecode import find_interpreter
from dynalease.cdk.build import build_layer

from .layer_cold import available

_REGISTER = "/2020-01-01/extension/register"
_NEXT = "/2020-01-01/extension/event/next"
_TIMEOUT_S = 30.0


class _Api:
    """Registers any extension; notes when ``event/next`` arrives and answers SHUTDOWN."""

    def __init__(self) -> None:
        self.first_next: queue.Queue[float] = queue.Queue()
        self.server = ApiServer(self._answer)

    def _answer(self, method: str, path: str, headers: Any, body: bytes) -> Answer:
        if method == "POST" and path == _REGISTER:
            return registered(str(uuid.uuid4()), handler="bench.handler")
        if method == "GET" and path == _NEXT:
            self.first_next.put(time.monotonic())
            deadline_ms = int(time.time() * 1000) + 2000
            event = {"eventType": "SHUTDOWN", "shutdownReason": "bench", "deadlineMs": deadline_ms}
            return 200, {}, event
        return 404, {}, {"errorType": "NotFound", "errorMessage": path}


def _unpack(zip_path: Path, into: Path, *, bytecode: bool) -> Path:
    with zipfile.ZipFile(zip_path) as archive:
        for member in archive.infolist():
            if bytecode or "__pycache__" not in member.filename:
                archive.extract(member, into)
    launcher = into / "extensions" / "dynalease-recovery"
    launcher.chmod(0o755)  # zipfile does not restore modes; Lambda does
    return launcher


def _one_start(api: _Api, launcher: Path, env: dict[str, str], journal: Path) -> float:
    started = time.monotonic()
    process = subprocess.Popen(
        [str(launcher)],
        env=env,
        cwd=journal,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        arrived = api.first_next.get(timeout=_TIMEOUT_S)
    except queue.Empty:
        process.kill()
        _, stderr = process.communicate()
        raise RuntimeError(
            f"{launcher} never asked for an event:\n{stderr.decode()[-2000:]}"
        ) from None
    process.communicate(timeout=_TIMEOUT_S)
    return arrived - started


def measure(version: str, starts: int, work: Path) -> dict[str, list[float]]:
    """Init seconds of ``starts`` starts each, with the layer's bytecode and without."""
    interpreter = find_interpreter(version)
    build = build_layer(python=version)
    api = _Api()
    journal = work / "journal"
    journal.mkdir(mode=0o700, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "VIRTUAL_ENV", "DYNALEASE_"))
    }
    env.update(
        AWS_LAMBDA_RUNTIME_API=api.server.address,
        DYNALEASE_EXTENSION_PYTHON=str(interpreter),
        DYNALEASE_JOURNAL_DIR=str(journal),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
    )
    launchers = {
        label: _unpack(build.zip_path, work / f"{version}-{label}", bytecode=label == "bytecode")
        for label in ("bytecode", "source")
    }
    results: dict[str, list[float]] = {label: [] for label in launchers}
    try:
        for index in range(starts):
            # Alternate which goes first, so neither always follows the other.
            order = list(launchers) if index % 2 == 0 else list(reversed(launchers))
            for label in order:
                results[label].append(_one_start(api, launchers[label], env, journal))
    finally:
        api.server.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", metavar="3.N", help="repeat; default all")
    parser.add_argument("--starts", type=int, default=10, help="starts per variant (default 10)")
    args = parser.parse_args(argv)
    if args.starts < 1:
        parser.error(f"--starts must be at least 1, got {args.starts}")
    versions = available(args.python)
    if not versions:
        parser.error("no Python 3.11+ interpreter found (PATH, pyenv, DYNALEASE_PYTHON_3_N)")
    print(f"# recovery extension init: process start -> first event/next, {args.starts} starts")
    print("| Python | with bytecode: median (min-max) | without: median (min-max) | ratio |")
    print("|---|---|---|---|")
    work = Path(tempfile.mkdtemp(prefix="dynalease-extinit-"))
    try:
        for version in versions:
            results = measure(version, args.starts, work)
            cells = [
                f"{statistics.median(times) * 1000:.0f} ms "
                f"({min(times) * 1000:.0f}-{max(times) * 1000:.0f})"
                for times in (results["bytecode"], results["source"])
            ]
            ratio = statistics.median(results["bytecode"]) / statistics.median(results["source"])
            print(f"| {version} | {cells[0]} | {cells[1]} | {ratio:.2f} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
