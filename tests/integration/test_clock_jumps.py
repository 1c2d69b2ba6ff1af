"""A holder whose wall clock jumps (libfaketime) gives its lease up early and never overlaps.

The holder runs in a spawned process under libfaketime with the offset read
from a file on every call (``FAKETIME_NO_CACHE=1``), so the test moves that
process's wall clock mid-run. ``FAKETIME_DONT_FAKE_MONOTONIC=1`` keeps its
monotonic clock true: the scenario is a wall clock step (an operator, a bad NTP
step) while time really runs on. The protocol requires both clocks to agree
that a lease is valid, so a jump either way must end the holder's lease at
once, well before another owner could take the row over.

libfaketime comes from the Debian package ``faketime`` (``make system-deps``
installs it as root). Without it the tests skip locally and fail in CI.
"""

from __future__ import annotations

import glob
import multiprocessing
import os
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dynalease_dev.demo.history import check_history, read_head
from support.servers import in_ci
from support.worker_messages import MESSAGE_TIMEOUT_S
from support.workers import Target, contend, new_target

from dynalease import DynamoDBClient
from dynalease._engine.protocol import renew_interval

LEASE_S = 4.0
JUMP_S = 300
LIBRARY_PATTERNS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)

spawn = multiprocessing.get_context("spawn")


@pytest.fixture(scope="module")
def libfaketime() -> str:
    """The multi-threaded libfaketime library (the runtime renews from its own thread)."""
    for pattern in LIBRARY_PATTERNS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    reason = "libfaketime is not installed (apt-get install faketime, or `make system-deps`)"
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


class Inbox:
    """Every message the workers sent, with waiting for a particular one."""

    def __init__(self, events: Any) -> None:
        self.events = events
        self.messages: list[tuple[Any, ...]] = []

    def wait_for(self, wanted: Callable[[tuple[Any, ...]], bool]) -> tuple[Any, ...]:
        for message in self.messages:
            if wanted(message):
                return message
        deadline = time.monotonic() + MESSAGE_TIMEOUT_S
        while True:
            try:
                message = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the expected message never came; the workers said {self.messages}")
            self.messages.append(message)
            if wanted(message):
                return message

    def drain(self) -> None:
        while True:
            try:
                self.messages.append(self.events.get(timeout=0.5))
            except queue.Empty:
                return


def records_of(client: DynamoDBClient, target: Target, owner: str) -> list[dict[str, Any]]:
    """The history records ``owner`` committed on the target's key, in commit order."""
    records = []
    for sequence in range(1, read_head(client, target.history, target.key) + 1):
        record = client.sync_get_item(
            target.history, {"key": target.key, "seq": sequence}, consistent_read=True
        )
        if record is not None and record["owner"] == owner:
            records.append(record)
    return records


def on_jumped_clock(record: dict[str, Any], offset: str) -> bool:
    """True for a record whose writer's wall clock (``at``) was shifted by ``offset``."""
    return abs(float(record["at"]) - time.time() - float(offset)) < JUMP_S / 2


def set_offset(rc: Path, offset: str) -> None:
    """Replace the offset file atomically: libfaketime rereads it on every clock call."""
    staging = rc.with_suffix(".new")
    staging.write_text(offset + "\n")
    os.replace(staging, rc)


def start_under_faketime(
    library: str, rc: Path, target: Callable[..., None], args: tuple[Any, ...]
) -> Any:
    """Spawn ``target`` with libfaketime preloaded; only this child sees the fake wall clock."""
    process = spawn.Process(target=target, args=args)
    settings = {
        "LD_PRELOAD": library,
        "FAKETIME_TIMESTAMP_FILE": str(rc),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    saved = {name: os.environ.get(name) for name in [*settings, "FAKETIME"]}
    os.environ.pop("FAKETIME", None)  # it would override the timestamp file
    os.environ.update(settings)
    try:
        process.start()  # spawn execs a fresh interpreter with this environment
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return process


@pytest.mark.parametrize("offset", [f"+{JUMP_S}", f"-{JUMP_S}"], ids=["forward", "backward"])
def test_a_holder_whose_wall_clock_jumps_loses_its_lease_early_and_never_overlaps(
    offset: str,
    libfaketime: str,
    client: DynamoDBClient,
    endpoint: str,
    tmp_path: Path,
    processes: list[Any],
) -> None:
    target: Target = new_target(client, endpoint, lease=LEASE_S)
    rc = tmp_path / "faketime.rc"
    set_offset(rc, "+0")
    # Queues and events first: their helper process must not inherit LD_PRELOAD.
    events, stop, go = spawn.Queue(), spawn.Event(), spawn.Event()
    inbox = Inbox(events)
    steady = spawn.Process(target=contend, args=(target, events, stop, "steady", 0.3, go))
    processes.append(steady)
    steady.start()
    jumper = start_under_faketime(libfaketime, rc, contend, (target, events, stop, "jumper", 60.0))
    processes.append(jumper)
    _, _, held_owner, *_ = inbox.wait_for(lambda m: m[:2] == ("acquired", "jumper"))
    inbox.wait_for(lambda m: m == ("ready", "steady"))
    go.set()  # the steady worker contends only once the jumper holds the lock
    time.sleep(renew_interval(LEASE_S) + 0.2)  # it renews while the steady worker waits

    # Read the clock before the jump: the jumper may see the new offset, and lose, before
    # this process runs its next line.
    jumped_at = time.monotonic()
    set_offset(rc, offset)
    lost = inbox.wait_for(lambda m: m[:3] == ("lost", "jumper", held_owner))
    taken = inbox.wait_for(lambda m: m[:2] == ("acquired", "steady"))
    time.sleep(1.5)  # both keep contending, the jumper on its shifted clock
    stop.set()
    for process in processes:
        process.join(30)
    inbox.drain()

    lost_at, steady_first_at = lost[3], taken[3]
    # The jump really reached the holder's process (and only its wall clock).
    assert abs(lost[4] - time.time() - float(offset)) < 60
    assert jumped_at <= lost_at
    # At once: its first look at the lease after the jump (the ownership check of its
    # next record) found it lost. Each record carries the writer's wall clock, read just
    # after that check, so at most one record of the held lease (checked just before the
    # jump) shows the jumped clock; a holder that noticed only at a later renewal, or
    # never, would keep writing them. Counted, not timed: a busy machine only delays.
    jumped = [r for r in records_of(client, target, held_owner) if on_jumped_clock(r, offset)]
    assert len(jumped) <= 1, jumped
    # It held the lock from start to jump: nobody else got it before it gave up.
    assert steady_first_at >= lost_at
    assert all(m[3] >= lost_at for m in inbox.messages if m[:2] == ("acquired", "steady"))
    assert jumper.exitcode == 0 and steady.exitcode == 0
    report = check_history(client, target.history)
    assert report.ok, report.violations
    assert report.owners >= 2 and report.commits > 0
