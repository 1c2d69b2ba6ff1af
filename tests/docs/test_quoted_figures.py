"""Figures the docs quote from the demo are the demo's own: a change to its plan fails here."""

from __future__ import annotations

import pathlib
import re

from dynalease_dev.demo.plan import DemoOptions, Plan

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def _text(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


def test_operations_quotes_the_demos_lease_and_duration_for_both_runs() -> None:
    text = _text("operations.md")
    full = Plan.from_options(DemoOptions(), "x")
    quick = Plan.from_options(DemoOptions(quick=True), "x")
    found = re.search(
        r"about (\S+) s with the (\S+) s lease of `make demo`'s (\S+) s run, "
        r"about (\S+) s with the (\S+) s lease of `dynalease-dev demo --quick`",
        text,
    )
    assert found, "operations.md no longer states the demo's takeover figures"
    takeover, lease, duration, quick_takeover, quick_lease = (float(g) for g in found.groups())
    assert (lease, duration) == (full.lease_s, full.duration_s)
    assert quick_lease == quick.lease_s
    # A takeover by observation comes about one stored lease after the last renewal.
    assert takeover == lease and quick_takeover == quick_lease
