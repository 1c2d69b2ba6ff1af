"""How inspect reads fenced rows: live ones with their token, free ones with their counter."""

from __future__ import annotations

from dynalease.cli.lock_rows import Watcher, row_of, snapshot_rows

LIVE = {
    "key": {"S": "job"},
    "owner": {"S": "o-1"},
    "version": {"S": "v-1"},
    "lease_ms": {"N": "2000"},
    "protocol": {"N": "2"},
    "fence": {"N": "7"},
}
FREE = {"key": {"S": "job"}, "protocol": {"N": "2"}, "fence": {"N": "7"}}


def test_a_live_and_a_free_fenced_row_in_one_off_and_watch_views() -> None:
    live, free = row_of(LIVE, "locks"), row_of(FREE, "locks")
    assert live.parsed is not None and live.parsed.fence == 7
    assert snapshot_rows([live])[0][-1] == "v2 fenced, token 7"
    assert free.parsed is None and free.free_fence == 7
    assert snapshot_rows([free])[0] == ("job", "-", "-", "-", "v2 free (released), fence 7")
    watcher = Watcher("locks")
    assert watcher.update([live], 0.0)[0][-1] == "held (fenced, token 7)"
    assert watcher.update([free], 1.0)[0][-1] == "v2 free (released), fence 7"
    # A new owner after the free row starts a fresh observation.
    assert watcher.update([live], 2.0)[0][-2:] == ("0", "held (fenced, token 7)")


def test_a_fenced_row_with_a_bad_counter_is_flagged() -> None:
    row = row_of({**LIVE, "fence": {"S": "7"}}, "locks")
    assert row.parsed is None and "fence" in row.problem
