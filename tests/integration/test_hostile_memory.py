"""A refused answer does not outlive its request (docs/hostile-endpoints.md).

The engine keeps errors (a guard's last failure, a late request's outcome, the
causes they chain), so an error that kept the answer it refused, through its
traceback's frames or its own fields, held up to ``MAX_BODY`` for each request a
wait sends: an acquisition against a server that answered every request with a
150 MB chunk grew by 4 MiB a request. Measured with tracemalloc in a fresh child
process (tests/support/retained_answer.py), not by RSS: what is still allocated
after the request is deterministic, the peak RSS is ``benchmarks/hostile.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.lean_paths import HOW

from dynalease._transport.connections import MAX_BODY

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
CHILD = ROOT / "tests" / "support" / "retained_answer.py"
#: What a kept error may hold: its objects and frames, a few kilobytes. A refused answer
#: kept alive is 2 MB (the body) or 4 MiB (the cap) at least.
ALLOWED = 512 * 1024


@HOW
@pytest.mark.parametrize("kind", ["chunk", "garbage"], ids=["over-the-cap", "not-json"])
def test_a_kept_error_does_not_keep_the_answer_it_refused(how: str, kind: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    result = subprocess.run(
        [sys.executable, str(CHILD), kind, how],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["error"] == {"type": "RequestFailedError", "may_have_committed": True}
    assert report["retained"] < ALLOWED, (
        f"{report['retained']} bytes outlived the request (the cap is {MAX_BODY})"
    )
