"""The history checker: crafted histories that do and do not break mutual exclusion.

The checker is what turns the process, clock and soak runs into proofs, so it
must both accept every legal history and catch each kind of violation.
"""

from __future__ import annotations

from typing import Any

import pytest
from dynalease_dev.demo import history
from dynalease_dev.demo.history import ACQUIRED, RELEASED, WRITE, check_records

from dynalease.exceptions import LockLost, LockOwnershipLost, TransactionCanceledException
from dynalease.lock import SyncDistributedLock
from dynalease.testing import MemoryBackend
from dynalease.transaction import SyncTransaction

A, B, C = "owner-a", "owner-b", "owner-c"


def key_history(
    key: str, *records: tuple[str, str], head: int | None = None
) -> list[dict[str, Any]]:
    """Items for one key: records numbered 1..n in order, and a head pointing at n."""
    items: list[dict[str, Any]] = [
        {"key": key, "seq": seq, "owner": owner, "kind": kind, "at": 0.0}
        for seq, (owner, kind) in enumerate(records, start=1)
    ]
    last_owner = records[-1][0] if records else ""
    items.append(
        {"key": key, "seq": 0, "head": len(records) if head is None else head, "owner": last_owner}
    )
    return items


def test_an_empty_history_is_clean() -> None:
    report = check_records([])
    assert report.ok
    assert (report.keys, report.owners, report.commits) == (0, 0, 0)


def test_owners_handing_the_lock_over_in_turn_is_clean_and_counted() -> None:
    report = check_records(
        key_history(
            "job",
            (A, ACQUIRED),
            (A, WRITE),
            (A, WRITE),
            (A, RELEASED),
            (B, ACQUIRED),
            (B, WRITE),
            (B, RELEASED),
        )
    )
    assert report.ok, report.violations
    assert report.keys == 1
    assert report.owners == 2
    assert report.acquisitions == 2
    assert report.commits == 3
    assert report.releases == 2
    assert report.takeovers == 0
    assert report.summary().endswith("violations=0")


def test_an_acquisition_after_a_holder_that_never_released_counts_as_a_takeover() -> None:
    report = check_records(key_history("job", (A, ACQUIRED), (A, WRITE), (B, ACQUIRED), (B, WRITE)))
    assert report.ok, report.violations
    assert report.takeovers == 1


def test_a_write_after_another_owner_acquired_is_a_stale_commit() -> None:
    # B took over while A was paused; A's write landing afterwards is the bug a
    # check_in transaction must prevent, even though B has not written yet.
    report = check_records(key_history("job", (A, ACQUIRED), (A, WRITE), (B, ACQUIRED), (A, WRITE)))
    assert not report.ok
    assert report.stale_commits == 1
    assert report.overlaps == 0
    assert "seq 4" in report.violations[0]
    assert "after another owner acquired the lock at seq 3" in report.violations[0]


def test_writes_of_two_owners_interleaving_are_an_overlap_and_stale() -> None:
    report = check_records(
        key_history("job", (A, ACQUIRED), (A, WRITE), (B, ACQUIRED), (B, WRITE), (A, WRITE))
    )
    assert report.overlaps == 1
    assert report.stale_commits == 1
    assert len(report.violations) == 1


def test_interleaved_writes_are_caught_even_without_acquisition_records() -> None:
    report = check_records(key_history("job", (A, ACQUIRED), (A, WRITE), (B, WRITE), (A, WRITE)))
    assert report.overlaps == 1
    assert report.stale_commits == 0
    assert any("no earlier 'acquired' record" in v for v in report.violations)
    assert any("interleave" in v for v in report.violations)


def test_a_write_after_its_owner_released_is_stale() -> None:
    report = check_records(key_history("job", (A, ACQUIRED), (A, RELEASED), (A, WRITE)))
    assert report.stale_commits == 1
    assert "after its own 'released' record at seq 2" in report.violations[0]


def test_an_owner_acquiring_twice_is_a_violation() -> None:
    report = check_records(key_history("job", (A, ACQUIRED), (B, ACQUIRED), (A, ACQUIRED)))
    assert any("acquired a second time" in v for v in report.violations)


def test_different_keys_are_checked_independently() -> None:
    # A holds one key while B holds another: interleaving across keys is fine.
    items = key_history("one", (A, ACQUIRED), (A, WRITE), (A, WRITE)) + key_history(
        "two", (B, ACQUIRED), (B, WRITE), (C, ACQUIRED), (C, WRITE)
    )
    report = check_records(items)
    assert report.ok, report.violations
    assert (report.keys, report.owners, report.commits, report.takeovers) == (2, 3, 4, 1)


def test_a_missing_record_or_a_wrong_head_is_reported() -> None:
    items = key_history("job", (A, ACQUIRED), (A, WRITE), (A, WRITE))
    gap = [item for item in items if item["seq"] != 2]
    assert any("missing [2]" in v for v in check_records(gap).violations)
    wrong_head = key_history("job", (A, ACQUIRED), (A, WRITE), head=5)
    assert any("head says 5" in v for v in check_records(wrong_head).violations)


def test_malformed_items_are_violations_not_crashes() -> None:
    items = [
        *key_history("job", (A, ACQUIRED), head=2),
        {"key": "job", "seq": 2, "owner": A, "kind": "teleported"},
        {"key": "job", "seq": "3"},
    ]
    report = check_records(items)
    assert any("malformed record" in v for v in report.violations)
    assert any("malformed history item" in v for v in report.violations)


# --- appends through real check_in transactions (memory backend) ------------


@pytest.fixture
def backend() -> Any:
    with MemoryBackend() as memory:
        memory.client.sync_create_table("locks", partition_key=("key", "S"))
        history.create_history_table(memory.client, "history")
        yield memory


def stored(backend: MemoryBackend) -> list[dict[str, Any]]:
    return backend.tables()["history"]


def test_commits_through_check_in_transactions_build_a_clean_numbered_history(
    backend: MemoryBackend,
) -> None:
    client = backend.client
    with SyncDistributedLock(client, table="locks", key="job") as first:
        assert history.commit(client, first, table="history", kind=ACQUIRED) == 1
        assert history.commit(client, first, table="history", note="step") == 2
        assert history.commit(client, first, table="history", kind=RELEASED) == 3
    with SyncDistributedLock(client, table="locks", key="job") as second:
        assert history.commit(client, second, table="history", kind=ACQUIRED) == 4
    assert history.read_head(client, "history", "job") == 4
    report = check_records(stored(backend))
    assert report.ok, report.violations
    assert (report.acquisitions, report.commits, report.releases) == (2, 1, 1)


def test_a_record_of_a_guard_that_lost_the_row_is_rejected_and_not_stored(
    backend: MemoryBackend,
) -> None:
    client = backend.client
    guard = SyncDistributedLock(client, table="locks", key="job")
    # Release reports LockLost: the guard knows it lost the row.
    with pytest.raises(LockLost), guard:
        history.commit(client, guard, table="history", kind=ACQUIRED)
        sequence = history.read_head(client, "history", "job") + 1
        with pytest.raises(LockOwnershipLost):
            with SyncTransaction(client) as transaction:
                history.append(transaction, guard, table="history", sequence=sequence)
                # Another owner takes the row between check_in and commit.
                client.sync_put_item(
                    "locks",
                    {
                        "key": "job",
                        "owner": "thief",
                        "version": "v",
                        "lease_ms": 1000,
                        "protocol": 1,
                    },
                )
        with pytest.raises(LockLost):
            guard.raise_if_lost()
    assert client.sync_get_item("locks", {"key": "job"})["owner"] == "thief"
    assert history.read_head(client, "history", "job") == 1
    assert check_records(stored(backend)).ok


def test_an_append_with_a_stale_sequence_number_is_cancelled(backend: MemoryBackend) -> None:
    client = backend.client
    with SyncDistributedLock(client, table="locks", key="job") as guard:
        history.commit(client, guard, table="history", kind=ACQUIRED)
        with pytest.raises(TransactionCanceledException, match="ConditionalCheckFailed"):
            with SyncTransaction(client) as transaction:
                history.append(transaction, guard, table="history", sequence=1)
    assert history.read_head(client, "history", "job") == 1


def test_bad_append_arguments_are_rejected_before_any_request(backend: MemoryBackend) -> None:
    client = backend.client
    with SyncDistributedLock(client, table="locks", key="job") as guard:
        transaction = SyncTransaction(client)
        with pytest.raises(ValueError, match="sequence must be an int >= 1"):
            history.append(transaction, guard, table="history", sequence=0)
        with pytest.raises(ValueError, match="kind must be one of"):
            history.append(transaction, guard, table="history", sequence=1, kind="deleted")
        history.append(transaction, guard, table="history", sequence=1)
        with pytest.raises(ValueError, match="already appends to the history of 'job'"):
            history.append(transaction, guard, table="history", sequence=2)
        assert len(transaction) == 3  # one ownership check, the head, the record
