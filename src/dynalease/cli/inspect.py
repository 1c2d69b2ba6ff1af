"""``dynalease inspect``: show the lock rows of a table (read-only); ``--watch`` follows renewals.

The reading and the observation rule are in :mod:`dynalease.cli.lock_rows`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

from .._tooling.console import plain_table, rich_table, use_rich
from .common import EXIT_OK, make_client, positive_seconds, table_command
from .lock_rows import (
    HEADERS,
    WATCH_HEADERS,
    Row,
    Watcher,
    count_rows,
    read_rows,
    snapshot_rows,
)


def add_parser(commands: Any) -> None:
    """Register ``inspect`` and its options on the ``dynalease`` subcommands."""
    inspect = table_command(
        commands,
        "inspect",
        "show the lock rows of a table (read-only); --watch follows renewals",
        "Show the lock rows of a table: key, owner, version, lease and whether the "
        "row is a valid protocol-1 row. Read-only: it never writes. --watch re-reads the rows "
        "and shows renewals and how long each row has been observed unchanged, by the same "
        "rule a contender uses to decide a takeover.",
    )
    which = inspect.add_mutually_exclusive_group()
    which.add_argument("--key", help="show only this key (one strongly consistent read)")
    which.add_argument("--prefix", help="show only keys starting with this text")
    inspect.add_argument("--watch", action="store_true", help="re-read until interrupted")
    follow_options(inspect, "with --watch, ", interval=1.0)


def follow_options(parser: argparse.ArgumentParser, when: str, *, interval: float) -> None:
    """``--interval``, ``--for`` and ``--plain``: the options of a view that re-reads."""
    parser.add_argument(
        "--interval",
        type=positive_seconds,
        default=interval,
        help=f"{when}seconds between reads (default {interval:g})",
    )
    parser.add_argument(
        "--for",
        dest="watch_for",
        metavar="SECONDS",
        type=positive_seconds,
        default=None,
        help=f"{when}stop after this many seconds (default: until Ctrl-C)",
    )
    parser.add_argument("--plain", action="store_true", help="plain text, no live view")


def run(args: argparse.Namespace) -> int:
    """Print the rows once, or re-read them every ``--interval`` with ``--watch``."""
    client = make_client(args)

    def read() -> list[Row]:
        return read_rows(client, args.table, key=args.key, prefix=args.prefix)

    if not args.watch:
        rows = read()
        print(plain_table(HEADERS, snapshot_rows(rows)))
        print(f"{count_rows(rows)} in {args.table}")
        return EXIT_OK
    watcher = Watcher(args.table)

    def frame() -> tuple[str, list[tuple[str, ...]]]:
        rows = read()
        cells = watcher.update(rows, time.monotonic())
        return f"{args.table} at {time.strftime('%H:%M:%S')}: {count_rows(rows)}", cells

    return follow(args, WATCH_HEADERS, frame)


def follow(
    args: argparse.Namespace,
    headers: tuple[str, ...],
    frame: Callable[[], tuple[str, list[tuple[str, ...]]]],
) -> int:
    """Show ``frame()`` (a title and table cells) every ``args.interval`` seconds: a live
    view on a terminal, plain text otherwise (or with ``--plain``); until ``--for`` ends
    or Ctrl-C. Shared by ``inspect --watch`` and ``top``."""
    stop: float | None = None  # --for counts from the first view (the first read builds the client)
    view: Any = contextlib.nullcontext()  # as None: plain text
    if use_rich(args.plain):
        from rich.live import Live

        view = Live(auto_refresh=False)
    try:
        with view as live:
            while True:
                title, cells = frame()
                if stop is None and args.watch_for is not None:
                    stop = time.monotonic() + args.watch_for
                if live is not None:
                    live.update(rich_table(title, headers, rich_cells(cells)), refresh=True)
                else:
                    print(title)
                    print(plain_table(headers, cells), flush=True)
                if stop is not None and time.monotonic() + args.interval > stop:
                    return EXIT_OK
                time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        sys.stdout.flush()


def rich_cells(cells: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Cells with rich's markup escaped: a key such as ``[link=...]`` is shown, not obeyed."""
    from rich.markup import escape

    return [tuple(escape(cell) for cell in row) for row in cells]
