"""Single flight in Lambda: the middleware's option, separate processes, a killed holder,
short budgets, and the requests each invocation sends.

Timing here is generous on purpose (leases of 5-10 s, waits of a minute): the
assertions are about who ran the function and which error a waiter raised, and the
only time bound (the recovery extension's fast release) is checked against the
lease it beats, with seconds to spare.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext
from support.at_once import all_called, together
from support.lambda_plane import ControlPlane
from test_recovery import _run_in_background, _wait_for, plane_factory  # noqa: F401

from dynalease import DynamoDBClient
from dynalease._lambda.budget import cleanup_budget
from dynalease.exceptions import LockNotAcquired, SharedCallFailed
from dynalease.lock import SyncDistributedLock
from dynalease.middleware import bound_locks, lock_handler
from dynalease.single_flight import SingleFlight, single_flight

ROOT = Path(__file__).resolve().parents[2]
HANDLER = "tests/lambda/plane_task/holders.py:flight"


# --- the middleware's option, in threads ------------------------------------------------


def test_twenty_invocations_over_five_keys_run_the_handler_five_times(lock_table: str) -> None:
    runs: Counter[str] = Counter()
    flight = SingleFlight()

    @lock_handler(key="{key}", lease_duration=10, single_flight=flight)
    def handler(event: dict[str, Any], context: Any) -> dict[str, str]:
        runs[event["key"]] += 1
        all_called(flight, 20)  # every invocation began before a response is stored
        return {"built": event["key"]}

    results = together(20, lambda i: handler({"key": f"k{i % 5}"}, CountdownContext(60)))

    assert runs == {f"k{i}": 1 for i in range(5)}
    assert results == [{"built": f"k{i % 5}"} for i in range(20)]
    assert (flight.metrics.runs, flight.metrics.shared) == (5, 15)


def test_invocations_that_waited_for_a_failed_holder_get_its_error(lock_table: str) -> None:
    flight = SingleFlight()

    @lock_handler(key="{key}", lease_duration=10, single_flight=flight)
    def handler(event: dict[str, Any], context: Any) -> None:
        all_called(flight, 5)
        raise KeyError("no such customer")

    results = together(5, lambda _: handler({"key": "fails"}, CountdownContext(60)))

    assert sum(isinstance(r, KeyError) for r in results) == 1
    shared = [r for r in results if isinstance(r, SharedCallFailed)]
    assert len(shared) == 4
    assert (shared[0].error_type, shared[0].error_message) == ("KeyError", "'no such customer'")


def test_the_option_refuses_permits_and_keys_at_decoration() -> None:
    with pytest.raises(ValueError, match="single_flight works with one key"):
        lock_handler(key="k", permits=3, single_flight=SingleFlight())
    with pytest.raises(TypeError, match="must be a SingleFlight"):
        lock_handler(key="k", single_flight=60)  # type: ignore[arg-type]


# --- a waiter with too little time left --------------------------------------------------


def test_a_waiter_with_too_little_time_gives_up_with_the_usual_error_before_its_deadline(
    lock_table: str,
) -> None:
    inside = threading.Event()

    @lock_handler(key="{key}", lease_duration=5, single_flight=SingleFlight())
    def handler(event: dict[str, Any], context: Any) -> str:
        inside.set()
        time.sleep(event["sleep"])
        return "done"

    holder = threading.Thread(
        target=handler, args=({"key": "slow", "sleep": 8}, CountdownContext(60))
    )
    holder.start()
    assert inside.wait(30)
    # The 5 s lease's cleanup budget plus one second to wait: the waiter gives up then.
    remaining = cleanup_budget(5.0) + 1.0
    context = CountdownContext(remaining)
    with pytest.raises(LockNotAcquired):
        handler({"key": "slow", "sleep": 0}, context)
    assert context.get_remaining_time_in_millis() > 0  # gave up before its deadline
    holder.join(30)


def test_a_decorated_function_under_bound_locks_waits_no_longer_than_the_invocation(
    lock_table: str, other_client: DynamoDBClient
) -> None:
    inside = threading.Event()

    @single_flight(other_client, table=lock_table, key="{name}", lease_duration=5, wait_timeout=60)
    def slow(name: str, seconds: float) -> str:
        inside.set()
        time.sleep(seconds)
        return name

    holder = threading.Thread(target=slow, args=("busy", 6.0))
    holder.start()
    assert inside.wait(30)  # the holder has its lock

    @bound_locks
    def handler(event: Any, context: Any) -> str:
        return slow("busy", 0)

    # Inside a function, the engine's deadline bound ends the wait at the invocation's
    # deadline (the middleware's option stops before it, keeping the cleanup budget).
    began = time.monotonic()
    with pytest.raises(LockNotAcquired, match="invocation's deadline came before"):
        handler({}, CountdownContext(3.0))
    assert time.monotonic() - began < 3.0 + 2.0  # not the 60 s wait_timeout
    holder.join(30)


# --- separate processes: dynalease-dev invoke ---------------------------------------------


@pytest.mark.parametrize("keys", [1, 5])
def test_twenty_invocations_in_separate_processes_run_the_handler_once_per_key(
    keys: int, lock_table: str, aws_env: str, tmp_path: Path
) -> None:
    arrivals, runs = tmp_path / "arrivals", tmp_path / "runs"
    arrivals.mkdir()
    runs.mkdir()
    events = []
    for index in range(keys):
        # Each holder waits until all twenty processes have imported the handler, then a
        # second more; a process slower still finds the result fresh (result_ttl).
        event = tmp_path / f"event-{index}.json"
        body = {"key": f"report-{index}", "runs": str(runs), "arrivals": 20, "sleep": 1}
        event.write_text(json.dumps(body))
        events.append(event)
    env = dict(os.environ, FLIGHT_ARRIVALS=str(arrivals), FLIGHT_RESULT_TTL="300")
    env["FLIGHT_LEASE"] = "20"
    command = [sys.executable, "-m", "dynalease_dev.cli", "invoke", HANDLER]
    options = ["--timeout", "120", "--table", lock_table]
    processes = [
        subprocess.Popen(
            [*command, str(events[i % keys]), *options],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(20)
    ]
    outputs = [process.communicate(timeout=240) for process in processes]

    assert [p.returncode for p in processes] == [0] * 20, outputs[0][1][-2000:]
    answers = [json.loads(stdout) for stdout, _ in outputs]
    ran = sorted(name.split("-pid")[0] for name in os.listdir(runs))
    assert ran == [f"report-{index}" for index in range(keys)]  # once per key
    for index in range(keys):  # every invocation of a key returned its runner's response
        (runner,) = {answer["ran_in"] for answer in answers[index::keys]}
        assert runner in {p.pid for p in processes[index::keys]}


# --- a holder killed: exactly one waiter runs it -----------------------------------------


@pytest.mark.parametrize("extension", [True, False])
def test_a_killed_holder_is_replaced_by_exactly_one_waiter(
    extension: bool,
    plane_factory: Callable[..., ControlPlane],  # noqa: F811
    other_client: DynamoDBClient,
    lock_table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lease = 10.0
    monkeypatch.setenv("FLIGHT_LEASE", str(lease))
    plane = plane_factory("flight", extension=extension, timeout=30.0)
    key = f"k-{uuid.uuid4().hex[:8]}"
    (tmp_path / "runs").mkdir()
    event = {"key": key, "runs": str(tmp_path / "runs"), "mark": str(tmp_path / "mark")}
    invocation = _run_in_background(plane, {**event, "then": "kill"})
    _wait_for(Path(event["mark"]))
    started: list[float] = []

    @single_flight(
        other_client, table=lock_table, key="{key}", lease_duration=lease, wait_timeout=60
    )
    def successor(key: str) -> str:
        started.append(time.monotonic())
        return "rebuilt"

    results = together(3, lambda _: successor(key))
    stopped_at = invocation().stopped_at
    assert stopped_at is not None

    assert results == ["rebuilt"] * 3
    assert len(started) == 1  # exactly one waiter ran it; the others shared its result
    after = started[0] - stopped_at
    print(f"killed holder (extension={extension}) -> a waiter ran it {after:.3f} s later")
    if extension:
        # The extension deleted the row: no wait for the 10 s lease (a takeover needs the
        # row unchanged for a whole lease, so at least 10 s less one renewal interval).
        assert after < 5.0
    else:
        assert after < lease + 10.0  # the lease, plus a poll (generous: a loaded machine)


# --- requests per invocation ------------------------------------------------------------


def test_requests_per_call_for_the_runner_a_waiter_and_a_later_caller_beside_a_plain_lock(
    lock_table: str,
    counted_client: DynamoDBClient,
    counting_proxy: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The result item's reads, told apart from the lock's polls (both are GetItem).
    result_reads: list[object] = []
    get_item = counted_client.sync_get_item

    def counted_get_item(*args: Any, **kwargs: Any) -> Any:
        result_reads.append(args)
        return get_item(*args, **kwargs)

    monkeypatch.setattr(counted_client, "sync_get_item", counted_get_item)

    with SyncDistributedLock(counted_client, table=lock_table, key="plain"):
        pass
    assert counting_proxy.counts == {"PutItem": 1, "DeleteItem": 1}
    counting_proxy.reset()

    @single_flight(counted_client, table=lock_table, key="{name}")
    def build(name: str) -> str:
        if name == "pair":
            # Return once the waiter's create was refused: it is waiting.
            deadline = time.monotonic() + 60
            while counting_proxy.counts["PutItem"] < 2:
                assert time.monotonic() < deadline, "the waiter never tried the lock"
                time.sleep(0.005)
        return name

    assert build("alone") == "alone"  # the runner: the lock's two, a read, the result's put
    assert counting_proxy.counts == {"PutItem": 2, "GetItem": 1, "DeleteItem": 1}
    counting_proxy.reset()
    result_reads.clear()

    # A runner and one waiter: the waiter sends a plain lock waiter's refused create,
    # create and delete (and whatever polls its wait took: in the holder's process,
    # usually none, as the release wakes it), and one read of the result.
    runner = threading.Thread(target=build, args=("pair",))
    runner.start()
    while counting_proxy.counts["PutItem"] < 1:  # the runner holds the lock
        time.sleep(0.005)
    assert build("pair") == "pair"
    runner.join(30)
    polls = counting_proxy.counts["GetItem"] - len(result_reads)
    assert len(result_reads) == 1 + 1  # the runner's read, the waiter's read
    assert counting_proxy.counts == {"PutItem": 2 + 2, "GetItem": 2 + polls, "DeleteItem": 1 + 1}
    print(f"a waiter in the holder's process polled the lock row {polls} times")
    counting_proxy.reset()

    @single_flight(
        counted_client, table=lock_table, key="{name}", flight=SingleFlight(result_ttl=60)
    )
    def cached(name: str) -> str:
        return name

    assert cached("c") == "c"  # with result_ttl a runner reads first: one GetItem more
    assert counting_proxy.counts == {"PutItem": 2, "GetItem": 2, "DeleteItem": 1}
    counting_proxy.reset()
    assert cached("c") == "c"  # a later caller while fresh: one read, no lock
    assert counting_proxy.counts == {"GetItem": 1}


def test_the_middleware_answers_a_later_invocation_from_a_fresh_response_with_one_read(
    lock_table: str, counted_client: DynamoDBClient, counting_proxy: Any
) -> None:
    runs: list[int] = []

    @lock_handler(counted_client, key="{key}", single_flight=SingleFlight(result_ttl=60))
    def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
        runs.append(1)
        return {"runs": len(runs)}

    assert handler({"key": "fresh"}, CountdownContext(30)) == {"runs": 1}
    assert counting_proxy.counts == {"PutItem": 2, "GetItem": 2, "DeleteItem": 1}
    counting_proxy.reset()
    assert handler({"key": "fresh"}, CountdownContext(30)) == {"runs": 1}
    assert counting_proxy.counts == {"GetItem": 1}  # no lock at all
    assert runs == [1]
