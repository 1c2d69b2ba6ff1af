"""Handlers the recovery tests run under the local control plane (tests/support/lambda_plane.py).

Each takes the lock for ``event["key"]`` with a lease of ``event["lease"]`` seconds,
writes ``event["mark"]`` (the guard's owner, this runtime's pid and ``at``, the
wall time it got the lock) once it holds it, then does ``event["then"]``:
``sleep`` (past any timeout), ``exit`` (``os._exit``), ``kill`` (SIGKILL, as a
segfault would end it) or ``return``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from typing import Any

from dynalease import DistributedLock, DynamoDBClient, SyncDistributedLock, distributed_lock
from dynalease.middleware import current_lock, lock_handler
from dynalease.single_flight import SingleFlight

TABLE = os.environ["DYNALEASE_TABLE"]
client = DynamoDBClient()  # Region, endpoint and credentials from the function's environment


def _mark(event: dict[str, Any], owner: str) -> None:
    path = event["mark"]
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump({"owner": owner, "pid": os.getpid(), "at": time.time()}, handle)
    os.replace(path + ".tmp", path)


def _then(event: dict[str, Any]) -> str:
    action = event.get("then", "sleep")
    if action == "sleep":
        time.sleep(600)
    elif action == "exit":
        os._exit(3)
    elif action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return "done"


def _hold(event: dict[str, Any], *, fencing: bool) -> str:
    with SyncDistributedLock(
        client,
        table=TABLE,
        key=event["key"],
        lease_duration=event["lease"],
        wait_timeout=event.get("wait", 5),
        fencing=fencing,
    ) as guard:
        _mark(event, guard.owner)
        return _then(event)


def plain(event: dict[str, Any], context: Any) -> str:
    """A plain SyncDistributedLock inside the handler."""
    return _hold(event, fencing=False)


def fenced(event: dict[str, Any], context: Any) -> str:
    """A fenced SyncDistributedLock (protocol-2 row) inside the handler."""
    return _hold(event, fencing=True)


@lock_handler(key="{key}", lease_duration=3.0, wait_timeout=5)
def middleware(event: dict[str, Any], context: Any) -> str:
    """The Lambda middleware (a 3 s lease)."""
    _mark(event, current_lock().owner)
    return _then(event)


async def _async_hold(event: dict[str, Any]) -> str:
    async with DistributedLock(
        client, table=TABLE, key=event["key"], lease_duration=event["lease"], wait_timeout=5
    ) as guard:
        _mark(event, guard.owner)
        if event.get("then", "sleep") == "sleep":
            await asyncio.sleep(600)
        return _then(event)


def async_handler(event: dict[str, Any], context: Any) -> str:
    """An async handler body: DistributedLock under asyncio.run."""
    return asyncio.run(_async_hold(event))


@distributed_lock(client, table=TABLE, key="{key}", lease_duration=3.0, wait_timeout=5)
def _decorated(key: str, event: dict[str, Any]) -> str:
    _mark(event, "decorated")
    return _then(event)


def decorated(event: dict[str, Any], context: Any) -> str:
    """A ``distributed_lock``-decorated function called from the handler."""
    return _decorated(event["key"], event)


def batch(event: dict[str, Any], context: Any) -> str:
    """An SQS batch holding one lock per record at once, then outliving the timeout."""
    with contextlib.ExitStack() as stack:
        owners = []
        for record in event["Records"]:
            body = json.loads(record["body"])
            guard = stack.enter_context(
                SyncDistributedLock(client, table=TABLE, key=body["key"], lease_duration=3.0)
            )
            owners.append(guard.owner)
        _mark(event, ",".join(owners))
        return _then(event)


def multikey(event: dict[str, Any], context: Any) -> str:
    """One lock on every key in ``event["keys"]`` (one transaction), outliving the timeout."""
    with SyncDistributedLock(
        client, table=TABLE, keys=event["keys"], lease_duration=event["lease"]
    ) as guard:
        _mark(event, guard.owner)
        return _then(event)


def raises(event: dict[str, Any], context: Any) -> None:
    """A handler error: the runtime reports it on ``/invocation/{id}/error``."""
    raise ValueError(f"bad event {event!r}")


def _contended(event: dict[str, Any], context: Any, error: Exception) -> dict[str, Any]:
    return {"contended": str(error), "remaining_ms": context.get_remaining_time_in_millis()}


@lock_handler(key="{key}", on_contention=_contended)
def defaults(event: dict[str, Any], context: Any) -> Any:
    """The middleware with every default: the lease it wrote on the row and the time left,
    or with ``event["mark"]``, a holder that is stopped as the others are."""
    if "mark" in event:
        _mark(event, current_lock().owner)
        return _then(event)
    row = client.sync_get_item(TABLE, {"key": event["key"]})
    assert row is not None
    return {
        "lease_ms": int(row["lease_ms"]),
        "remaining_ms": context.get_remaining_time_in_millis(),
    }


# Single flight (tests/lambda/test_single_flight_lambda.py): each process that imports
# this module arrives in FLIGHT_ARRIVALS, so a holder can wait until every one is here.
if os.environ.get("FLIGHT_ARRIVALS"):
    open(os.path.join(os.environ["FLIGHT_ARRIVALS"], str(os.getpid())), "w").close()


@lock_handler(
    key="{key}",
    lease_duration=float(os.environ.get("FLIGHT_LEASE", "5")),
    single_flight=SingleFlight(result_ttl=float(os.environ.get("FLIGHT_RESULT_TTL", "0"))),
)
def flight(event: dict[str, Any], context: Any) -> Any:
    """A single-flight handler: notes its run in ``event["runs"]`` (a directory), waits for
    ``event["arrivals"]`` processes, sleeps ``event["sleep"]``, then returns its pid, raises
    ``event["raise"]`` or does ``event["then"]`` (after ``event["mark"]``)."""
    with open(os.path.join(event["runs"], f"{event['key']}-pid{os.getpid()}"), "w"):
        pass
    deadline = time.monotonic() + 60
    while len(os.listdir(os.environ.get("FLIGHT_ARRIVALS", "."))) < event.get("arrivals", 0):
        assert time.monotonic() < deadline, "the other invocations never arrived"
        time.sleep(0.05)
    time.sleep(event.get("sleep", 0))
    if "raise" in event:
        raise ValueError(event["raise"])
    if "mark" in event:
        _mark(event, current_lock().owner)
        return _then(event)
    return {"ran_in": os.getpid()}
