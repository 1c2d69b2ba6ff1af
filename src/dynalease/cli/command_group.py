"""The process group of ``dynalease run``'s command: started, watched, and ended with ``run``.

- The command runs in a process group of its own, started through a small
  launcher that execs it only once everything below is in place (so no part of
  the command runs unguarded, even for a moment).
- A watchdog process in a session of its own holds a pipe from ``run``. When
  ``run`` ends in any way, SIGKILL included, the pipe reaches end of file and the
  watchdog SIGKILLs the whole group, the command's own children with it; a
  ``run`` that ends normally first tells the watchdog it is done.
- ``run`` is a child subreaper (Linux): members of the group whose parent died
  come to ``run``, which reaps them, so "the group is gone" is a fact ``run``
  can see.
- When ``run`` is the foreground job of a terminal, the group gets the terminal
  (``tcsetpgrp``) while the command runs: a command that reads the terminal is
  not stopped by SIGTTIN, and Ctrl-C reaches it. A stop of the command (SIGTTIN,
  SIGTSTP ...) is reported by :meth:`CommandGroup.poll`: the leader's from
  ``waitid``, and, on a terminal, any member's from ``/proc`` (a shell blocked in
  ``vfork`` behind a stopped child never stops itself).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

__all__ = ["CommandGroup"]

#: Execs the command once ``run`` writes to the pipe (argv: run's pid, the pipe's fd,
#: the command). Dies with ``run`` (PR_SET_PDEATHSIG) and never execs if ``run`` died.
_LAUNCHER = """\
import os, signal, sys
parent, go, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != parent or os.read(go, 1) != b"g":
    os._exit(125)
os.close(go)
for signum in (signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(signum, signal.SIG_DFL)
try:
    os.execvp(command[0], command)
except FileNotFoundError:
    print(f"dynalease run: {command[0]}: command not found", file=sys.stderr)
    os._exit(127)
except OSError as error:
    print(f"dynalease run: {command[0]}: {error.strerror or 'cannot run it'}", file=sys.stderr)
    os._exit(126)
"""

#: SIGKILLs the group (argv[1]) when its stdin, a pipe from ``run``, ends without a word.
_WATCHDOG = """\
import os, signal, sys
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP):
    signal.signal(signum, signal.SIG_IGN)
if not os.read(0, 1):
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except OSError:
        pass
"""

_PR_SET_CHILD_SUBREAPER = 36
#: How often the group's members are looked at for a stop (on a terminal, Linux).
_STOP_SCAN_S = 0.5


class CommandGroup:
    """The running command's process group (its leader is the command's process)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        """Start ``command`` with ``env`` in a new process group guarded by a watchdog."""
        _become_subreaper()
        go_read, go_write = os.pipe()
        watch_read, watch_write = os.pipe()
        python = [sys.executable, "-I", "-S", "-c"]
        leader: subprocess.Popen[bytes] | None = None
        try:
            leader = subprocess.Popen(
                [*python, _LAUNCHER, str(os.getpid()), str(go_read), *command],
                env=env,
                process_group=0,
                pass_fds=(go_read,),
            )
            self._watchdog = subprocess.Popen(
                [*python, _WATCHDOG, str(leader.pid)], stdin=watch_read, start_new_session=True
            )
        except BaseException:
            os.close(go_write)  # the launcher reads end of file and never runs the command
            os.close(watch_write)
            if leader is not None:
                leader.wait()
            raise
        finally:
            os.close(go_read)
            os.close(watch_read)
        self._leader = leader
        self.pgid = leader.pid
        self._watch = watch_write
        #: The command's exit status (128+N for a signal N) once it has been reaped.
        self.status: int | None = None
        #: The signal that stopped the command (0: one of its processes, by a stop
        #: signal), once one did.
        self.stopped_by: int | None = None
        self._terminal = _foreground_terminal()
        self._scan_stops = sys.platform.startswith("linux") and any(map(os.isatty, (0, 1, 2)))
        self._scanned_at = time.monotonic()
        if self._terminal is not None:
            _hand_terminal(self._terminal, self.pgid)
        os.write(go_write, b"g")
        os.close(go_write)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every process of the group (nothing once it is gone)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def poll(self) -> None:
        """Reap what of the group has ended (our children), note the command's status or stop."""
        self._reap()
        now = time.monotonic()
        if self._scan_stops and self.stopped_by is None and now - self._scanned_at >= _STOP_SCAN_S:
            self._scanned_at = now
            if _stopped_member(self.pgid):
                self.stopped_by = 0

    def _reap(self) -> None:
        while True:
            try:
                found = os.waitid(os.P_PGID, self.pgid, os.WEXITED | os.WSTOPPED | os.WNOHANG)
            except ChildProcessError:
                return
            if found is None:
                return
            if found.si_pid != self.pgid:
                continue  # an orphan of the group, adopted by us (subreaper): reaped
            if found.si_code == os.CLD_STOPPED:
                self.stopped_by = found.si_status
            elif found.si_code == os.CLD_EXITED:
                self.status = found.si_status
                self._leader.returncode = found.si_status
            elif found.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                self.status = 128 + found.si_status
                self._leader.returncode = -found.si_status

    @property
    def gone(self) -> bool:
        """Whether the command has exited and no process of its group is left."""
        if self.status is None:
            return False
        try:
            os.killpg(self.pgid, 0)
        except (ProcessLookupError, PermissionError):
            # PermissionError: what is left is not ours to signal (a set-user-ID program)
            return True
        return False

    def close(self) -> None:
        """SIGKILL and reap what is left, take the terminal back, dismiss the watchdog."""
        if not self.gone:
            self.signal(signal.SIGKILL)
            while not self.gone:
                self.poll()
                time.sleep(0.01)
        if self._terminal is not None:
            _hand_terminal(self._terminal, os.getpgrp())
        with contextlib.suppress(OSError):
            os.write(self._watch, b"d")  # a normal end: the watchdog leaves the group alone
        os.close(self._watch)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._watchdog.wait(5.0)


def _become_subreaper() -> None:
    """Orphans of the command's processes come to us (Linux), to be reaped by :meth:`poll`."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stopped_member(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is stopped (Linux: its ``/proc`` state is T)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
            except OSError:
                continue  # ended meanwhile
            if len(fields) > 2 and fields[0] == b"T" and int(fields[2]) == pgid:
                return True
    return False


def _foreground_terminal() -> int | None:
    """Our terminal's descriptor when we are its foreground job, else None."""
    for descriptor in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(descriptor) and os.tcgetpgrp(descriptor) == os.getpgrp():
                return descriptor
    return None


def _hand_terminal(descriptor: int, pgid: int) -> None:
    """Make ``pgid`` the terminal's foreground group (SIGTTOU blocked: we may be in the back)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(descriptor, pgid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
