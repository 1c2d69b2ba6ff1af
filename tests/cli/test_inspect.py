"""``dynalease inspect``: what it shows, --watch by the observation rule; it never writes."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

import pytest
from support.cli_runner import Result
from support.fault_proxy import FaultProxy

from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock

READS = {"GetItem", "Scan"}


@pytest.fixture
def proxy(endpoint: str) -> Iterator[FaultProxy]:
    """A recording proxy: every request the command sends is logged by operation."""
    with FaultProxy(endpoint) as recorder:
        yield recorder


def _abandoned_row(client: DynamoDBClient, table: str, key: str, lease_ms: int) -> None:
    client.sync_put_item(
        table,
        {
            "key": key,
            "owner": "crashed-owner",
            "version": "v-1",
            "lease_ms": lease_ms,
            "protocol": 1,
        },
    )


def test_it_lists_held_rows_and_flags_rows_that_are_not_protocol_rows(
    dynalease: Callable[..., Result], client: DynamoDBClient, lock_table: str, endpoint: str
) -> None:
    client.sync_put_item(lock_table, {"key": "hand-written", "owner": "someone"})
    with SyncDistributedLock(client, table=lock_table, key="customer:1") as guard:
        result = dynalease("inspect", "--table", lock_table, "--endpoint", endpoint)
    assert result.code == 0, result.err
    held = next(line for line in result.out.splitlines() if line.startswith("customer:1"))
    assert guard.owner in held
    assert "30 s" in held
    assert "v1 ok" in held
    flagged = next(line for line in result.out.splitlines() if line.startswith("hand-written"))
    assert "not a lock row: protocol is missing, expected 1" in flagged
    assert "2 lock rows in" in result.out


def test_it_shows_fenced_rows_with_their_token_and_free_rows_with_their_counter(
    dynalease: Callable[..., Result], client: DynamoDBClient, lock_table: str, endpoint: str
) -> None:
    for _ in range(2):
        with SyncDistributedLock(client, table=lock_table, key="released", fencing=True):
            pass
    with SyncDistributedLock(client, table=lock_table, key="fenced", fencing=True) as guard:
        result = dynalease("inspect", "--table", lock_table, "--endpoint", endpoint)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    held = next(line for line in lines if line.startswith("fenced"))
    assert guard.owner in held and "v2 fenced, token 1" in held
    free = next(line for line in lines if line.startswith("released"))
    assert "v2 free (released), fence 2" in free


def test_key_and_prefix_narrow_the_view(
    dynalease: Callable[..., Result], client: DynamoDBClient, lock_table: str, endpoint: str
) -> None:
    for key in ("customer:1", "customer:2", "invoice:9"):
        _abandoned_row(client, lock_table, key, 5000)
    by_prefix = dynalease(
        "inspect", "--table", lock_table, "--prefix", "customer:", "--endpoint", endpoint
    )
    assert by_prefix.code == 0, by_prefix.err
    assert "customer:1" in by_prefix.out and "customer:2" in by_prefix.out
    assert "invoice:9" not in by_prefix.out
    by_key = dynalease(
        "inspect", "--table", lock_table, "--key", "invoice:9", "--endpoint", endpoint
    )
    assert "invoice:9" in by_key.out and "customer:" not in by_key.out
    assert "1 lock row in" in by_key.out
    both = dynalease("inspect", "--table", lock_table, "--key", "a", "--prefix", "b")
    assert both.code == 2


def test_watch_shows_renewals_and_rows_a_contender_may_take_over_without_writing(
    dynalease: Callable[..., Result],
    client: DynamoDBClient,
    lock_table: str,
    proxy: FaultProxy,
) -> None:
    _abandoned_row(client, lock_table, "abandoned", lease_ms=300)
    holding = threading.Event()
    done = threading.Event()

    def hold() -> None:
        # 4.5 s: renewals every 1.5 s, each request given 1.5 s (a 1.5 s lease's 0.5 s
        # requests went unanswered for a whole lease beside nine busy workers and a busy loop)
        with SyncDistributedLock(client, table=lock_table, key="busy", lease_duration=4.5):
            holding.set()
            done.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        result = dynalease(
            "inspect",
            "--table",
            lock_table,
            "--watch",
            "--for",
            "6",  # about four renewals, two asserted: one may come late on a loaded machine
            "--interval",
            "0.3",
            "--plain",
            "--endpoint",
            proxy.url,
        )
    finally:
        done.set()
        holder.join(30)
    assert result.code == 0, result.err
    last = result.out.split(f"{lock_table} at ")[-1]
    busy = next(line for line in last.splitlines() if line.startswith("busy"))
    assert "held, renewing" in busy
    renewals = re.search(r" s\s+(\d+)\s+held, renewing", busy)
    assert renewals is not None and int(renewals.group(1)) >= 2, busy  # one every 1.5 s
    abandoned = next(line for line in last.splitlines() if line.startswith("abandoned"))
    assert "a contender may take it over" in abandoned
    operations = {entry.operation for entry in proxy.seen()}
    assert operations and operations <= READS, operations
    # The abandoned row is still exactly as written: watching never takes over.
    row = client.sync_get_item(lock_table, {"key": "abandoned"}, consistent_read=True)
    assert row is not None and row["owner"] == "crashed-owner" and row["version"] == "v-1"


def test_a_one_off_view_only_reads(
    dynalease: Callable[..., Result], client: DynamoDBClient, lock_table: str, proxy: FaultProxy
) -> None:
    _abandoned_row(client, lock_table, "k", 1000)
    for extra in ([], ["--key", "k"], ["--prefix", "k"]):
        assert (
            dynalease("inspect", "--table", lock_table, "--endpoint", proxy.url, *extra).code == 0
        )
    assert {entry.operation for entry in proxy.seen()} == READS


#: A key from an event (a URL-decoded %1B is enough): sets the window title, erases the
#: line and prints a fake row, if a terminal gets it raw.
HOSTILE_KEY = "customer:1\x1b]0;owned\x07\x1b[2K\r\x1b[32mcustomer:2  (all clear)\x1b[0m"


def test_row_keys_and_owners_reach_the_terminal_escaped(
    dynalease: Callable[..., Result], client: DynamoDBClient, lock_table: str, endpoint: str
) -> None:
    client.sync_put_item(
        lock_table,
        {
            "key": HOSTILE_KEY,
            "owner": "o\x1b[8m",
            "version": "v\n1",
            "lease_ms": 60_000,
            "protocol": 1,
        },
    )
    client.sync_put_item(lock_table, {"key": "bad\nrow", "owner": "x"})  # not a lock row
    one_off = dynalease("inspect", "--table", lock_table, "--endpoint", endpoint)
    watched = dynalease(
        "inspect",
        "--table",
        lock_table,
        "--watch",
        "--for",
        "0.1",
        "--plain",
        "--endpoint",
        endpoint,
    )
    for result in (one_off, watched):
        assert result.code == 0, result.err
        assert not any(character in result.out for character in "\x1b\x07\r"), result.out
        assert "customer:1\\x1b]0;owned\\x07\\x1b[2K\\r\\x1b[32mcustomer:2" in result.out
        assert "o\\x1b[8m" in result.out
        assert "bad\\nrow" in result.out  # one line per row


def test_the_rich_watch_view_shows_markup_in_a_key_as_text() -> None:
    import io

    from rich.console import Console

    from dynalease._tooling.console import rich_table
    from dynalease.cli.inspect import rich_cells
    from dynalease.cli.lock_rows import WATCH_HEADERS

    key = "[link=https://evil.example/login]customer:1 (click to renew)[/link]"
    cells = [(key, "[bold]owner[/bold]", "v", "30 s", "0.1 s", "0", "held")]
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=300, color_system="truecolor")
    console.print(rich_table("locks", WATCH_HEADERS, rich_cells(cells)))
    assert "\x1b]8;" not in screen.getvalue()  # no OSC 8 hyperlink
    plain = Console(file=io.StringIO(), width=300, record=True)
    plain.print(rich_table("locks", WATCH_HEADERS, rich_cells(cells)))
    shown = plain.export_text()
    assert key in shown and "[bold]owner[/bold]" in shown
