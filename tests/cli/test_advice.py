"""CLI errors advise flags and environment variables, never the Python API's arguments."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.cli_runner import Result, cli_env

from dynalease.cli.common import cli_words


def _one_line(result: Result) -> str:
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


@pytest.mark.parametrize("command", ["inspect", "doctor"])
def test_no_region_advises_the_region_flag(dynalease: Callable[..., Result], command: str) -> None:
    env = cli_env(AWS_REGION=None, AWS_CONFIG_FILE="/nonexistent/config")
    line = _one_line(dynalease(command, "--table", "locks", env=env))
    assert line.startswith(f"dynalease {command}: error: no AWS Region is configured")
    assert "pass --region REGION, or set AWS_REGION / AWS_DEFAULT_REGION" in line
    assert "region=" not in line


def test_no_credentials_advise_the_variables_and_profile_flag(
    dynalease: Callable[..., Result], endpoint: str
) -> None:
    env = cli_env(
        AWS_ACCESS_KEY_ID=None,
        AWS_SECRET_ACCESS_KEY=None,
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent/credentials",
        AWS_CONFIG_FILE="/nonexistent/config",
    )
    line = _one_line(dynalease("inspect", "--table", "locks", "--endpoint", endpoint, env=env))
    assert "no usable AWS credentials" in line
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, --profile NAME or a role" in line
    assert "access_key" not in line and "secret_key" not in line


def test_other_messages_pass_through_unchanged() -> None:
    message = "table 'locks' not found: create it or pass --table"
    assert cli_words(message) == message


def test_the_help_lists_local(dynalease: Callable[..., Result]) -> None:
    result = dynalease("--help")
    assert "local" in result.out
