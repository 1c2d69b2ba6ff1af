"""Every command: help, cheap import, and one clear line for bad input."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from support.cli_runner import CLI, Result, cli_env, spawn_cli, spawn_dev_cli


def test_importing_the_cli_and_asking_for_help_pull_in_neither_boto3_nor_rich_nor_moto() -> None:
    code = (
        "import contextlib, io, sys, dynalease.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    for command in ([], ['inspect'], ['doctor']):\n"
        "        dynalease.cli.main([*command, '--help'])\n"
        "heavy = [m for m in ('boto3', 'botocore', 'rich', 'moto') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_console_script_lists_every_command_in_its_help() -> None:
    result = spawn_cli("--help")
    assert result.code == 0
    for command in ("inspect", "doctor", "local", "run"):
        assert command in result.out


def test_the_installed_command_offers_no_development_tool() -> None:
    """``demo`` and ``invoke`` are dev/'s ``dynalease-dev`` commands, not the wheel's."""
    assert "demo" not in spawn_cli("--help").out and "invoke" not in spawn_cli("--help").out
    result = spawn_cli("demo", "--quick")
    assert result.code == 2 and "invalid choice: 'demo'" in result.err


def test_the_development_command_lists_demo_and_invoke() -> None:
    result = spawn_dev_cli("--help")
    assert result.code == 0, result.err
    assert "usage: dynalease-dev" in result.out
    for command in ("demo", "invoke"):
        assert command in result.out


@pytest.mark.parametrize("command", ["demo", "inspect", "doctor"])
def test_each_command_has_help_with_the_connection_options(
    dynalease: Callable[..., Result], dynalease_dev: Callable[..., Result], command: str
) -> None:
    result = (dynalease_dev if command == "demo" else dynalease)(command, "--help")
    assert result.code == 0, result.err
    for option in ("--endpoint", "--region", "--profile"):
        assert option in result.out


def test_invoke_is_dispatched_to_the_lambda_runner(dynalease_dev: Callable[..., Result]) -> None:
    result = dynalease_dev("invoke", "--help")
    assert result.code == 0, result.err
    assert "counts down" in result.out


def test_invoke_help_shows_lifecycle_and_its_options(dynalease_dev: Callable[..., Result]) -> None:
    result = dynalease_dev("invoke", "--help")
    assert result.code == 0, result.err
    assert "usage: dynalease-dev invoke --lifecycle" in result.out
    for option in ("--no-extension", "--max-concurrency", "--python"):
        assert option in result.out


def test_no_command_prints_help_and_exits_2(dynalease: Callable[..., Result]) -> None:
    result = dynalease()
    assert result.code == 2
    assert "usage: dynalease" in result.out


def _one_line(result: Result) -> str:
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


@pytest.mark.parametrize("command", ["inspect", "doctor"])
def test_an_invalid_table_name_is_a_usage_error(
    dynalease: Callable[..., Result], command: str
) -> None:
    result = dynalease(command, "--table", "x")
    assert result.code == 2
    assert "is not a valid DynamoDB table name" in result.err
    assert "Traceback" not in result.err


def test_an_unknown_table_is_one_line_for_inspect(
    dynalease: Callable[..., Result], endpoint: str
) -> None:
    result = dynalease("inspect", "--table", "no-such-table", "--endpoint", endpoint)
    assert result.code == 1
    line = _one_line(result)
    assert line.startswith("dynalease inspect: error:")
    assert "does not exist" in line


def test_an_unreachable_endpoint_is_one_line(dynalease: Callable[..., Result]) -> None:
    result = dynalease("inspect", "--table", "locks", "--endpoint", "http://127.0.0.1:9")
    assert result.code == 1
    assert "Could not connect to the endpoint URL" in _one_line(result)


def test_missing_credentials_are_one_line(dynalease: Callable[..., Result], endpoint: str) -> None:
    env = cli_env(
        AWS_ACCESS_KEY_ID=None,
        AWS_SECRET_ACCESS_KEY=None,
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent/credentials",
        AWS_CONFIG_FILE="/nonexistent/config",
    )
    result = dynalease("inspect", "--table", "locks", "--endpoint", endpoint, env=env)
    assert result.code == 1
    assert "no usable AWS credentials" in _one_line(result)


def test_an_unknown_profile_is_one_line(dynalease: Callable[..., Result], endpoint: str) -> None:
    env = cli_env(AWS_CONFIG_FILE="/nonexistent/config")
    result = dynalease("doctor", "--table", "locks", "--profile", "nobody", env=env)
    assert result.code == 1
    assert "could not be found" in _one_line(result)


def test_no_region_is_a_usage_error_naming_the_fix(dynalease: Callable[..., Result]) -> None:
    env = cli_env(AWS_REGION=None, AWS_CONFIG_FILE="/nonexistent/config")
    result = dynalease("inspect", "--table", "locks", env=env)
    assert result.code == 2
    assert "--region" in _one_line(result) or "AWS_REGION" in result.err


@pytest.mark.parametrize("command", ["doctor", "inspect"])
def test_a_reader_that_went_away_ends_the_command_quietly(
    command: str, endpoint: str, lock_table: str
) -> None:
    """`dynalease doctor | head -2`: no BrokenPipeError traceback, the status of a SIGPIPE."""
    import os
    import signal

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        done = subprocess.run(
            [*CLI, command, "--table", lock_table, "--endpoint", endpoint],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=cli_env(),
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.stderr == b""
    assert done.returncode == 128 + signal.SIGPIPE
