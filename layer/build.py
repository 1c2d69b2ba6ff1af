"""Build the dynalease Lambda layer zip: ``python layer/build.py`` (or ``make layer``).

Writes ``layer/dist/dynalease-layer.zip`` with exactly the bytes ``LockLayer``
uploads as its asset: both come from ``dynalease.cdk.build.build_layer``.
No Docker, no downloads: the zip holds the installed dynalease and its
pure-Python runtime dependencies, minus what the Lambda Python runtime ships.

Prints the zipped and unzipped sizes and the sha256, and exits with status 1
when the zip is larger than the budget (3 MiB by default, with Powertools), so
an accidental heavy dependency fails the build instead of slowing cold starts.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from dynalease.cdk.build import SIZE_BUDGET_BYTES, LayerBuildError, build_layer

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "dist" / "dynalease-layer.zip"


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.2f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the zip"
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
        help=f"fail when the zip is larger than this (default {SIZE_BUDGET_BYTES})",
    )
    args = parser.parse_args(argv)
    if args.max_bytes <= 0:
        parser.error(f"--max-bytes must be a positive number of bytes, got {args.max_bytes}")
    try:
        build = build_layer(
            include_powertools=args.include_powertools, include_recovery=args.include_recovery
        )
    except LayerBuildError as error:
        print(f"layer build failed: {error}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(build.zip_path, args.output)
    print(f"wrote {args.output}")
    print(f"  contents: {build.describe()}")
    print(f"  files:    {build.file_count}")
    print(f"  zipped:   {build.zipped_bytes} bytes ({_mib(build.zipped_bytes)})")
    print(f"  unzipped: {build.unzipped_bytes} bytes ({_mib(build.unzipped_bytes)})")
    print(f"  sha256:   {build.sha256}")
    if build.zipped_bytes > args.max_bytes:
        print(
            f"layer is over budget: {build.zipped_bytes} bytes zipped > {args.max_bytes} bytes; "
            "drop the heavy dependency or raise the budget in dynalease/cdk/build.py "
            "(SIZE_BUDGET_BYTES) with a note in docs/cdk.md",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
