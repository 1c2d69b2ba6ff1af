"""A short soak (benchmarks/soak.py) must finish with zero violations.

Four worker processes contend for two keys for about fifteen seconds while the
soak kills and pauses holders; the history of every commit is then checked.
The long run is documented in docs/soak.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def short_soak(endpoint: str, *options: str) -> tuple[dict[str, Any], str]:
    """Run the soak for 15 s (four processes, two keys, chaos every 3 s); its figures and
    its output. It must exit 0."""
    command = [
        sys.executable, "-m", "benchmarks.soak",
        "--processes", "4", "--seconds", "15", "--keys", "2",
        "--lease", "1.5", "--chaos-every", "3", *options,
        "--endpoint", endpoint, "--json",
    ]  # fmt: skip
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=100)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(next(line for line in result.stdout.splitlines() if line[:1] == "{"))
    return figures, result.stdout


@pytest.mark.process_history
def test_a_short_soak_with_killed_and_paused_holders_has_no_violations(endpoint: str) -> None:
    figures, output = short_soak(endpoint, "--progress-every", "4")
    assert figures["violations"] == 0
    assert figures["overlaps"] == 0 and figures["stale_commits"] == 0
    assert figures["acquisitions"] > 0 and figures["commits"] > 0
    # The run exercised failures: at least one holder was killed or paused.
    assert figures["kills"] + figures["pauses"] >= 1
    assert "soak: ok, 0 violations" in output
    # A progress line every 4 s while it runs: acquisitions, takeovers, violations so far.
    progress = [line for line in output.splitlines() if re.match(r"soak: \d+/15 s, ", line)]
    assert len(progress) >= 2, output
    assert re.fullmatch(
        r"soak: \d+/15 s, \d+ acquisitions?, \d+ takeovers?, \d+ kills?, \d+ pauses?, "
        r"violations so far: 0",
        progress[-1],
    ), progress


@pytest.mark.process_history
def test_a_short_fenced_soak_keeps_its_tokens_in_order_along_the_history(endpoint: str) -> None:
    figures, _ = short_soak(endpoint, "--fencing")
    assert figures["violations"] == 0 and figures["bad_tokens"] == 0
    assert figures["acquisitions"] > 0 and figures["fenced_writes"] > 0
    assert figures["kills"] + figures["pauses"] >= 1
