"""The fenced model's own power: its random search finds each broken engine.

In a file of its own so that the suite's workers run it beside ``TestFencedModel``
(``--dist loadfile``), not after it: each is minutes of CPU on a loaded machine.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test
from test_fenced_model import SEEN_FENCED, _broken
from test_model import Violation


@pytest.mark.test_power
@pytest.mark.timeout(900)  # up to 10,000 examples: two minutes alone, more on a loaded machine
@pytest.mark.parametrize("how", ["reuse after takeover", "keep across release", "reset on release"])
def test_the_random_search_finds_each_broken_engine(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _broken(how)
    before = SEEN_FENCED["examples"]
    # Every Violation the search meets is noted where it is made: Hypothesis replays
    # the failing example to report it, and when the replay takes another path (the
    # owners are fresh UUIDs, the engine's tasks interleave differently) it raises a
    # Flaky error around the Violation instead of the Violation itself.
    found: list[Violation] = []
    made = Violation.__init__

    def note(self: Violation, *args: Any) -> None:
        made(self, *args)
        found.append(self)

    monkeypatch.setattr(Violation, "__init__", note)
    with pytest.raises((Violation, Flaky)):
        run_state_machine_as_test(
            broken,
            settings=settings(
                # This derandomized search finds them after 41 ("keep across release"),
                # 232 ("reset on release") and 3,780 ("reuse after takeover") examples
                # (Hypothesis 6.170); a change to the model's rules moves those counts.
                max_examples=10_000,
                stateful_step_count=25,
                deadline=None,
                derandomize=True,
                phases=[Phase.generate],  # no shrinking: finding it is the point
                suppress_health_check=list(HealthCheck),
            ),
        )
    assert found, f"the search stopped on something other than a Violation of {how!r}"
    examples = SEEN_FENCED["examples"] - before
    print(f"\nbroken engine {how!r} caught after {examples} examples: {found[0]}")
