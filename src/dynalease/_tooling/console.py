"""Terminal output for the ``dynalease`` command and the demo: tables in plain text or with rich.

rich is optional (it ships with the ``dev`` extra): without it, or when output is
not a terminal, everything is plain aligned text, so scripts and tests can read it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import Any


def use_rich(plain: bool) -> bool:
    return not plain and sys.stdout.isatty() and importlib.util.find_spec("rich") is not None


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = [headers, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def rich_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Any:
    """The same table as a rich renderable."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    return table
