"""A newcomer's first commands (issue 44): a missing table and a configured endpoint, named.

Each follows the README: `dynalease local` exports ``AWS_ENDPOINT_URL_DYNAMODB``, and
``dynalease-dev invoke`` runs an example handler against it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_runner import Result, cli_env, run_cli, run_dev_cli, spawn_dev_cli

from dynalease import DynamoDBClient
from dynalease.exceptions import TableNotFoundError
from dynalease.lock import SyncDistributedLock

ROOT = Path(__file__).resolve().parents[2]


def test_invoke_names_a_missing_table_in_one_line_with_the_command_that_creates_it(
    endpoint: str,
) -> None:
    result = spawn_dev_cli(
        "invoke",
        str(ROOT / "examples/lambda/sqs_handler.py") + ":handler",
        str(ROOT / "events/sqs.json"),
        "--table",
        "never-created",
        "--endpoint",
        endpoint,
    )
    assert result.code == 1
    assert result.out == ""
    assert "Traceback" not in result.err
    (line,) = result.err.strip().splitlines()
    port = endpoint.rsplit(":", 1)[1]
    assert line.startswith(
        f"dynalease-dev invoke: error: table 'never-created' does not exist in Region 'us-east-1' "
        f"at {endpoint}: if it is `dynalease local`, restart it as "
        f"`dynalease local --port {port} --table never-created`, which creates it"
    )


def _configured(endpoint: str) -> dict[str, str]:
    """What a user has after pasting `dynalease local`'s exports: the endpoint in a variable."""
    return cli_env(AWS_ENDPOINT_URL_DYNAMODB=endpoint)


def test_doctor_names_the_endpoint_from_the_environment(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str
) -> None:
    found = dynalease("doctor", "--table", lock_table, env=_configured(endpoint))
    assert found.code == 0, found.err
    assert f"table exists: '{lock_table}' in Region 'us-east-1' at {endpoint}" in found.out
    missing = dynalease("doctor", "--table", "never-created", env=_configured(endpoint))
    assert missing.code == 1
    assert f"no table 'never-created' in Region 'us-east-1' at {endpoint}" in missing.out
    assert f"--endpoint-url {endpoint}" in missing.out


def test_doctor_on_aws_names_the_regions_endpoint() -> None:
    from dynalease._advice import where

    assert (
        where("eu-west-1", None) == "Region 'eu-west-1' at https://dynamodb.eu-west-1.amazonaws.com"
    )


def test_a_locks_missing_table_error_names_the_endpoint_from_the_environment(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _configured(endpoint).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = DynamoDBClient()  # the environment only, as the README's Lambda block runs
    with (
        pytest.raises(TableNotFoundError) as raised,
        SyncDistributedLock(client, table="never-created", key="k", wait_timeout=0),
    ):
        pass
    message = str(raised.value)
    assert f"in Region 'us-east-1' at {endpoint}." in message
    assert "AWS's endpoint" not in message
    assert (
        f"`dynalease doctor --table never-created --region us-east-1 --endpoint {endpoint}`"
        in message
    )
    assert (raised.value.table, raised.value.region, raised.value.endpoint) == (
        "never-created",
        "us-east-1",
        endpoint,
    )


def test_run_gives_up_in_its_own_words_naming_the_key_as_typed(
    dynalease: Callable[..., Result], client: DynamoDBClient, endpoint: str, lock_table: str
) -> None:
    base = ["run", "--endpoint", endpoint, "--table", lock_table, "--key", "nightly-report"]
    with SyncDistributedLock(client, table=lock_table, key="nightly-report"):
        at_once = dynalease(*base, "--", "true")
        waited = dynalease(*base, "--wait", "0.5", "--", "true")
    assert at_once.code == waited.code == 75
    for said in (at_once.err, waited.err):
        assert said.startswith(f"dynalease run: lock 'nightly-report' in table '{lock_table}'")
        assert "key_hash" not in said and "wait_timeout" not in said
    assert "it is held by another owner and --wait 0 makes one attempt" in at_once.err
    assert "the --wait of 0.5 s ran out" in waited.err
    assert "raise --wait" in waited.err


def test_run_on_a_permit_rows_key_points_at_permits(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str
) -> None:
    key = "dynalease-permit:1:reindex"
    said = dynalease(
        "run", "--endpoint", endpoint, "--table", lock_table, "--key", key, "--", "true"
    )
    assert said.code == 2
    assert "--key KEY --permits N" in said.err and "DistributedSemaphore" not in said.err


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        (run_cli, ["doctor", "--table", "locks"]),
        (
            run_dev_cli,
            ["invoke", "examples/lambda/direct_handler.py:handler", "events/direct.json"],
        ),
    ],
)
def test_an_endpoint_without_a_scheme_gets_the_url_to_write(
    command: Callable[..., Result], argv: list[str]
) -> None:
    said = command(*argv, "--endpoint", "127.0.0.1:8000")
    assert said.code == 2
    assert "Traceback" not in said.err
    assert "--endpoint" in said.err and "write http://127.0.0.1:8000" in said.err


@pytest.mark.parametrize("command", ["doctor", "inspect"])
def test_a_misspelled_region_is_named_before_any_request(
    dynalease: Callable[..., Result], command: str
) -> None:
    said = dynalease(command, "--table", "locks", "--region", "eu west 1")
    assert said.code == 2
    assert "--region" in said.err and "'eu west 1' is not an AWS Region name" in said.err
