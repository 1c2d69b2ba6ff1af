"""``python -m benchmarks.instructions``: instructions per uncontended cycle, counted.

CPU time per cycle moves by a tenth between runs of the same code on a shared host (and
the two libraries move apart: dynalease's time is mostly Python, pydynox's mostly system
calls and thread hand-overs). An instruction count does not move: each library runs its
cycles in a child process under ``valgrind --tool=callgrind``, once with ``--few`` cycles
and once with ``--few + --cycles``; the difference, divided by ``--cycles``, is one cycle's
user-space instructions, start-up and imports cancelled out.

It counts user space only: the kernel's work for a request (and for pydynox's thread
hand-overs) is not in it, so it is a figure to compare versions of dynalease with, beside
the timed ``uncontended`` workload, not a replacement for it. Under valgrind OpenSSL takes
its generic code paths, so signing counts for more than it costs on the real processor.

    python -m benchmarks.instructions                 # both libraries, both server modes
    python -m benchmarks.instructions --keep-alive    # kept-alive connections only
    python -m benchmarks.instructions --library dynalease
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

from dynalease._tooling.local_server import LocalServer

from .libs import LIBRARIES, create_table, make, use_test_credentials

_COLLECTED = re.compile(r"Collected : (\d+)")


def _cycles(library: str, endpoint: str, table: str, count: int) -> None:
    """In the child: ``count`` uncontended acquire+release cycles, as ``uncontended`` runs them."""
    lib = make(library, endpoint)
    key = f"instructions-{library}-{uuid.uuid4().hex[:8]}"
    for _ in range(count):
        with lib.sync(table, key):
            pass


def _counted(library: str, endpoint: str, table: str, count: int) -> int:
    """User-space instructions of a child process that runs ``count`` cycles."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={scratch}/callgrind.out",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--child",
            library,
            endpoint,
            table,
            str(count),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"the callgrind run of {library} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_cycle(library: str, endpoint: str, table: str, few: int, cycles: int) -> float:
    """Instructions of one cycle: the difference of two runs, over the cycles between them."""
    short = _counted(library, endpoint, table, few)
    long = _counted(library, endpoint, table, few + cycles)
    return (long - short) / cycles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    parser.add_argument("--keep-alive", action="store_true", help="only the kept-alive server")
    parser.add_argument("--few", type=int, default=20, help="cycles of the short run")
    parser.add_argument("--cycles", type=int, default=200, help="cycles the long run adds")
    parser.add_argument(
        "--library", choices=LIBRARIES, help="count one library only (no ratio is printed)"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        library, endpoint, table, count = args.child
        _cycles(library, endpoint, table, int(count))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind", file=sys.stderr)
        return 2
    use_test_credentials()
    print(f"# Instructions per uncontended cycle (callgrind, Python {sys.version.split()[0]})\n")
    libraries = [args.library] if args.library else list(LIBRARIES)
    print(f"| server | {' | '.join(libraries)} | ratio |")
    print(f"|---|{'---:|' * len(libraries)}---:|")
    for keep_alive in (True,) if args.keep_alive else (True, False):
        with LocalServer(keep_alive=keep_alive) as moto:
            table = f"bench-{uuid.uuid4().hex[:8]}"
            create_table(moto.url, table)
            counts = [per_cycle(name, moto.url, table, args.few, args.cycles) for name in libraries]
        mode = "kept alive" if keep_alive else "a connection per request"
        ratio = f"{counts[0] / counts[1]:.2f}" if len(counts) == 2 else "-"
        shown = " | ".join(f"{count / 1000:,.0f}k" for count in counts)
        print(f"| {mode} | {shown} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
