"""The process runtime: one daemon thread running the event loop that owns lock I/O.

Renewal goes on while user code, or the user's event loop, is stuck. The loop
starts on first need (docs/architecture.md, "The runtime's loop starts on first
need"): ``asyncio`` comes with the loop's own module, :mod:`.loop`, which the
runtime's thread imports when the loop starts. After ``fork()``,
anything made before it refuses to work rather than hang: it compares
:data:`generation` (no system call, unlike ``os.getpid()``).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import ForkedProcessError

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

    from .loop import RunningLoop

T = TypeVar("T")

#: Threads for transports that block (botocore): bounds concurrency; no thread is held per lease.
BLOCKING_WORKERS = 32
#: Threads for one endpoint's lean requests (:meth:`Runtime.lane`), made as they are needed.
LANE_WORKERS = 32

#: A forked child's is its parent's plus one; what belongs to one process keeps its own.
generation = 0


class Runtime:
    """An event loop on a daemon thread and a pool for blocking work, each made on first need."""

    def __init__(self) -> None:
        self.generation = generation
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lanes: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self._running: RunningLoop | None = None  # the event loop, once started
        #: Guards the three above and below; the thread waits on it until the loop must start.
        self._starting = threading.Condition()
        self._start_by = math.inf  # monotonic: when the loop must run at the latest
        #: Callbacks waiting for the loop, in order, once each, with their ``needed_at``.
        self._at_start: dict[Callable[[], object], Callable[[], float]] = {}
        self.thread = threading.Thread(target=self._run, name="dynalease-runtime", daemon=True)
        self.thread.start()

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The bounded pool for blocking work (and the loop's default executor)."""
        with self._starting:
            if self._executor is None:
                self._executor = _pool(BLOCKING_WORKERS, "dynalease-io")
            return self._executor

    def lane(self, endpoint: str) -> concurrent.futures.ThreadPoolExecutor:
        """The pool for one endpoint's requests and late answers, made on first need.

        An endpoint that does not answer holds its own lane's threads only: the requests
        of a lock on another endpoint (its renewals) never wait behind them.
        """
        with self._starting:
            lane = self._lanes.get(endpoint)
            if lane is None:
                lane = self._lanes[endpoint] = _pool(LANE_WORKERS, f"dynalease-io {endpoint}")
            return lane

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The runtime's event loop, started now if it is not running yet."""
        return self._started().loop

    def _started(self) -> RunningLoop:
        running = self._running
        if running is None:
            with self._starting:
                self._start_by = -math.inf
                self._starting.notify_all()  # the runtime's thread, whoever else waits
                while self._running is None:
                    self._starting.wait()
                running = self._running
        return running

    @property
    def started(self) -> bool:
        """Whether the event loop has been started."""
        return self._running is not None

    def call_by(
        self, when: float, callback: Callable[[], object], needed_at: Callable[[], float]
    ) -> None:
        """Run ``callback`` on the loop soon, starting the loop by monotonic ``when`` at the latest.

        Before the loop runs, at ``when`` the runtime's thread asks ``needed_at()``:
        now or earlier starts the loop, later asks again then, ``math.inf`` drops the
        callback (with none left, the loop does not start). Any thread.
        """
        self.check()
        with self._starting:
            running = self._running
            if running is None:
                self._at_start[callback] = needed_at
                if when < self._start_by:
                    self._start_by = when
                    self._starting.notify_all()
                return
        running.loop.call_soon_threadsafe(callback)

    def _run(self) -> None:
        with self._starting:
            while not self._must_start():
                wait = self._start_by - time.monotonic()
                self._starting.wait(None if wait == math.inf else wait)
        from .loop import RunningLoop  # the loop starts: asyncio is loaded with it

        running = RunningLoop(self.executor)
        loop = running.loop
        with self._starting:
            self._running = running
            waiting, self._at_start = list(self._at_start), {}
            self._starting.notify_all()
        for callback in waiting:
            loop.call_soon(callback)
        loop.run_forever()

    def _must_start(self) -> bool:
        """Whether the loop must start now, else set when to look again (``_start_by``).

        Holds ``_starting``: ``needed_at`` (a validity check) must never call the runtime.
        """
        if self._start_by == -math.inf:
            return True  # asked for the loop itself
        now = time.monotonic()
        if self._start_by > now:
            return False
        try:
            needed = {callback: needed_at() for callback, needed_at in self._at_start.items()}
        except Exception:  # never leave the loop unstarted for that: starting it is always safe
            return True
        if any(at <= now for at in needed.values()):
            return True
        for callback, at in needed.items():
            if at == math.inf:  # what it was for has ended
                del self._at_start[callback]
        self._start_by = min(needed.values(), default=math.inf)
        return False

    def check(self) -> None:
        """Refuse use from a forked child."""
        if self.generation != generation:
            raise ForkedProcessError(
                "this dynalease client or guard was created in a parent process before fork(); "
                "create a new DynamoDBClient inside the child process (or use the "
                "multiprocessing 'spawn' start method)"
            )

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        self.check()
        return self._started().submit(coroutine)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the runtime and block this thread until it finishes."""
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError(
                "a blocking dynalease call was made on the dynalease runtime thread "
                "(from an on_lost callback?); use the async API there"
            )
        future = self.submit(coroutine)
        try:
            return future.result()
        except BaseException:
            # Interrupted (Ctrl-C): the coroutine cleans up on the runtime in the background.
            future.cancel()
            raise

    async def run_async(self, coroutine: Coroutine[Any, Any, T], *, shield: bool = False) -> T:
        """Await a runtime coroutine from any event loop; cancelling the caller cancels it
        unless ``shield`` (a release must still free its lock)."""
        self.check()
        return await self._started().run_async(coroutine, shield)

    def call_soon(self, callback: Callable[[], object]) -> None:
        self.check()
        self.loop.call_soon_threadsafe(callback)


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    """The process's runtime, started on first use."""
    global _runtime
    runtime = _runtime
    if runtime is not None and runtime.generation == generation:
        return runtime
    with _lock:
        if _runtime is None or _runtime.generation != generation:
            _runtime = Runtime()
        return _runtime


def _pool(workers: int, name: str) -> concurrent.futures.ThreadPoolExecutor:
    """A thread pool, made on first need: a late answer to read, or the loop's start."""
    import concurrent.futures  # not with the runtime: a short sync hold needs no pool

    return concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)


def _after_fork_in_child() -> None:
    global _lock, generation
    _lock = threading.Lock()
    generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)
