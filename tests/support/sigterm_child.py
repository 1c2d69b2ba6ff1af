"""A container-like process that holds locks until it is sent SIGTERM.

    python sigterm_child.py MODE ENDPOINT TABLE KEY[,KEY...] [--opt-in] [--app-handler]

MODE is how the locks are held: ``sync-with``, ``sync-decorated``, ``async-with``
(the main task), ``async-tasks`` (one worker task per key, as an asyncio service
runs them), ``thread`` (a worker thread holds it) or ``none`` (no lock). It prints
``held`` once every lock is held, ``app handler ran`` from its own SIGTERM handler
(``--app-handler``), and ``unwound <key>`` when a locked block exits by an exception.
The exit status, or the signal that ended it, is the test's to read.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from types import FrameType

from dynalease import DynamoDBClient
from dynalease.lock import DistributedLock, SyncDistributedLock, distributed_lock
from dynalease.shutdown import release_locks_on_sigterm

LEASE_S = 30.0
WAIT_S = 5.0
LIMIT_S = 60.0  # nothing here outlives a test that died


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    mode, endpoint, table, keys_arg, *flags = sys.argv[1:]
    keys = keys_arg.split(",")
    client = DynamoDBClient(region="us-east-1", endpoint_url=endpoint, max_retries=0)
    if "--app-handler" in flags:

        def app_handler(signum: int, frame: FrameType | None) -> None:
            say("app handler ran")

        signal.signal(signal.SIGTERM, app_handler)
    if "--opt-in" in flags:
        release_locks_on_sigterm()

    if mode == "sync-with":
        with SyncDistributedLock(
            client, key=keys[0], table=table, lease_duration=LEASE_S, wait_timeout=WAIT_S
        ):
            try:  # SIGTERM may come as soon as "held" is written
                say("held")
                threading.Event().wait(LIMIT_S)
            finally:
                say(f"unwound {keys[0]}")
    elif mode == "sync-decorated":

        @distributed_lock(
            client, key="{key}", table=table, lease_duration=LEASE_S, wait_timeout=WAIT_S
        )
        def work(key: str) -> None:
            try:  # SIGTERM may come as soon as "held" is written
                say("held")
                threading.Event().wait(LIMIT_S)
            finally:
                say(f"unwound {key}")

        work(keys[0])
    elif mode in ("async-with", "async-tasks"):
        asyncio.run(hold_async(client, table, keys, tasks=mode == "async-tasks"))
    elif mode == "thread":
        held = threading.Event()

        def worker() -> None:
            with SyncDistributedLock(
                client, key=keys[0], table=table, lease_duration=LEASE_S, wait_timeout=WAIT_S
            ):
                held.set()
                threading.Event().wait(LIMIT_S)

        threading.Thread(target=worker, daemon=True).start()
        held.wait(LIMIT_S)
        say("held")
        threading.Event().wait(LIMIT_S)
    elif mode == "none":
        say("held")
        threading.Event().wait(LIMIT_S)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    say("finished")


async def hold_async(client: DynamoDBClient, table: str, keys: list[str], *, tasks: bool) -> None:
    held = 0

    async def hold(key: str) -> None:
        nonlocal held
        async with DistributedLock(
            client, key=key, table=table, lease_duration=LEASE_S, wait_timeout=WAIT_S
        ):
            held += 1
            try:
                if held == len(keys):
                    say("held")
                await asyncio.sleep(LIMIT_S)
            finally:
                say(f"unwound {key}")

    if tasks:
        workers = [asyncio.create_task(hold(key)) for key in keys]
        await asyncio.gather(*workers, return_exceptions=True)
    else:
        await hold(keys[0])


if __name__ == "__main__":
    main()
