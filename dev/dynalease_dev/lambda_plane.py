"""A local Lambda control plane: one function, one sandbox at a time.

For dynalease's tests, its recovery benchmark and ``dynalease-dev invoke
--lifecycle``; never in the layer. This is a stand-in written from AWS's published Runtime
API (``/2018-06-01/runtime/invocation/next``, ``/{id}/response``,
``/{id}/error``, ``/init/error``) and Extensions API (``/2020-01-01/extension/
register`` with ``Lambda-Extension-Name`` answering ``Lambda-Extension-Identifier``,
``event/next``, ``init/error``, ``exit/error``). It is not Lambda; it does
what these tests need the way Lambda documents it:

- a sandbox starts every executable in the layer's ``extensions/`` as its own
  process, waits until each has registered and asked for its first event, then
  starts the runtime, the real runtime interface client
  (``python -m awslambdaric module.handler``);
- an invocation has a deadline; at the deadline the runtime process is killed
  (SIGKILL), and extensions that registered for ``SHUTDOWN`` get it with reason
  ``timeout`` and a ``deadlineMs`` 2,000 ms away; a runtime that dies by itself
  makes the reason ``failure``; :meth:`ControlPlane.close` ends with
  ``spindown``. Extensions still running at the deadline are killed;
- the next invocation after a shutdown starts a fresh sandbox; ``/tmp`` (here:
  the journal directory the plane passes on) survives, as it may in Lambda.

With ``max_concurrency=N`` the plane is a Lambda Managed Instances environment
instead: the runtime gets ``AWS_LAMBDA_MAX_CONCURRENCY`` (awslambdaric forks N
workers, each running init; Python 3.13+ on Lambda, pass its interpreter as
``python``) and ``AWS_LAMBDA_INITIALIZATION_TYPE=lambda-managed-instances``;
invocations run at once (call :meth:`ControlPlane.invoke` from several threads);
a timeout is reported (status ``"timeout"``, with the handler's late answer when
it comes) but not enforced; an extension that asks for ``INVOKE`` events is
refused; a worker that dies leaves the environment up (its unanswered invocation
is reported as ``"crash"``; the plane cannot tell which worker took which
request, so with several in flight it is the ones unanswered when a worker died).

Times are monotonic seconds of this process, so a test can compare them with
its own readings. The HTTP server and the register answers are in :mod:`.lambda_api`,
which tests scripting an Extensions API of their own use too.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .lambda_api import (
    FUNCTION_NAME,
    FUNCTION_VERSION,
    MANAGED_INSTANCES,
    Answer,
    ApiServer,
    invoke_refused,
    read_json,
    registered,
    unknown_extension,
)
from .lambda_workers import child_pids

__all__ = ["SHUTDOWN_WINDOW_MS", "ControlPlane", "Extension", "Invocation"]

SHUTDOWN_WINDOW_MS = 2_000
INIT_TIMEOUT_S = 20.0
_POLL_S = 0.05


@dataclass
class Extension:
    """One extension process of a sandbox."""

    path: Path
    process: subprocess.Popen[bytes]
    started: float
    identifier: str | None = None
    events: list[str] = field(default_factory=list)
    first_next: float | None = None
    inbox: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    errors: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Invocation:
    """What one invocation came to."""

    request_id: str
    status: str  # "ok", "error" (the handler raised), "timeout", "crash"
    payload: Any
    started: float
    ended: float
    #: For "timeout" and "crash": when the runtime was killed or found dead.
    stopped_at: float | None = None
    #: When every extension had exited after the SHUTDOWN event.
    shutdown_done: float | None = None


class _Sandbox:
    def __init__(self) -> None:
        self.extensions: dict[str, Extension] = {}
        self.by_pid: dict[int, Extension] = {}
        self.runtime: subprocess.Popen[bytes] | None = None
        self.runtime_ready = threading.Event()
        self.invocations: queue.Queue[tuple[str, bytes, float]] = queue.Queue()
        self.results: dict[str, tuple[str, Any]] = {}
        self.result_ready = threading.Condition()
        self.init_error: Any = None


class ControlPlane:
    """One function: its code, its layer directory, its environment and its timeout.

    ``environment`` is the function's environment (Region, credentials, endpoint,
    table); the plane adds ``AWS_LAMBDA_RUNTIME_API``, the extensions directory,
    the journal directory and the runtime's settings.
    """

    def __init__(
        self,
        *,
        task: Path,
        handler: str,
        layer: Path,
        environment: dict[str, str],
        timeout: float,
        journal: Path,
        logs: Path,
        max_concurrency: int | None = None,
        python: str | None = None,
        overrun: float = 30.0,
        shutdown_window_ms: int = SHUTDOWN_WINDOW_MS,
    ) -> None:
        if max_concurrency is not None and not (
            isinstance(max_concurrency, int) and max_concurrency >= 1
        ):
            raise ValueError(f"max_concurrency must be 1 or more workers, got {max_concurrency!r}")
        self.max_concurrency = max_concurrency
        #: The interpreter of the runtime and the extensions.
        self.python = python or sys.executable
        #: Managed Instances: how long past its timeout an invocation is waited for.
        self.overrun = overrun
        #: How long extensions have after SHUTDOWN (Lambda's 2,000 ms unless a test says).
        self.shutdown_window_ms = shutdown_window_ms
        self.task = task
        self.handler = handler
        self.layer = layer
        self.timeout = timeout
        self.journal = journal
        self.logs = logs
        self.sandboxes_started = 0
        self.extension_init: list[float] = []  # seconds from process start to first event/next
        self.extension_pids: list[int] = []
        self._sandbox: _Sandbox | None = None
        self._starting = threading.Lock()  # concurrent invocations start one sandbox
        self._closing = False
        self._server = ApiServer(self._answer)
        self.address = self._server.address
        python_path = os.pathsep.join([str(task), str(layer / "python")])
        self.environment = {
            **environment,
            "AWS_LAMBDA_RUNTIME_API": self.address,
            "DYNALEASE_EXTENSIONS_DIR": str(layer / "extensions"),
            "DYNALEASE_JOURNAL_DIR": str(journal),
            "DYNALEASE_EXTENSION_PYTHON": self.python,
            "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME,
            "AWS_LAMBDA_FUNCTION_VERSION": FUNCTION_VERSION,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(int(timeout)),
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "LAMBDA_TASK_ROOT": str(task),
            "_HANDLER": handler,
            "PYTHONPATH": python_path,
            "PYTHONUNBUFFERED": "1",
        }
        if max_concurrency is not None:
            self.environment["AWS_LAMBDA_MAX_CONCURRENCY"] = str(max_concurrency)
            self.environment["AWS_LAMBDA_INITIALIZATION_TYPE"] = MANAGED_INSTANCES
        logs.mkdir(parents=True, exist_ok=True)

    # --- sandboxes -------------------------------------------------------------

    def _log(self, name: str) -> Any:
        return open(self.logs / f"{self.sandboxes_started}-{name}.log", "ab")

    def _start_sandbox(self) -> _Sandbox:
        sandbox = _Sandbox()
        self._sandbox = sandbox
        self.sandboxes_started += 1
        directory = self.layer / "extensions"
        paths = sorted(directory.iterdir()) if directory.is_dir() else []
        for path in paths:
            if not (path.is_file() and os.access(path, os.X_OK)):
                continue
            with self._log(path.name) as log:
                process = subprocess.Popen(
                    [str(path)], env=self.environment, stdout=log, stderr=subprocess.STDOUT
                )
            extension = Extension(path, process, time.monotonic())
            sandbox.by_pid[process.pid] = extension
            self.extension_pids.append(process.pid)
        deadline = time.monotonic() + INIT_TIMEOUT_S
        for extension in sandbox.by_pid.values():
            while extension.first_next is None:
                if extension.process.poll() is not None:
                    raise RuntimeError(
                        f"extension {extension.path.name} exited during init "
                        f"({extension.process.returncode}); see {self.logs}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"extension {extension.path.name} did not finish init")
                time.sleep(0.005)
            self.extension_init.append(extension.first_next - extension.started)
        with self._log("runtime") as log:
            sandbox.runtime = subprocess.Popen(
                [self.python, "-m", "awslambdaric", self.handler],
                cwd=self.task,
                env=self.environment,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return sandbox

    def _shutdown(self, sandbox: _Sandbox, reason: str) -> float:
        """Send SHUTDOWN to the extensions that asked for it; when the last one exited."""
        deadline_ms = int(time.time() * 1000) + self.shutdown_window_ms
        deadline = time.monotonic() + self.shutdown_window_ms / 1000
        for extension in sandbox.extensions.values():
            if "SHUTDOWN" in extension.events:
                extension.inbox.put(
                    {"eventType": "SHUTDOWN", "shutdownReason": reason, "deadlineMs": deadline_ms}
                )
        for extension in sandbox.by_pid.values():
            try:
                extension.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                extension.process.kill()
                extension.process.wait()
        self._sandbox = None
        return time.monotonic()

    # --- invocations -----------------------------------------------------------

    def invoke(self, event: Any, *, timeout: float | None = None) -> Invocation:
        """Invoke the function with ``event``; a timeout or crash ends its sandbox.

        ``timeout`` overrides the function's timeout for this invocation.
        """
        limit = self.timeout if timeout is None else timeout
        with self._starting:
            sandbox = self._sandbox or self._start_sandbox()
        runtime = sandbox.runtime
        assert runtime is not None
        waited = time.monotonic() + INIT_TIMEOUT_S
        # The function's timeout counts from the invoke, after init (as in Lambda).
        while not sandbox.runtime_ready.wait(0.01):
            if runtime.poll() is not None or sandbox.init_error or time.monotonic() > waited:
                break
        request_id = str(uuid.uuid4())
        started = time.monotonic()
        deadline = started + limit
        if self.max_concurrency is not None:
            workers = set(child_pids(runtime.pid))
        sandbox.invocations.put((request_id, json.dumps(event).encode(), time.time() + limit))
        if self.max_concurrency is not None:
            return self._wait_unenforced(sandbox, request_id, started, deadline, workers)
        with sandbox.result_ready:
            while request_id not in sandbox.results:
                if sandbox.init_error is not None or runtime.poll() is not None:
                    stopped = time.monotonic()
                    runtime.wait()
                    done = self._shutdown(sandbox, "failure")
                    payload = sandbox.init_error
                    return Invocation(request_id, "crash", payload, started, stopped, stopped, done)
                left = deadline - time.monotonic()
                if left <= 0:
                    runtime.send_signal(signal.SIGKILL)
                    runtime.wait()
                    stopped = time.monotonic()
                    done = self._shutdown(sandbox, "timeout")
                    return Invocation(request_id, "timeout", None, started, stopped, stopped, done)
                sandbox.result_ready.wait(min(left, _POLL_S))
            status, payload = sandbox.results.pop(request_id)
        return Invocation(request_id, status, payload, started, time.monotonic())

    def _wait_unenforced(
        self, sandbox: _Sandbox, request_id: str, started: float, deadline: float, workers: set[int]
    ) -> Invocation:
        """Managed Instances: wait for the answer; a timeout is reported, not enforced."""
        runtime = sandbox.runtime
        assert runtime is not None
        with sandbox.result_ready:
            while request_id not in sandbox.results:
                now = time.monotonic()
                if runtime.poll() is not None:  # every worker is gone: the environment fails
                    runtime.wait()
                    done = self._shutdown(sandbox, "failure")
                    return Invocation(request_id, "crash", None, started, now, now, done)
                if workers - set(child_pids(runtime.pid)):
                    return Invocation(request_id, "crash", None, started, now, now)
                if now > deadline + self.overrun:
                    return Invocation(request_id, "timeout", None, started, now)
                sandbox.result_ready.wait(_POLL_S)
            status, payload = sandbox.results.pop(request_id)
        ended = time.monotonic()
        return Invocation(
            request_id, "timeout" if ended > deadline else status, payload, started, ended
        )

    def worker_pids(self) -> list[int]:
        """Managed Instances: the pids of the runtime's worker processes now."""
        runtime = self.runtime_process()
        return [] if runtime is None else child_pids(runtime.pid)

    def extension_processes(self) -> list[subprocess.Popen[bytes]]:
        """The extension processes of the current sandbox (none between sandboxes)."""
        sandbox = self._sandbox
        return [] if sandbox is None else [e.process for e in sandbox.by_pid.values()]

    def runtime_process(self) -> subprocess.Popen[bytes] | None:
        """The current sandbox's runtime process, if there is one."""
        sandbox = self._sandbox
        return None if sandbox is None else sandbox.runtime

    def close(self) -> None:
        """Spin the sandbox down (runtime stopped, SHUTDOWN ``spindown``) and stop serving."""
        if self._closing:
            return
        sandbox = self._sandbox
        if sandbox is not None and sandbox.runtime is not None:
            sandbox.runtime.send_signal(signal.SIGTERM)
            try:
                sandbox.runtime.wait(0.5)
            except subprocess.TimeoutExpired:
                sandbox.runtime.kill()
                sandbox.runtime.wait()
            self._shutdown(sandbox, "spindown")
        self._closing = True
        self._server.close()

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the HTTP handler calls --------------------------------------------

    def _answer(self, method: str, path: str, headers: Any, body: bytes) -> Answer:
        sandbox = self._sandbox
        if sandbox is None:
            return 403, {}, {"errorType": "SandboxGone", "errorMessage": "no sandbox"}
        if path == "/2020-01-01/extension/register" and method == "POST":
            return self._register(sandbox, headers, body)
        if path.startswith("/2020-01-01/extension/"):
            extension = sandbox.extensions.get(headers.get("Lambda-Extension-Identifier", ""))
            if extension is None:
                return 403, {}, {"errorType": "Extension.Unknown", "errorMessage": "bad id"}
            if path.endswith("/event/next") and method == "GET":
                if extension.first_next is None:
                    extension.first_next = time.monotonic()
                return 200, {}, self._wait(extension.inbox)
            if path.endswith("/init/error") or path.endswith("/exit/error"):
                kind = headers.get("Lambda-Extension-Function-Error-Type", "")
                extension.errors.append((path.rsplit("/", 2)[-2], kind))
                return 202, {}, {"status": "OK"}
        if path == "/2018-06-01/runtime/invocation/next" and method == "GET":
            sandbox.runtime_ready.set()
            request_id, event, deadline = self._wait(sandbox.invocations)
            return (
                200,
                {
                    "Lambda-Runtime-Aws-Request-Id": request_id,
                    "Lambda-Runtime-Deadline-Ms": str(int(deadline * 1000)),
                    "Lambda-Runtime-Invoked-Function-Arn": (
                        f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION_NAME}"
                    ),
                    "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000",
                },
                event,
            )
        if path == "/2018-06-01/runtime/init/error" and method == "POST":
            with sandbox.result_ready:
                sandbox.init_error = read_json(body)
                sandbox.result_ready.notify_all()
            return 202, {}, {"status": "OK"}
        if path.startswith("/2018-06-01/runtime/invocation/") and method == "POST":
            _, _, _, _, request_id, outcome = path.split("/")
            with sandbox.result_ready:
                status = "ok" if outcome == "response" else "error"
                sandbox.results[request_id] = (status, read_json(body))
                sandbox.result_ready.notify_all()
            return 202, {}, {"status": "OK"}
        return 404, {}, {"errorType": "NotFound", "errorMessage": path}

    def _register(self, sandbox: _Sandbox, headers: Any, body: bytes) -> Answer:
        name = headers.get("Lambda-Extension-Name", "")
        events = list(read_json(body).get("events", []))
        if self.max_concurrency is not None and "INVOKE" in events:
            return invoke_refused(name)
        match = [e for e in sandbox.by_pid.values() if e.path.name == name and e.identifier is None]
        if not match:
            return unknown_extension(name)
        extension = match[0]
        extension.identifier = str(uuid.uuid4())
        extension.events = events
        sandbox.extensions[extension.identifier] = extension
        return registered(extension.identifier, handler=self.handler)

    def _wait(self, inbox: queue.Queue[Any]) -> Any:
        while not self._closing:
            try:
                return inbox.get(timeout=0.2)
            except queue.Empty:
                continue
        raise ConnectionAbortedError("the plane is closing")
