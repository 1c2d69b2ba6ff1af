"""The transport's unit tests: the HTTP core fed bytes, signing, settings, setup.

``tests/unit`` goes on the import path so these tests can use the engine's lease
harness as ``engine.lease_harness``, as the tests beside it do.
"""

from __future__ import annotations

import sys
from pathlib import Path

_UNIT = str(Path(__file__).resolve().parent.parent)
if _UNIT not in sys.path:
    sys.path.insert(0, _UNIT)
