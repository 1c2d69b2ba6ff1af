"""Who holds a lease, as its rows say it to people: the ``holder`` map attribute.

Written with every create and takeover (part of the same request, so it costs none),
kept by renewals, and sent again only with the renewal after ``set_metadata``. It is for
people (``dynalease inspect``, ``ls``, ``break``): the protocol never reads it, and the
wall-clock ``acquired_at`` is never used for expiry. pydynox 1.8 ignores the attribute
and drops it when it takes a row over (its put replaces the whole row).

Nothing secret by default: no environment, no event, no command arguments.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from .._values import to_attribute
from ..constants import ENV_ECS_METADATA, ENV_FUNCTION_NAME, ENV_FUNCTION_VERSION
from .invocation_id import INVOCATION

__all__ = ["MAX_METADATA_BYTES", "Holder", "check_metadata", "set_command"]


#: The largest user metadata (as compact JSON, in UTF-8 bytes): with the rest of the
#: holder it keeps a lock row within the 1 KB of one write capacity unit.
MAX_METADATA_BYTES = 512
#: The longest command name a ``dynalease run`` holder names.
_MAX_COMMAND = 128

#: What this process says about itself beyond host and PID (``dynalease run``'s command,
#: the ECS task ARN once read).
_PROCESS: dict[str, str] = {}
_ECS_READ = threading.Lock()
#: The task metadata endpoint answers from the task's own network; a slower read is given up.
_ECS_TIMEOUT_S = 2.0


def set_command(command: str) -> None:
    """Name the command this process runs (``dynalease run``) in the holder of its rows."""
    _PROCESS["command"] = command[:_MAX_COMMAND]


def check_metadata(metadata: object, *, parameter: str = "metadata") -> dict[str, Any] | None:
    """``metadata`` as the holder's ``metadata`` map (AttributeValue form), checked before any
    request: a dict of str to JSON values, at most :data:`MAX_METADATA_BYTES` as JSON."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"{parameter} must be a dict of str to JSON values (str, int, float, bool, None, "
            f"list, dict), got {type(metadata).__name__}"
        )
    try:
        text = json.dumps(metadata, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"{parameter} must hold only JSON values (str, int, float, bool, None, list, "
            f"dict with str keys): {error}"
        ) from None
    size = len(text.encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"{parameter} is {size} bytes as JSON, over the limit of {MAX_METADATA_BYTES}: "
            "keep it to a few short facts (a job id, a URL), so that the lock row stays "
            "within one write capacity unit"
        )
    converted: dict[str, Any] = to_attribute(metadata, path=parameter)["M"]
    return converted


def _facts() -> dict[str, Any]:
    """What the process and platform say about the holder, read when a guard is made."""
    facts: dict[str, Any] = {"host": {"S": os.uname().nodename}, "pid": {"N": str(os.getpid())}}
    function = os.environ.get(ENV_FUNCTION_NAME)
    if function:
        where = {"function": {"S": function}}
        version = os.environ.get(ENV_FUNCTION_VERSION)
        if version:
            where["version"] = {"S": version}
        request_id = INVOCATION.get(None)
        if request_id:
            where["request_id"] = {"S": request_id}
        facts["lambda"] = {"M": where}
    elif uri := os.environ.get(ENV_ECS_METADATA):
        facts["platform"] = {"S": "ecs"}
        arn = _task_arn(uri)
        if arn:
            facts["ecs_task"] = {"S": arn}
    command = _PROCESS.get("command")
    if command:
        facts["command"] = {"S": command}
    return facts


def _task_arn(uri: str) -> str | None:
    """The ECS task ARN, once known.

    It is behind an HTTP request to the task metadata endpoint, so the first guard of a
    process starts one read on a thread of its own and never waits for it: the guards made
    after the answer name the task.
    """
    with _ECS_READ:
        if "ecs_read" not in _PROCESS:
            _PROCESS["ecs_read"] = "started"
            threading.Thread(
                target=_read_task_arn, args=(uri,), name="dynalease-ecs-metadata", daemon=True
            ).start()
    return _PROCESS.get("ecs_task")


def _read_task_arn(uri: str) -> None:
    """Read ``TaskARN`` from ``{uri}/task`` (plain HTTP on the task's link-local address)."""
    parts = urllib.parse.urlsplit(f"{uri.rstrip('/')}/task")
    try:
        connection = http.client.HTTPConnection(
            parts.hostname or "", parts.port, timeout=_ECS_TIMEOUT_S
        )
        try:
            connection.request("GET", parts.path)
            answer = connection.getresponse()
            arn = json.loads(answer.read()).get("TaskARN") if answer.status == 200 else None
        finally:
            connection.close()
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return  # no ARN: the holder says "ecs" only
    if isinstance(arn, str) and arn:
        _PROCESS["ecs_task"] = arn[: _MAX_COMMAND * 2]


class Holder:
    """One guard's holder map: its facts, its user metadata, and a change not yet sent."""

    def __init__(self, metadata: object = None) -> None:
        self._facts = _facts()
        self._metadata = check_metadata(metadata)
        self._written: dict[str, Any] | None = None
        #: The whole map to send with the next renewal (``set_metadata`` while held).
        self.unsent: dict[str, Any] | None = None

    def for_write(self) -> dict[str, Any]:
        """The map (AttributeValue form) of a create or takeover sent now."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._written = {**self._facts, "acquired_at": {"S": stamp}}
        if self._metadata is not None:
            self._written["metadata"] = {"M": self._metadata}
        self.unsent = None  # a new write carries the latest metadata
        return {"M": self._written}

    def set_metadata(self, metadata: object) -> None:
        """Replace the user metadata (None: none), checked (``check_metadata``) before anything;
        the next write (a renewal's while held) sends the map."""
        metadata = check_metadata(metadata)
        self._metadata = metadata
        if self._written is not None:
            written = {name: value for name, value in self._written.items() if name != "metadata"}
            if metadata is not None:
                written["metadata"] = {"M": metadata}
            self.unsent = {"M": written}

    def sent(self, holder: dict[str, Any] | None) -> None:
        """A renewal carrying ``holder`` was confirmed: it is on the rows."""
        if holder is not None and self.unsent is holder:
            self._written = holder["M"]
            self.unsent = None
