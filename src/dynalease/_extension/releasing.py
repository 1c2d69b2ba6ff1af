"""The releases of dead writers' rows: a lean client, the runtime's event loop, the spans.

:func:`.recovery.recover` imports this module only once it has found a dead writer's
entry, so while the extension waits for ``SHUTDOWN`` it loads no client, no engine
runtime and no ``asyncio``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any, Protocol

from .. import _tracing
from .._engine import journal
from .._redact import logged_key, shown_in_message
from ..client import DynamoDBClient
from .release import Result, release

__all__ = ["Fates", "release_dead"]

log = logging.getLogger("dynalease.recovery")


class Fates(Protocol):
    """Where each entry's fate is written (:class:`.recovery.Outcome`)."""

    released: list[journal.Entry]
    not_ours: list[journal.Entry]
    failed: list[journal.Entry]


def release_dead(dead: list[journal.Entry], outcome: Fates, by: float, budget: float) -> None:
    """Release ``dead``'s rows within ``budget`` seconds, none answered later than ``by``
    (epoch s): the shutdown deadline less the extension's margin."""
    try:
        # Region and endpoint from this process's environment, never from an entry.
        client = DynamoDBClient(transport="lean")
    except Exception as error:  # e.g. no Region: these rows wait out their lease
        log.warning("dynalease-recovery: no DynamoDB client from the environment: %s", error)
        outcome.failed.extend(dead)
        return

    async def release_all() -> None:
        work = [_release(client, entry, outcome, by) for entry in dead]
        with contextlib.suppress(TimeoutError):  # each entry's own bound has logged it
            await asyncio.wait_for(asyncio.gather(*work), budget)

    client._runtime().run(release_all())


async def _release(client: Any, entry: journal.Entry, outcome: Fates, by: float) -> None:
    more = f" and its {len(entry.keys) - 1} other keys" if len(entry.keys) > 1 else ""
    name = f"lock {logged_key(entry.key)}{more} in table {entry.table!r} (pid {entry.pid})"
    store = client._lock_store
    try:
        left = by - time.time()
        await asyncio.wait_for(store.prepare(), max(0.01, left))
        left = by - time.time()
        releases = [  # a multi-key lock's rows are released one by one
            release(store.transport, entry.table, key, entry.owner, fenced=entry.fencing)
            for key in entry.keys
        ]
        with _tracing.recovering(entry.table, entry.key):
            results = await asyncio.wait_for(asyncio.gather(*releases), max(0.01, left))
        # Released if any row was; else a contradicted row is worth the warning.
        chosen = (Result.RELEASED, Result.CONTRADICTED)
        result = next((each for each in chosen if each in results), Result.NOT_OURS)
    except TimeoutError:
        outcome.failed.append(entry)
        log.warning("dynalease-recovery: %s: no answer before the shutdown deadline", name)
    except Exception as error:
        outcome.failed.append(entry)
        text = str(error)
        for key in entry.keys:
            text = shown_in_message(text, key)
        log.warning("dynalease-recovery: could not release %s: %r", name, text)
    else:
        if result is Result.RELEASED:
            outcome.released.append(entry)
            log.info("dynalease-recovery: released %s left by a stopped runtime", name)
        elif result is Result.NOT_OURS:
            outcome.not_ours.append(entry)
            log.info("dynalease-recovery: %s was no longer its owner's; left as it is", name)
        else:
            outcome.not_ours.append(entry)
            log.warning(
                "dynalease-recovery: %s is not the %s lock row its entry claims; left as it is",
                name,
                "fenced" if entry.fencing else "unfenced",
            )
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
