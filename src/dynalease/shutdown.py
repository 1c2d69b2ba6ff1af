"""Release held locks when a container is stopped: SIGTERM unwinds them (opt-in).

ECS, Fargate and Kubernetes stop a task with ``SIGTERM`` and kill it a grace period
later (30 s by default on ECS and Kubernetes). Python's default for ``SIGTERM`` ends
the process at once, so a lock it held stays in the table until a contender has
watched the row for a whole lease. After `release_locks_on_sigterm`,
``SIGTERM``:

- cancels every asyncio task that holds a `DistributedLock`
  (``async with`` or a decorated ``async def``), so ``CancelledError`` unwinds it;
- raises `Terminated` in the main thread when it holds a
  `SyncDistributedLock` (``with`` or a decorated ``def``), so
  the ``with`` block exits;
- calls the handler that was installed before, if it was a Python function;
- once every lock it unwound is released, ends the process with ``SIGTERM`` as the
  default would have (unless the earlier handler was your own or ``SIG_IGN``, which
  then decides).

Locks held by other threads are not unwound (Python can only interrupt the main
thread): their work is not stopped, so releasing their rows would be unsafe. With no
lock held, ``SIGTERM`` does exactly what it did before. A ``SIGTERM`` that arrives
while a lock is still being acquired is not caught here either.

For example:

    from dynalease.shutdown import release_locks_on_sigterm

    release_locks_on_sigterm()  # once, from the main thread, at start-up
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["Terminated", "release_locks_on_sigterm"]

Handler = Any  # what signal.getsignal returns: a callable, SIG_DFL, SIG_IGN or None


class Terminated(SystemExit):
    """Raised in the main thread by ``SIGTERM`` to unwind its held locks.

    A `SystemExit` (exit status 143, as shells report ``SIGTERM``), so
    ``except Exception`` in the locked code does not swallow it and, uncaught, it
    ends the program quietly.
    """

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


class _Holders:
    """The held guards, and what ``SIGTERM`` does with them.

    Plain dict operations only (atomic under the GIL): the signal handler runs
    between two bytecodes of the main thread, which may be in the middle of
    `hold` or `drop`, so a lock here could deadlock.
    """

    def __init__(self, previous: Handler) -> None:
        self.previous = previous
        self.held: dict[int, tuple[int, asyncio.Task[Any] | None]] = {}
        self.unwinding: dict[int, None] = {}
        self.terminating = False
        self.default_now = False

    def hold(self, token: int, task: asyncio.Task[Any] | None) -> None:
        self.held[token] = (threading.get_ident(), task)

    def drop(self, token: int) -> None:
        self.held.pop(token, None)
        if token in self.unwinding:
            del self.unwinding[token]
            if not self.unwinding:  # the last lock SIGTERM unwound is released
                self.finish()

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self.default_now:
            self.die()
        if self.terminating:
            return  # a second SIGTERM must not interrupt the releases under way
        self.terminating = True
        main = threading.main_thread().ident
        tasks: list[asyncio.Task[Any]] = []
        in_main = False
        for token, (thread, task) in list(self.held.items()):
            if task is not None and not task.done():
                tasks.append(task)
                self.unwinding[token] = None
            elif task is None and thread == main:
                in_main = True
                self.unwinding[token] = None
        for task in tasks:
            task.get_loop().call_soon_threadsafe(task.cancel)
        if callable(self.previous):
            self.previous(signum, frame)
        if not self.unwinding:
            self.finish()
        elif in_main and not tasks:
            raise Terminated()

    def finish(self) -> None:
        """What the earlier disposition would have done, now that our locks are released."""
        if self.previous in (signal.SIG_DFL, None):
            if threading.current_thread() is threading.main_thread():
                self.die()
            self.default_now = True  # the handler, run in the main thread, dies
            os.kill(os.getpid(), signal.SIGTERM)

    @staticmethod
    def die() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


_holders: _Holders | None = None


def release_locks_on_sigterm() -> None:
    """Make ``SIGTERM`` unwind the locks this process holds before it ends.

    Call it once, from the main thread, after installing any ``SIGTERM`` handler of
    your own (that handler still runs, first). A second call changes nothing. See
    the module's documentation for what is unwound and what is not.

    Raises:
        RuntimeError: when called from a thread other than the main thread, where
            Python cannot install signal handlers.
    """
    global _holders
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "release_locks_on_sigterm() must be called from the main thread, where "
            "Python installs signal handlers; call it at start-up, before starting threads"
        )
    if _holders is not None:
        return
    holders = _Holders(signal.getsignal(signal.SIGTERM))
    signal.signal(signal.SIGTERM, holders.on_sigterm)
    _holders = holders


def hold(guard: object, task: asyncio.Task[Any] | None) -> None:
    """Note a guard that now holds its lock (no-op unless the handler is installed)."""
    if _holders is not None:
        _holders.hold(id(guard), task)


def drop(guard: object) -> None:
    """Note a guard whose lock is released (no-op unless the handler is installed)."""
    if _holders is not None:
        _holders.drop(id(guard))
