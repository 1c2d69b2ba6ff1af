"""Which compute mode a process runs in: one answer from either of the platform's signals,
logged once."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dynalease import _compute_modes


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("AWS_LAMBDA_MAX_CONCURRENCY", raising=False)
    monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE", raising=False)
    _compute_modes._tell.cache_clear()  # each test is a process of its own
    yield
    _compute_modes._tell.cache_clear()


@pytest.mark.parametrize(
    ("max_concurrency", "init_type", "expected"),
    [
        (None, None, False),
        (None, "on-demand", False),
        (None, "snap-start", False),
        (None, "lambda-managed-instances", True),
        (None, " Lambda-Managed-Instances ", True),
        ("4", "lambda-managed-instances", True),
        # awslambdaric forks its workers on AWS_LAMBDA_MAX_CONCURRENCY alone: so do we.
        ("4", None, True),
        ("4", "on-demand", True),
        ("1", "something-new", True),
    ],
)
def test_managed_instances_are_recognised_by_either_signal(
    monkeypatch: pytest.MonkeyPatch,
    max_concurrency: str | None,
    init_type: str | None,
    expected: bool,
) -> None:
    if max_concurrency is not None:
        monkeypatch.setenv("AWS_LAMBDA_MAX_CONCURRENCY", max_concurrency)
    if init_type is not None:
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", init_type)
    assert _compute_modes.managed_instances() is expected


def test_the_mode_is_logged_once_at_info_with_the_values_it_came_from(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_MAX_CONCURRENCY", "4")
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
    with caplog.at_level(logging.DEBUG, logger="dynalease"):
        for _ in range(3):
            assert _compute_modes.managed_instances()
        assert _compute_modes.init_runs_ahead()
    (record,) = caplog.records
    assert record.name == "dynalease"
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        "dynalease: Lambda Managed Instances (AWS_LAMBDA_MAX_CONCURRENCY '4', "
        "AWS_LAMBDA_INITIALIZATION_TYPE 'on-demand')"
    )


def test_elsewhere_the_mode_is_logged_once_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
    with caplog.at_level(logging.DEBUG, logger="dynalease"):
        assert not _compute_modes.managed_instances()
        assert not _compute_modes.managed_instances()
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG
    assert "not Lambda Managed Instances (AWS_LAMBDA_MAX_CONCURRENCY unset" in record.getMessage()


@pytest.mark.parametrize(
    ("max_concurrency", "init_type", "expected"),
    [
        (None, None, False),
        (None, "on-demand", False),
        (None, "provisioned-concurrency", True),
        (None, "snap-start", True),
        (None, "lambda-managed-instances", True),
        ("2", "on-demand", True),
    ],
)
def test_init_runs_ahead_of_requests_on_every_mode_but_on_demand(
    monkeypatch: pytest.MonkeyPatch,
    max_concurrency: str | None,
    init_type: str | None,
    expected: bool,
) -> None:
    if max_concurrency is not None:
        monkeypatch.setenv("AWS_LAMBDA_MAX_CONCURRENCY", max_concurrency)
    if init_type is not None:
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", init_type)
    assert _compute_modes.init_runs_ahead() is expected
