"""The leader a row shows, and an observer's view of a row over time (no server, no clock)."""

from __future__ import annotations

from typing import Any

import pytest

from dynalease._election import Leader, Sightings, check_value, leader_of
from dynalease.exceptions import FencingMismatch


def row(owner: str = "a", version: str = "v1", fence: int = 3, **extra: Any) -> dict[str, Any]:
    return {
        "key": {"S": "svc"},
        "owner": {"S": owner},
        "version": {"S": version},
        "lease_ms": {"N": "2000"},
        "protocol": {"N": "2"},
        "fence": {"N": str(fence)},
        **extra,
    }


def published(term: int, value: str | None = "10.0.0.7", since_ms: int = 1_000) -> dict[str, Any]:
    fields: dict[str, Any] = {"term": {"N": str(term)}, "since": {"N": str(since_ms)}}
    if value is not None:
        fields["value"] = {"S": value}
    return {"leader_value": {"M": fields}}


def test_a_free_or_absent_row_has_no_leader() -> None:
    free = {"key": {"S": "svc"}, "protocol": {"N": "2"}, "fence": {"N": "4"}}
    assert leader_of(None, table="t", name="svc") is None
    assert leader_of(free, table="t", name="svc") is None


def test_the_value_shows_only_in_the_term_that_published_it() -> None:
    assert leader_of(row(**published(3)), table="t", name="svc") == Leader(
        "a", 3, 1.0, "10.0.0.7", 2.0
    )
    # A new leader's row still carries its predecessor's map until it writes its own.
    assert leader_of(row(fence=4, **published(3)), table="t", name="svc") == Leader(
        "a", 4, None, None, 2.0
    )


def test_a_pydynox_row_is_a_fencing_mismatch() -> None:
    unfenced = row()
    unfenced["protocol"] = {"N": "1"}
    del unfenced["fence"]
    with pytest.raises(FencingMismatch):
        leader_of(unfenced, table="t", name="svc")


def test_an_observer_reports_no_leader_once_the_row_went_unchanged_for_its_lease() -> None:
    sightings = Sightings("t", "svc")
    assert sightings.state(row(version="v1"), now=10.0) is not None
    assert sightings.state(row(version="v1"), now=11.9) is not None
    assert sightings.state(row(version="v1"), now=12.0) is None  # 2 s lease, unchanged
    # A renewal (a new version) shows the leader alive again, counted from now.
    assert sightings.state(row(version="v2"), now=12.1) is not None
    assert sightings.state(row(version="v2"), now=14.0) is not None
    assert sightings.state(None, now=14.1) is None
    assert sightings.state(row(version="v2"), now=14.2) is not None  # seen afresh


def test_values_are_short_strings() -> None:
    assert check_value(None) is None and check_value("x" * 512) == "x" * 512
    with pytest.raises(ValueError, match="publish a pointer"):
        check_value("x" * 513)
    with pytest.raises(TypeError, match="encode anything else"):
        check_value(b"bytes")
