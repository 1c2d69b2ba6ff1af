"""``dynalease-dev invoke --lifecycle``: a handler run the way Lambda runs it, timeouts and all.

Where plain ``dynalease-dev invoke`` calls the handler in this interpreter, this
runs it under the local control plane (:mod:`.lambda_plane`): the runtime
interface client (``awslambdaric``, dev extra) as the runtime process, the
recovery extension as its own process from a layer-like directory, and the
function timeout enforced by killing the runtime and sending ``SHUTDOWN``. An
event file holding a JSON list is one invocation per element, in order, on the
same function, so a timeout and what the next invocation finds can be watched::

    dynalease-dev invoke --lifecycle examples/lambda/timeout_handler.py:handler \\
        events/lifecycle-timeout.json --timeout 12 --table locks

Each invocation prints one line (status, seconds, result or error); a timeout
or crash adds what happened to the sandbox; the extension's own log lines
follow, and the runtime's output goes to stderr.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import dynalease

from .lambda_plane import ControlPlane, Invocation

__all__ = ["layer_directory", "main"]

_PACKAGE = Path(dynalease.__file__).resolve().parent  # the installed dynalease/


def _parser(
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    from dynalease.cli.common import endpoint_url

    parser = parser_class(
        prog="dynalease-dev invoke --lifecycle",
        description="Run a handler under a local Lambda control plane: the runtime "
        "interface client, the recovery extension, the timeout enforced by a kill.",
    )
    parser.add_argument("handler", help="FILE.py:FUNCTION")
    parser.add_argument("event", help="a JSON event file; a JSON list is one invocation each")
    parser.add_argument("--timeout", type=float, default=30.0, help="function timeout (s)")
    parser.add_argument("--table", help="sets DYNALEASE_TABLE")
    parser.add_argument("--endpoint", type=endpoint_url, help="sets AWS_ENDPOINT_URL_DYNAMODB")
    parser.add_argument("--region", help="sets AWS_REGION")
    parser.add_argument(
        "--no-extension",
        dest="extension",
        action="store_false",
        help="leave the recovery extension out, to see the difference",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="run as Lambda Managed Instances: one runtime serving up to N invocations at "
        "once (awslambdaric's multi-concurrent mode, Python 3.13 or later: see --python); "
        "the events of a list are sent together, and a timeout is reported, not enforced",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the runtime's interpreter, with awslambdaric installed (default: this one)",
    )
    return parser


def _runtime_problem(python: str, *, managed: bool) -> str | None:
    """Why ``python`` cannot be the runtime's interpreter (None when it can)."""
    probe = "import sys, awslambdaric; print('%d.%d' % sys.version_info[:2])"
    try:
        found = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:
        return f"--python {python!r} cannot be run: {error.strerror or error}"
    if found.returncode != 0:
        return (
            f"the runtime's interpreter {python} has no awslambdaric: install it there "
            "(pip install awslambdaric) or pass --python PATH"
        )
    version = found.stdout.strip()
    if managed and tuple(int(part) for part in version.split(".")) < (3, 13):
        return (
            f"--max-concurrency runs awslambdaric's multi-concurrent mode, which needs Python "
            f"3.13 or later, and {python} is {version}: pass --python PATH to a 3.13 "
            "interpreter with awslambdaric (make builds .venv-3.13)"
        )
    return None


def layer_directory(directory: Path, *, extension: bool) -> Path:
    """A layer-like directory: ``python/dynalease`` (this package) and the extension."""
    (directory / "python").mkdir(parents=True)
    (directory / "python" / "dynalease").symlink_to(_PACKAGE)
    if extension:
        (directory / "extensions").mkdir()
        launcher = directory / "extensions" / "dynalease-recovery"
        shutil.copyfile(_PACKAGE / "_extension" / "dynalease-recovery", launcher)
        launcher.chmod(0o755)
    return directory


class _Logs:
    """Prints what the sandbox processes wrote since the last look."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.read: dict[Path, int] = {}

    def show(self) -> None:
        for path in sorted(self.directory.glob("*.log")):
            text = path.read_bytes()[self.read.get(path, 0) :].decode("utf-8", "replace")
            self.read[path] = self.read.get(path, 0) + len(text.encode("utf-8"))
            runtime = path.name.endswith("-runtime.log")
            for line in text.splitlines():
                if runtime:
                    print(f"  [runtime] {line}", file=sys.stderr)
                else:
                    print(f"  [{path.stem.split('-', 1)[1]}] {line}")


def main(
    argv: list[str] | None = None,
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> int:
    """0 when the last invocation returned, 1 when it failed or timed out, 2 on bad input.

    ``parser_class`` is the command line's (``dynalease-dev invoke`` passes its own).
    """
    parser = _parser(parser_class)
    arguments = parser.parse_args(argv)
    if not 0 < arguments.timeout <= 900:
        parser.error(f"--timeout must be more than 0 and at most 900 s, got {arguments.timeout:g}")
    managed = arguments.max_concurrency is not None
    if managed and arguments.max_concurrency < 1:
        parser.error(
            f"--max-concurrency must be 1 or more invocations at once, got "
            f"{arguments.max_concurrency}"
        )
    file, _, function = arguments.handler.rpartition(":")
    path = Path(file)
    if not file.endswith(".py") or not function.isidentifier() or not path.is_file():
        parser.error(f"the handler must be FILE.py:FUNCTION of an existing file, got {file!r}")
    try:
        loaded = json.loads(Path(arguments.event).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        parser.error(f"cannot read the event {arguments.event}: {error}")
    events: list[Any] = loaded if isinstance(loaded, list) else [loaded]
    python = arguments.python or sys.executable
    if arguments.python or managed:
        problem = _runtime_problem(python, managed=managed)
        if problem:
            parser.error(problem)
    environment = dict(os.environ)
    for name, value in (
        ("DYNALEASE_TABLE", arguments.table),
        ("AWS_ENDPOINT_URL_DYNAMODB", arguments.endpoint),
        ("AWS_REGION", arguments.region),
    ):
        if value:
            environment[name] = value
    last = "ok"
    with tempfile.TemporaryDirectory(prefix="dynalease-lifecycle-") as temporary:
        directory = Path(temporary)
        plane = ControlPlane(
            task=path.resolve().parent,
            handler=f"{path.stem}.{function}",
            layer=layer_directory(directory / "layer", extension=arguments.extension),
            environment=environment,
            timeout=arguments.timeout,
            journal=directory / "journal",
            logs=directory / "logs",
            max_concurrency=arguments.max_concurrency,
            python=python,
        )
        logs = _Logs(directory / "logs")
        extension = "with" if arguments.extension else "without"
        mode = (
            f"; Lambda Managed Instances, up to {arguments.max_concurrency} invocations at once"
            if managed
            else ""
        )
        print(
            f"function {path.name}:{function}, timeout {arguments.timeout:g} s, {extension} "
            f"the recovery extension{mode}"
        )
        try:
            if managed:  # sent together: the runtime's workers take them as they come
                with concurrent.futures.ThreadPoolExecutor(len(events)) as senders:
                    running = [senders.submit(plane.invoke, event) for event in events]
                    for number, future in enumerate(running, 1):
                        last = _report(number, future.result(), arguments.extension)
                logs.show()
            else:  # one after another, each in a fresh sandbox after a timeout or crash
                for number, event in enumerate(events, 1):
                    last = _report(number, plane.invoke(event), arguments.extension)
                    logs.show()
        finally:
            plane.close()
            logs.show()
    return 0 if last == "ok" else 1


def _report(number: int, invocation: Invocation, extension: bool) -> str:
    """Print one invocation's line (and what befell its sandbox); its status."""
    seconds = invocation.ended - invocation.started
    payload = json.dumps(invocation.payload, default=str)
    print(f"invocation {number}: {invocation.status} after {seconds:.2f} s: {payload}")
    if invocation.stopped_at is not None and invocation.shutdown_done is not None:
        timed_out = invocation.status == "timeout"
        how = "killed at the deadline" if timed_out else "died"
        reason = "timeout" if timed_out else "failure"
        done = invocation.shutdown_done - invocation.stopped_at
        told = (
            f"SHUTDOWN ({reason}) went to the extension, done {done:.2f} s later"
            if extension
            else "no extension to tell: its rows stay for their lease"
        )
        print(f"  the runtime was {how}; {told}; the next invocation starts a fresh sandbox")
    return invocation.status
