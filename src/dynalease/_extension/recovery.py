"""The recovery extension: on a timeout or crash, release the rows the dead runtime held.

Registered for ``SHUTDOWN`` only, so it never delays an invocation; requests go where the
extension's own environment says, never where a journal entry says, and never past
``deadlineMs``; only in the function's own lock tables (``DYNALEASE_TABLE`` and
``DYNALEASE_RECOVERY_TABLES``), never in a table an entry names. Run by hand:
``python -m dynalease._extension.recovery [NAME]``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Only what registering and waiting need: the request path (client, transport, TLS) loads
# at shutdown, so the waiting process stays small.
from .. import _compute_modes
from .._engine import journal, journal_switch
from ..constants import ENV_RECOVERY_TABLES, ENV_RUNTIME_API, ENV_TABLE, RECOVERY_EXTENSION
from . import workers

__all__ = ["Control", "Outcome", "lock_tables", "main", "recover"]

log = logging.getLogger("dynalease.recovery")

#: The shutdown reasons after which a runtime may have died holding locks.
RECOVER_ON = frozenset({"timeout", "failure", "spindown"})
#: Kept back from ``deadlineMs``: the process must be out before Lambda kills it.
MARGIN_S = 0.15
REGISTER_TIMEOUT_S = 5.0
#: The longest shutdown window believed (Lambda gives extensions 2,000 ms at most).
MAX_WINDOW_S = 10.0
#: The window taken when ``deadlineMs`` is missing or not a number.
DEFAULT_WINDOW_S = 1.5
_API = "/2020-01-01/extension"


class Control:
    """The Extensions API of one sandbox (``AWS_LAMBDA_RUNTIME_API``), over stdlib HTTP."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.host = host or address
        self.port = int(port) if port.isdigit() else 80
        self.identifier = ""

    def _request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        headers: dict[str, str],
        timeout: float | None,
    ) -> tuple[int, dict[str, str], bytes]:
        # Plain HTTP/1.1 on loopback, one request per connection: a socket is enough,
        # and http.client's imports (ssl, email) would double the waiting process's memory.
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        lines = [f"{method} {_API}{path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines += [f"Content-Length: {len(data)}", "Connection: close", "", ""]
        with socket.create_connection((self.host, self.port), timeout=timeout) as connection:
            connection.sendall("\r\n".join(lines).encode("latin-1") + data)
            chunks = []
            while chunk := connection.recv(65536):
                chunks.append(chunk)
        return _parse(b"".join(chunks))

    def register(self, name: str) -> str:
        """Register for SHUTDOWN only; the ``Lambda-Extension-Identifier`` Lambda returns."""
        status, headers, text = self._request(
            "POST",
            "/register",
            {"events": ["SHUTDOWN"]},
            {"Lambda-Extension-Name": name, "Content-Type": "application/json"},
            REGISTER_TIMEOUT_S,
        )
        identifier = headers.get("lambda-extension-identifier")
        if status != 200 or not identifier:
            raise RuntimeError(
                f"extension register answered {status} {text[:200]!r}; is {ENV_RUNTIME_API} "
                "the sandbox's API address?"
            )
        self.identifier = identifier
        return identifier

    def next_event(self) -> dict[str, Any]:
        """Wait (without a time limit: the sandbox is frozen meanwhile) for the next event."""
        status, _, text = self._request(
            "GET", "/event/next", None, {"Lambda-Extension-Identifier": self.identifier}, None
        )
        if status != 200:
            raise RuntimeError(f"extension event/next answered {status} {text[:200]!r}")
        event = json.loads(text)
        return event if isinstance(event, dict) else {}

    def exit_error(self, kind: str, message: str) -> None:
        """Tell Lambda why this extension stops (``/extension/exit/error``); best effort."""
        with contextlib.suppress(OSError):
            self._request(
                "POST",
                "/exit/error",
                {"errorMessage": message, "errorType": kind},
                {
                    "Lambda-Extension-Identifier": self.identifier,
                    "Lambda-Extension-Function-Error-Type": kind,
                },
                1.0,
            )


def _parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (names in lower case) and body of a whole HTTP/1.1 answer."""
    head, separator, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if not separator or len(parts) < 2 or not parts[1].isdigit():
        raise OSError(f"not an HTTP answer: {answer[:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if length is not None and length.isdigit():
        body = body[: int(length)]
    return int(parts[1]), headers, body


@dataclass
class Outcome:
    """What one recovery did, by entry."""

    released: list[journal.Entry] = field(default_factory=list)
    not_ours: list[journal.Entry] = field(default_factory=list)
    failed: list[journal.Entry] = field(default_factory=list)
    alive: list[journal.Entry] = field(default_factory=list)
    #: Left to their lease: whether their writer lives cannot be told from here.
    unjudged: list[journal.Entry] = field(default_factory=list)


def lock_tables(environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    """The tables whose rows recovery may release: ``DYNALEASE_TABLE`` and every name in
    ``DYNALEASE_RECOVERY_TABLES`` (separated by commas).

    Raises ``ValueError`` for a name that is not a DynamoDB table name.
    """
    listed = environ.get(ENV_RECOVERY_TABLES, "").split(",")
    named = [(ENV_TABLE, environ.get(ENV_TABLE, "").strip())]
    named += [(ENV_RECOVERY_TABLES, name.strip()) for name in listed]
    tables = set()
    for variable, name in named:
        if not name:
            continue
        if not journal.TABLE_NAME.fullmatch(name):
            raise ValueError(
                f"{variable} names {name!r}, which is not a DynamoDB table name (3-255 "
                "letters, digits, '_', '-' and '.'); list lock tables separated by commas"
            )
        tables.add(name)
    return frozenset(tables)


def recover(
    directory: str,
    deadline: float,
    skipped: journal.Skipped | None = None,
    *,
    tables: Collection[str] | None = None,
    judged: Callable[[journal.Entry], bool] | None = None,
) -> Outcome:
    """Release the rows of dead writers' entries in ``directory`` before ``deadline`` (epoch s).

    Only in ``tables`` (by default :func:`lock_tables`): an entry naming another table is
    skipped. Only entries that ``judged`` (by default every one) says a pid tells about:
    the others are left to their lease. An entry is removed once its row is released or
    is no longer its owner's lock row. A bad file is logged once per ``skipped`` (a reader
    that looks again passes the same one).
    """
    outcome = Outcome()
    dead: list[journal.Entry] = []
    tables = lock_tables() if tables is None else tables
    for entry in journal.entries(directory, skipped, tables=tables):
        if judged is not None and not judged(entry):
            outcome.unjudged.append(entry)
            continue
        (dead if not journal.writer_alive(entry.pid, entry.started) else outcome.alive).append(
            entry
        )
    if not dead:
        return outcome
    budget = deadline - time.time() - MARGIN_S
    if budget <= 0:
        log.warning("dynalease-recovery: no time left before the shutdown deadline; rows stay")
        outcome.failed.extend(dead)
        return outcome
    from .releasing import release_dead  # the client and the loop, for dead writers only

    release_dead(dead, outcome, deadline - MARGIN_S, budget)
    return outcome


def watch(deadline: float, stop: Callable[[int], object] = os._exit) -> threading.Timer | None:
    """``stop(1)`` just before the deadline, whatever a request or the loop does; None when
    it has passed (then nothing is sent at all).
    """
    delay = deadline - time.time() - MARGIN_S / 3
    if delay <= 0:
        return None
    timer = threading.Timer(delay, stop, (1,))
    timer.daemon = True
    timer.start()
    return timer


def shutdown_deadline(deadline_ms: object, now: float) -> float:
    """The epoch second to be gone by: ``deadlineMs`` clamped to ``[now, now + MAX_WINDOW_S]``,
    or the default window when it is not a number (NaN passes ``json.loads``).
    """
    if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int | float):
        return now + DEFAULT_WINDOW_S
    try:
        seconds = deadline_ms / 1000
    except OverflowError:  # an integer beyond any float
        seconds = math.inf
    if math.isnan(seconds):
        return now + DEFAULT_WINDOW_S
    return min(max(seconds, now), now + MAX_WINDOW_S)


def main(argv: Sequence[str] | None = None) -> int:
    """Register, wait for SHUTDOWN, recover; the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    name = args[0] if args else RECOVERY_EXTENSION
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    address = os.environ.get(ENV_RUNTIME_API)
    if not address:
        print(
            f"dynalease-recovery: {ENV_RUNTIME_API} is not set: run it in Lambda", file=sys.stderr
        )
        return 2
    try:
        tables = lock_tables()
    except ValueError as error:  # before registering: the function's init fails, saying why
        print(f"dynalease-recovery: {error}", file=sys.stderr)
        return 2
    control = Control(address)
    try:
        control.register(name)
    except (OSError, RuntimeError) as error:
        print(f"dynalease-recovery: could not register: {error}", file=sys.stderr)
        return 1
    if _compute_modes.managed_instances():  # no event when a worker dies: watch the journal
        view = workers.PidView(journal.pid_namespace())
        watched = functools.partial(recover, tables=tables, judged=view.judges)
        workers.WorkerWatch(journal_switch.directory(), watched).start()
    while True:
        try:
            event = control.next_event()
        except (OSError, RuntimeError, ValueError) as error:
            print(f"dynalease-recovery: event/next failed: {error}", file=sys.stderr)
            return 1
        if event.get("eventType") != "SHUTDOWN":
            continue
        reason = str(event.get("shutdownReason", "")).lower()
        if reason not in RECOVER_ON:
            return 0
        deadline = shutdown_deadline(event.get("deadlineMs"), time.time())
        watchdog = watch(deadline)
        try:
            outcome = recover(journal_switch.directory(), deadline, tables=tables)
        except Exception as error:
            log.exception("dynalease-recovery: recovery failed")
            control.exit_error("Extension.RecoveryFailed", f"{type(error).__name__}: {error}")
            return 1
        finally:
            if watchdog is not None:
                watchdog.cancel()
        if outcome.released or outcome.failed or outcome.not_ours:
            log.info(
                "dynalease-recovery: %s: %d released, %d not ours any more, %d failed, "
                "%d left to live writers",
                reason,
                len(outcome.released),
                len(outcome.not_ours),
                len(outcome.failed),
                len(outcome.alive),
            )
        return 0


if __name__ == "__main__":
    sys.exit(main())
