"""Build the dynalease Lambda layer zip: ``python layer/build.py`` (or ``make layer``).

Writes ``layer/dist/dynalease-layer-python3.N.zip``, one zip per Python
version, with exactly the bytes ``LockLayer`` uploads as its asset for that
runtime: both come from ``dynalease.cdk.build.build_layer``. No Docker, no
downloads: the zip holds the installed dynalease and its pure-Python runtime
dependencies, minus what the Lambda Python runtime ships, and the bytecode of
every module compiled by an interpreter of that version.

``--python 3.13`` picks the version (default: the version of the Python running
this script); ``--python all`` builds every version an interpreter is found for
and names the ones skipped. ``--interpreter PATH`` gives the interpreter for one
version (else ``DYNALEASE_PYTHON_3_13``, ``python3.13`` on PATH, or pyenv).

Prints the zipped and unzipped sizes, the file count and the sha256, and exits
with status 1 when a zip is larger than the budget (3 MiB by default, with
Powertools), so an accidental heavy dependency fails the build instead of slowing
cold starts.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path

from dynalease.cdk._bytecode import find_interpreter
from dynalease.cdk.build import (
    PYTHON_VERSIONS,
    SIZE_BUDGET_BYTES,
    LayerBuild,
    LayerBuildError,
    build_layer,
    running_python,
)

DIST = Path(__file__).resolve().parent / "dist"


def default_output(python: str) -> Path:
    """Where the zip for Python ``python`` goes by default."""
    return DIST / f"dynalease-layer-python{python}.zip"


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.2f} MiB"


def _report(build: LayerBuild, output: Path) -> None:
    (python,) = build.pythons  # one version per zip here
    print(f"wrote {output} (for the python{python} runtime)")
    print(f"  contents: {build.describe()}")
    print(f"  files:    {build.file_count} ({build.bytecode_files} of them cpython bytecode)")
    print(f"  zipped:   {build.zipped_bytes} bytes ({_mib(build.zipped_bytes)})")
    print(f"  unzipped: {build.unzipped_bytes} bytes ({_mib(build.unzipped_bytes)})")
    print(f"  sha256:   {build.sha256}")


def _versions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    if args.python != "all":
        if args.python not in PYTHON_VERSIONS:
            parser.error(
                f"--python must be one of {', '.join(PYTHON_VERSIONS)} or 'all', "
                f"got {args.python!r}"
            )
        return [args.python]
    if args.output is not None or args.interpreter is not None:
        parser.error("--output and --interpreter name one zip; use them with one --python version")
    found = []
    for version in PYTHON_VERSIONS:
        try:
            find_interpreter(version)
        except LookupError as error:
            print(f"skipping Python {version}: {error}", file=sys.stderr)
        else:
            found.append(version)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        default=running_python(),
        help="the Lambda runtime's Python version, e.g. 3.13, or 'all' "
        f"(default: this interpreter's, {running_python()})",
    )
    parser.add_argument(
        "--interpreter", help="a Python interpreter of that version to compile the bytecode"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="where to write the zip (default layer/dist/dynalease-layer-python3.N.zip)",
    )
    parser.add_argument(
        "--no-powertools",
        dest="include_powertools",
        action="store_false",
        help="leave AWS Lambda Powertools out of the layer",
    )
    parser.add_argument(
        "--no-recovery",
        dest="include_recovery",
        action="store_false",
        help="leave the recovery extension (extensions/dynalease-recovery) out of the layer",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=SIZE_BUDGET_BYTES,
        help=f"fail when a zip is larger than this (default {SIZE_BUDGET_BYTES})",
    )
    args = parser.parse_args(argv)
    if args.max_bytes <= 0:
        parser.error(f"--max-bytes must be a positive number of bytes, got {args.max_bytes}")
    versions = _versions(parser, args)
    if not versions:
        print("layer build failed: no Python 3.11+ interpreter found", file=sys.stderr)
        return 1
    status = 0
    for version in versions:
        try:
            build = build_layer(
                python=version,
                interpreter=args.interpreter,
                include_powertools=args.include_powertools,
                include_recovery=args.include_recovery,
            )
        except LayerBuildError as error:
            print(f"layer build failed for Python {version}: {error}", file=sys.stderr)
            return 1
        output = args.output if args.output is not None else default_output(version)
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(build.zip_path, output)
        if hashlib.sha256(output.read_bytes()).hexdigest() != build.sha256:
            print(f"layer build failed: {build.zip_path} changed during the copy", file=sys.stderr)
            return 1
        _report(build, output)
        if build.zipped_bytes > args.max_bytes:
            print(
                f"layer for Python {version} is over budget: {build.zipped_bytes} bytes zipped > "
                f"{args.max_bytes} bytes; drop the heavy dependency or raise the budget in "
                "dynalease/cdk/build.py (SIZE_BUDGET_BYTES) with a note in docs/cdk.md",
                file=sys.stderr,
            )
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
