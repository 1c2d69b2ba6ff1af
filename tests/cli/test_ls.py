"""``dynalease ls``: who holds what, as a table and as JSON, a pydynox row shown as such."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pydynox
from pydynox.lock import SyncDistributedLock as PydynoxLock
from support.cli_runner import Result

from dynalease import DynamoDBClient, SyncDistributedLock, SyncDistributedSemaphore
from dynalease.fair import SyncFairLock
from dynalease.rwlock import SyncReadLock, SyncWriteLock
from dynalease.single_flight import single_flight


def test_json_lists_every_kind_of_row_with_its_holder(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    pdx = pydynox.DynamoDBClient(
        region="us-east-1", endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )
    with (
        SyncDistributedLock(client, table=lock_table, key="job:a", metadata={"ticket": 9}),
        SyncDistributedLock(client, table=lock_table, key="job:fenced", fencing=True),
        SyncDistributedSemaphore(client, table=lock_table, key="api", permits=2) as permit,
        PydynoxLock(pdx, table=lock_table, key="job:theirs"),
    ):
        result = dynalease("ls", "--table", lock_table, "--endpoint", endpoint, "--json")
        assert result.code == 0, result.err
        document = json.loads(result.out)
        rows = {row["key"]: row for row in document["rows"]}
        assert set(rows) == {"job:a", "job:fenced", "job:theirs", permit.permit_key}
        mine = rows["job:a"]
        assert mine["kind"] == "lock" and mine["lease_s"] == 30.0
        assert mine["holder"]["pid"] == os.getpid()
        assert mine["holder"]["metadata"] == {"ticket": 9}
        assert 0 <= mine["held_for_s"] < 600
        assert rows["job:fenced"]["kind"] == "lock, fenced" and rows["job:fenced"]["fence"] == 1
        assert rows[permit.permit_key]["kind"] == "permit"
        theirs = rows["job:theirs"]
        assert theirs["kind"] == "lock, pydynox (no holder)" and theirs["holder"] == {}
        assert document["read"]["pages"] >= 1

        text = dynalease("ls", "--table", lock_table, "--endpoint", endpoint, "--prefix", "job:")
        assert text.code == 0, text.err
        assert "pydynox (no holder)" in text.out and "api" not in text.out
        assert f"{os.uname().nodename} pid {os.getpid()}" in text.out
        assert "3 lock rows in" in text.out and "RCU" in text.out

        only = dynalease(
            "ls", "--table", lock_table, "--endpoint", endpoint, "--json", "--holder", "ticket"
        )
        assert [row["key"] for row in json.loads(only.out)["rows"]] == ["job:a"]


def test_the_rows_of_read_write_fair_and_single_flight_guards_are_named(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    @single_flight(client, table=lock_table, key="report:{day}")
    def report(day: str) -> str:
        return f"report of {day}"

    assert report("monday") == "report of monday"
    with (
        SyncReadLock(client, table=lock_table, key="config"),
        SyncWriteLock(client, table=lock_table, key="schema"),
        SyncFairLock(client, table=lock_table, key="queue-me"),
    ):
        result = dynalease("ls", "--table", lock_table, "--endpoint", endpoint, "--json")
        assert result.code == 0, result.err
        kinds = {row["key"]: row["kind"] for row in json.loads(result.out)["rows"]}
    assert kinds["config"] == "read lock"
    assert kinds["dynalease-writer:schema"] == "writer row, fenced"
    assert kinds["schema"] == "lock"
    assert kinds["dynalease-queue:queue-me"] == "fair queue"
    assert kinds["queue-me"] == "lock"
    assert kinds["dynalease-result:report:monday"] == "single-flight result"


def test_a_bad_read_rate_names_the_flag(
    dynalease: Callable[..., Result], endpoint: str, lock_table: str
) -> None:
    result = dynalease("ls", "--table", lock_table, "--endpoint", endpoint, "--max-rcu", "0")
    assert result.code == 2 and "--max-rcu must be more than 0" in result.err
