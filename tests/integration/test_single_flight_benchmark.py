"""`python -m benchmarks.single_flight` runs and prints its counts (a small burst)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_single_flight_benchmark_prints_its_counts_and_one_run_per_burst() -> None:
    command = [sys.executable, "-m", "benchmarks.single_flight", "--callers", "4"]
    command += ["--work", "0.2", "--rounds", "1"]
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "plain lock cycle:                      2 (1 DeleteItem, 1 PutItem)" in out
    assert "runner (result_ttl=60):                5 (1 DeleteItem, 2 GetItem, 2 PutItem)" in out
    assert "later caller within result_ttl:        1 (1 GetItem)" in out
    assert out.count("runs [1]") == 2
