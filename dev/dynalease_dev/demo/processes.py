"""One process the demo spawns (a worker or the Lambda invoker) and its stream of events.

Each process prints one JSON event a line on stdout; a reader thread puts them
on the supervisor's queue, and ``None`` when the process has exited.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
from typing import IO, Any

#: What the reader threads put on the supervisor's queue: (process name, event or None).
Events = queue.Queue[tuple[str, dict[str, Any] | None]]


class Process:
    """One spawned demo process and the thread that reads its events."""

    def __init__(self, name: str, module: str, config: dict[str, Any], env: dict[str, str]):
        self.name = name
        # Closed with the process object; read only to explain a crash.
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )

    def pump(self, events: Events) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            try:
                events.put((self.name, json.loads(line)))
            except json.JSONDecodeError:
                continue
        events.put((self.name, None))

    def start(self, timing: dict[str, float]) -> None:
        """Send the run's timing; the process starts working when it reads it."""
        assert self.popen.stdin is not None
        try:
            self.popen.stdin.write(json.dumps(timing).encode() + b"\n")
            self.popen.stdin.close()
        except OSError:
            pass  # it already died; its exit is reported with its events

    def error_tail(self) -> str:
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""
