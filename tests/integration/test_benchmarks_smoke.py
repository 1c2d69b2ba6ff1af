"""The benchmark command runs end to end and prints what docs/benchmarks.md reads.

One round of two short workloads, both libraries, on the server the command
starts itself: a check that the command works, not a measurement (figures are
never asserted on).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_one_quick_round_prints_every_ratio_and_the_independent_floor() -> None:
    command = [sys.executable, "-m", "benchmarks", "--quick", "--rounds", "1",
               "uncontended", "independent"]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "## every ratio (dynalease / pydynox)" in out
    for figure in ("cpu_ms_per_cycle", "elapsed_s", "floor_elapsed_s", "elapsed_over_floor"):
        assert f"| {figure}" in out, f"{figure} missing from:\n{out}"
    assert "CPU per cycle <= 1.0x:" in out and "elapsed <= 1.0x:" in out
    assert "| cpu_over_floor" in out and "the bare client's:" in out


def test_the_hostile_endpoint_figures_run_quickly_and_stay_under_the_limit() -> None:
    command = [sys.executable, "-m", "benchmarks.hostile", "--quick"]
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all under the limit, no success reported" in result.stdout
    assert result.stdout.count("RequestFailedError (ConnectionClosedError)") == 6


def test_the_fenced_workload_prints_its_requests_and_cpu_beside_the_unfenced_cycle() -> None:
    command = [
        *(sys.executable, "-m", "benchmarks", "--quick", "--rounds", "1", "fenced", "semaphore")
    ]
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for figure in (
        "fenced_requests_per_cycle",
        "unfenced_cpu_ms_per_cycle",
        "fenced_over_unfenced_cpu",
    ):
        assert f"| {figure}" in out, f"{figure} missing from:\n{out}"
    assert "fenced cycle <= 2 requests: met" in out  # the count is exact, not a timing
    for figure in ("semaphore_cpu_ms_per_cycle", "lock_cpu_ms_per_cycle", "full_reads_per_s"):
        assert f"| {figure}" in out, f"{figure} missing from:\n{out}"
    assert "free permit: 2 requests a cycle: met" in out


def test_the_sigterm_figures_print_both_successor_waits() -> None:
    # The successor starts watching at the SIGTERM, and may take a row over only after
    # watching it for a whole lease: a wait under the lease is a release, and 6 s leave a
    # loaded two-core machine room for it.
    command = [sys.executable, "-m", "benchmarks.sigterm", "--lease", "6"]
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    waits = re.findall(r"successor acquired +([\d.]+) s after SIGTERM \(child -15\)", result.stdout)
    assert len(waits) == 2, result.stdout
    # Released before the lease could run out with the opt-in; watched for all of it without.
    assert float(waits[0]) < 6.0 <= float(waits[1]), result.stdout


def test_the_process_and_cold_start_workloads_run_once_each() -> None:
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"  # lambda_cold: this version only
    command = [sys.executable, "-m", "benchmarks", "--rounds", "1", "--cold-python", python,
               "processes", "script_start", "lambda_cold"]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for figure in ("cost_rru_per_completion", "idle_at_switches_s", "process_wall_s",
                   f"py{python}_library_import_s", f"py{python}_peak_rss_mb",
                   f"py{python}_bytecode", "botocore_client_loaded"):  # fmt: skip
        assert f"| {figure}" in out, f"{figure} missing from:\n{out}"
    assert "script start <= 1.0x:" in out and "cold (init + 1st invoke) <= 0.8x:" in out
    assert "requests/completion <= 1.0x:" in out


def test_the_local_server_memory_figures_print_the_peak_and_both_rates() -> None:
    command = [sys.executable, "-m", "benchmarks.local_server_memory", "--cycles", "40",
               "--window", "20"]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"server RSS: start [\d.]+ MB, peak [\d.]+ MB", result.stdout)
    assert re.search(r"transactions per second: start [\d.]+, end [\d.]+", result.stdout)


def test_a_quick_runs_verdicts_say_they_are_indicative_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rounds on a shared machine decide no goal: a --quick verdict says so."""
    monkeypatch.syspath_prepend(str(ROOT))  # the benchmarks run from a clone's root
    from benchmarks.__main__ import INDICATIVE, report

    results = {
        "dynalease": [{"elapsed_s": 2.0}, {"elapsed_s": 2.0}],
        "pydynox": [{"elapsed_s": 1.0}, {"elapsed_s": 1.0}],
    }
    report("one_key", results, quick=True)
    quick = capsys.readouterr().out
    assert f"(2 rounds each, medians; verdicts {INDICATIVE})" in quick
    assert "elapsed <= 0.5x: NOT met (indicative)" in quick
    report("one_key", results)
    full = capsys.readouterr().out
    assert "indicative" not in full and "elapsed <= 0.5x: NOT met" in full


def test_the_journal_entry_figures_name_the_filesystem_and_the_entry_size(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.managed_instances", "--no-release",
               "--guards", "50", "--journal-dir", str(tmp_path)]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"machine: \d+ cores .*load average", out)
    assert re.search(rf"journal directory: {re.escape(str(tmp_path))}\S* on \w+ \(", out)
    assert re.search(r"median \d+, p90 \d+, min \d+, max \d+ us over 50; .*: \d+ bytes", out)


@pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind missing: make system-deps installs it"
)
def test_the_instruction_count_runs_under_callgrind_and_prints_one_cycle() -> None:
    """One cycle of dynalease, counted under callgrind."""
    command = [sys.executable, "-m", "benchmarks.instructions", "--keep-alive",
               "--few", "1", "--cycles", "1", "--library", "dynalease"]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"\| kept alive \| ([\d,]+)k \| - \|", result.stdout)
    assert found is not None, result.stdout
    assert int(found.group(1).replace(",", "")) > 100, result.stdout  # a cycle, not nothing
