"""What the demo supervisor knows, built from the workers' event streams.

Pure bookkeeping (no I/O), so the live view, the summary and the checks read
one model.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: An acquisition event this close to a row change is that change.
SAME_MOMENT_S = 1.0

#: The crashed row was already taken over and released when we looked.
RELEASED_ROW = "(released)"

#: What became of a job: the keys of :attr:`WorkerStats.outcomes`.
COMPLETED, GAVE_UP, LOST, FAILED = "completed", "gave_up", "lost", "failed"

#: The job outcome of an ``invoked`` event's outcome; any other outcome failed.
INVOCATION_OUTCOMES = {"ok": COMPLETED, "contended": GAVE_UP}


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class WorkerStats:
    """One process's counts, as reported by its events.

    ``outcomes`` counts its jobs by what became of them (:data:`COMPLETED`,
    :data:`GAVE_UP`, :data:`LOST`, :data:`FAILED`).
    """

    name: str
    kind: str = "worker"
    state: str = "starting"
    key: str = ""
    since: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    renewals: int = 0
    waits_ms: list[float] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    killed: bool = False
    owner: str = ""
    exit_code: int | None = None
    last_error: str = ""


@dataclass
class KeyState:
    """Who holds a key right now, as far as the events tell."""

    holder: str = ""
    since: float = 0.0
    renewals: int = 0
    waiting: set[str] = field(default_factory=set)


@dataclass
class Crash:
    """The SIGKILLed holder, and who took its lock over (read from the lock row)."""

    worker: str
    key: str
    owner: str
    at: float
    successor_owner: str = ""
    successor: str = ""
    takeover_after_s: float | None = None
    ledger_after: bool = False


class DemoState:
    """Folds events into per-worker and per-key state."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.workers: dict[str, WorkerStats] = {}
        self.keys: dict[str, KeyState] = {}
        self.log: list[str] = []
        self.acquisitions = 0
        self.renewals = 0
        self.takeovers = 0
        self.committed: dict[str, int] = {}
        self.uncertain: dict[str, int] = {}
        self.audits = 0
        self.audit_changes = 0
        self.invocations: dict[str, dict[str, int]] = {}
        self.crash: Crash | None = None
        self.victim_ready: str = ""
        self.owners: dict[str, str] = {}

    def elapsed(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.started

    def note(self, text: str, now: float | None = None) -> None:
        self.log.append(f"[{self.elapsed(now):5.1f} s] {text}")

    def worker(self, name: str, kind: str = "worker") -> WorkerStats:
        if name not in self.workers:
            self.workers[name] = WorkerStats(name, kind)
        return self.workers[name]

    def apply(self, name: str, event: dict[str, Any], now: float) -> None:
        """Fold one event of worker ``name`` received at monotonic time ``now``."""
        stats = self.worker(name)
        kind = event.get("event")
        key = str(event.get("key", ""))
        state = self.keys.setdefault(key, KeyState()) if key else None
        if kind == "ready":
            stats.state = "ready"
        elif kind == "waiting" and state is not None:
            stats.state, stats.key, stats.since = "waiting", key, now
            state.waiting.add(name)
        elif kind == "acquired" and state is not None:
            self._acquired(name, stats, state, key, float(event.get("wait_ms", 0.0)), now)
            owner = event.get("owner")
            if owner:  # ledger jobs report their owner token (and write history)
                self.owners[str(owner)] = name
                stats.owner = str(owner)
                if self.crash is not None and key == self.crash.key:
                    self.crash.ledger_after = True
        elif kind == "renewed" and state is not None:
            stats.renewals += 1
            state.renewals += 1
            self.renewals += 1
        elif kind == "long_hold":
            self.victim_ready = name
            self.note(f"{name} holds {key} and keeps working past its lease: about to be killed")
        elif kind == "committed":
            customer = str(event["customer"])
            self.committed[customer] = self.committed.get(customer, 0) + 1
        elif kind == "uncertain":
            customer = str(event["customer"])
            self.uncertain[customer] = self.uncertain.get(customer, 0) + 1
        elif kind == "released" and state is not None:
            stats.outcomes[COMPLETED] += 1
            if event.get("kind") == "ledger":
                stats.reads.append(int(event["reads"]))
                stats.writes.append(int(event["writes"]))
            else:
                self.audits += 1
                if event.get("changed"):
                    self.audit_changes += 1
                    self.note(f"VIOLATION: {name} saw {key} change while it held the lock")
            self._leave(name, stats, state)
        elif kind in ("gave_up", "lost") and state is not None:
            if kind == "gave_up":
                stats.outcomes[GAVE_UP] += 1
                stats.waits_ms.append(float(event.get("wait_ms", 0.0)))
            else:
                stats.outcomes[LOST] += 1
                self.note(f"{name} lost {key}: {event.get('error', '')}")
            self._leave(name, stats, state)
        elif kind == "error":
            stats.outcomes[FAILED] += 1
            stats.last_error = str(event.get("error", ""))
            self.note(f"{name}: {stats.last_error}")
        elif kind == "invoked":
            self._invoked(stats, event)
        elif kind == "note":
            self.note(f"{name}: {event.get('text', '')}")
        elif kind == "done":
            stats.state = "done"

    def _acquired(
        self, name: str, stats: WorkerStats, state: KeyState, key: str, wait_ms: float, now: float
    ) -> None:
        self.acquisitions += 1
        stats.waits_ms.append(wait_ms)
        stats.state, stats.key, stats.since = "holding", key, now
        state.waiting.discard(name)
        crash = self.crash
        if (
            crash is not None
            and key == crash.key
            and crash.takeover_after_s is not None
            and not crash.successor
            and now - crash.at - crash.takeover_after_s < SAME_MOMENT_S
        ):
            crash.successor = name  # its event arrived just after the row changed
        state.holder, state.since, state.renewals = name, now, 0

    def _leave(self, name: str, stats: WorkerStats, state: KeyState) -> None:
        stats.state, stats.key = "idle", ""
        state.waiting.discard(name)
        if state.holder == name:
            state.holder = ""

    def _invoked(self, stats: WorkerStats, event: dict[str, Any]) -> None:
        handler = str(event.get("handler", "?"))
        outcome = str(event.get("outcome", "error"))
        counts = self.invocations.setdefault(handler, {"ok": 0, "contended": 0, "error": 0})
        counts[outcome] = counts.get(outcome, 0) + 1
        stats.outcomes[INVOCATION_OUTCOMES.get(outcome, FAILED)] += 1
        if outcome not in INVOCATION_OUTCOMES:
            self.note(f"{stats.name}: {handler} failed: {event.get('detail', '')}")
        stats.waits_ms.append(float(event.get("ms", 0.0)))

    def killed(self, name: str, now: float) -> None:
        """Record the SIGKILL of ``name`` while it held its key."""
        stats = self.workers[name]
        stats.killed, stats.state = True, "killed"
        self.crash = Crash(worker=name, key=stats.key, owner=stats.owner, at=now)
        self.note(f"SIGKILL {name} while it holds {stats.key}; its row stays behind", now)

    def taken_over(self, new_owner: str, now: float) -> None:
        """The crashed holder's row changed hands (seen on the row itself)."""
        crash = self.crash
        assert crash is not None
        crash.successor_owner = new_owner
        crash.takeover_after_s = now - crash.at
        holder = self.keys[crash.key].holder
        if new_owner in self.owners:
            crash.successor = self.owners[new_owner]
        elif holder and holder != crash.worker:
            # Decorated (audit) calls do not report their owner; the worker whose
            # acquisition event arrived since the kill is the one.
            crash.successor = holder
        self.takeovers += 1
        self.note(
            f"{self.successor()} took {crash.key} over {crash.takeover_after_s:.1f} s after "
            f"{crash.worker} was killed: it saw the row unchanged for the whole lease",
            now,
        )

    def successor(self) -> str:
        """Who took the crashed holder's lock over: a worker, or a Lambda handler."""
        crash = self.crash
        if crash is None or not crash.successor_owner:
            return "nobody"
        if crash.successor:
            return crash.successor
        if crash.successor_owner == RELEASED_ROW:
            return "another owner"
        return "a Lambda handler"

    def exited(self, name: str, code: int | None) -> None:
        stats = self.worker(name)
        stats.exit_code = code
        if stats.state not in ("done", "killed"):
            stats.state = f"exited ({code})"
        for state in self.keys.values():
            state.waiting.discard(name)
