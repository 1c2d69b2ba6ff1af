"""``dynalease run -- CMD``: real processes against the moto server (and a fault proxy).

Each test starts ``dynalease run`` as its own interpreter; the commands it runs
are small shell or Python programs that write what they saw to files the test
reads.
"""

from __future__ import annotations

import contextlib
import os
import pty
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli_runner import CLI, cli_env, spawn_cli
from support.fault_proxy import FaultProxy, is_takeover

from dynalease import DynamoDBClient
from dynalease.cli.run import EXIT_LEASE_LOST, EXIT_NOT_ACQUIRED

#: Generous: two cores shared by several test runs.
BOUND_S = 30.0


def run_args(endpoint: str, table: str, *options: str) -> list[str]:
    return ["run", "--endpoint", endpoint, "--table", table, "--key", "job", *options]


def start(endpoint: str, table: str, *options: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.Popen(
        [*CLI, *run_args(endpoint, table, *options)],
        env=cli_env() if env is None else env,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_file(path: Path, timeout: float = BOUND_S) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    pytest.fail(f"{path.name} was not written within {timeout:g} s")


def row(client: DynamoDBClient, table: str, key: str = "job") -> dict[str, object] | None:
    return client.sync_get_item(table, {"key": key}, consistent_read=True)


def test_the_exit_status_is_the_commands_and_the_command_sees_the_lock(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    seen = tmp_path / "env"
    script = f'echo "$DYNALEASE_TABLE $DYNALEASE_KEY $DYNALEASE_OWNER" > {seen}; exit 7'
    result = spawn_cli(*run_args(endpoint, lock_table), "--", "sh", "-c", script)
    assert result.code == 7, result.err
    table, key, owner = seen.read_text().split()
    assert (table, key, len(owner)) == (lock_table, "job", 36)
    assert row(client, lock_table) is None  # released after the command exited

    killed = spawn_cli(*run_args(endpoint, lock_table), "--", "sh", "-c", "kill -KILL $$")
    assert killed.code == 128 + signal.SIGKILL
    assert spawn_cli(*run_args(endpoint, lock_table), "--", "true").code == 0
    missing = spawn_cli(*run_args(endpoint, lock_table), "--", "no-such-command-here")
    assert missing.code == 127 and "command not found" in missing.err


def test_several_keys_are_held_at_once_and_the_command_sees_them_all(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    seen = tmp_path / "env"
    script = f'printf "%s\\n" "$DYNALEASE_KEYS" > {seen}'
    base = ["run", "--endpoint", endpoint, "--table", lock_table]
    holding = subprocess.Popen(
        [
            *CLI,
            *base,
            "--key",
            "account:A",
            "--key",
            "account:B",
            "--",
            "sh",
            "-c",
            f"{script}; sleep 30",
        ],
        env=cli_env(),
    )
    try:
        assert wait_for_file(seen).split() == ["account:A", "account:B"]
        owner = row(client, lock_table, "account:A")["owner"]  # type: ignore[index]
        assert row(client, lock_table, "account:B")["owner"] == owner  # type: ignore[index]
        refused = spawn_cli(*base, "--key", "account:B", "--wait", "0", "--", "true")
        assert refused.code == EXIT_NOT_ACQUIRED, refused.err
    finally:
        holding.terminate()
        holding.wait(BOUND_S)
    assert (
        row(client, lock_table, "account:A") is None
        and row(client, lock_table, "account:B") is None
    )


def test_fencing_hands_the_command_a_token_that_grows_with_each_owner(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    tokens = []
    for attempt in range(2):
        seen = tmp_path / f"token-{attempt}"
        script = f'echo "$DYNALEASE_FENCING_TOKEN" > {seen}'
        result = spawn_cli(*run_args(endpoint, lock_table, "--fencing"), "--", "sh", "-c", script)
        assert result.code == 0, result.err
        tokens.append(int(seen.read_text()))
    assert tokens[1] > tokens[0] >= 1
    # Released as a fenced lock: a free row that keeps its counter.
    assert row(client, lock_table) == {"key": "job", "protocol": 2, "fence": tokens[1]}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--table", "{table}", "--key", "k", "true"], "missing `--`"),
        (["--table", "{table}", "--key", "k", "--lease", "soon", "--", "true"], "--lease"),
        (["--table", "{table}", "--key", "k", "--wait", "-1", "--", "true"], "--wait"),
        (["--table", "{table}", "--key", "k", "--permits", "0", "--", "true"], "--permits"),
        (["--table", "no-such-table", "--key", "k", "--", "true"], "does not exist"),
        (["--table", "{table}", "--", "true"], "--key is required"),
        (
            ["--table", "{table}", "--key", "k", "--fencing", "--permits", "2", "--", "true"],
            "--fencing is for locks",
        ),
        (["--table", "{table}", "--key", "dynalease-permit:1:k", "--", "true"], "reserved"),
        (
            ["--table", "{table}", "--key", "k", "--lease", "6", "--kill-after", "3", "--", "true"],
            "--kill-after 3 does not fit in a 6 s lease",
        ),
        (
            ["--table", "{table}", "--key", "k", "--kill-after", "11", "--", "true"],
            "use --kill-after 10",
        ),
        (["--table", "{table}", "--key", "a", "--key", "a", "--", "true"], "given twice"),
        (["--table", "{table}", "--key", "a\nb", "--", "true"], "holds a line break"),
        (["--table", "{table}", "--key", "a", "--key", "b\u2028c", "--", "true"], "line break"),
        (["--table", "{table}", "--key", "k", "--wait", "nan", "--", "true"], "--wait"),
        (
            ["--table", "{table}", "--key", "a", "--key", "b", "--permits", "2", "--", "true"],
            "--permits takes one key",
        ),
        (
            ["--table", "{table}", *[f"--key={i}" for i in range(101)], "--", "true"],
            "over the limit of 100 keys",
        ),
    ],
)
def test_bad_input_is_one_error_and_exit_2_before_anything_runs(
    endpoint: str, lock_table: str, tmp_path: Path, arguments: list[str], message: str
) -> None:
    marker = tmp_path / "ran"
    arguments = [a.replace("{table}", lock_table) for a in arguments]
    if arguments[-1] == "true":
        arguments[-1:] = ["sh", "-c", f"touch {marker}"]
    result = spawn_cli("run", "--endpoint", endpoint, *arguments)
    assert result.code == 2, result.err
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert result.err.startswith("dynalease run: error:")
    assert not marker.exists()


def test_the_environment_configures_run_and_flags_win(
    endpoint: str, lock_table: str, tmp_path: Path
) -> None:
    seen = tmp_path / "key"
    env = cli_env(DYNALEASE_TABLE=lock_table, DYNALEASE_KEY="from-env", DYNALEASE_LEASE="5")
    script = f'echo "$DYNALEASE_KEY" > {seen}'
    plain = subprocess.run(
        [*CLI, "run", "--endpoint", endpoint, "--", "sh", "-c", script], env=env, timeout=60
    )
    assert plain.returncode == 0 and seen.read_text().strip() == "from-env"
    flagged = subprocess.run(
        [*CLI, "run", "--endpoint", endpoint, "--key", "flag", "--", "sh", "-c", script],
        env=env,
        timeout=60,
    )
    assert flagged.returncode == 0 and seen.read_text().strip() == "flag"
    bad = subprocess.run(
        [*CLI, "run", "--endpoint", endpoint, "--", "true"],
        env={**env, "DYNALEASE_WAIT": "later"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "DYNALEASE_WAIT='later'" in bad.stderr
    too_long = subprocess.run(
        [*CLI, "run", "--endpoint", endpoint, "--", "true"],
        env={**env, "DYNALEASE_KILL_AFTER": "2"},  # DYNALEASE_LEASE=5 above
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert too_long.returncode == 2
    assert "DYNALEASE_KILL_AFTER=2 does not fit in a 5 s lease" in too_long.stderr


def test_a_second_run_gives_up_with_75_or_waits_for_the_first(
    endpoint: str, lock_table: str, tmp_path: Path
) -> None:
    started, finished, second = tmp_path / "started", tmp_path / "finished", tmp_path / "second"
    script = f"echo go > {started}; sleep 2; echo done > {finished}"
    first = start(endpoint, lock_table, "--", "sh", "-c", script)
    try:
        wait_for_file(started)
        gave_up = spawn_cli(*run_args(endpoint, lock_table), "--", "true")
        assert gave_up.code == EXIT_NOT_ACQUIRED, gave_up.err
        assert "was not acquired" in gave_up.err
        # 0 however written is one attempt (0.00 was refused as "not in (0, 86400]").
        once = spawn_cli(*run_args(endpoint, lock_table, "--wait", "0.00"), "--", "true")
        assert once.code == EXIT_NOT_ACQUIRED, once.err
        assert "--wait 0 makes one attempt" in once.err
        check = f"test -f {finished} && echo after > {second}"  # did the first one finish?
        waited = spawn_cli(
            *run_args(endpoint, lock_table, "--wait", str(BOUND_S)), "--", "sh", "-c", check
        )
        assert waited.code == 0, waited.err
        assert second.read_text().strip() == "after"  # it ran only once the first had ended
        assert first.wait(BOUND_S) == 0
    finally:
        first.kill()
        first.wait()


def test_permits_let_n_runs_hold_at_once(endpoint: str, lock_table: str, tmp_path: Path) -> None:
    holders = []
    try:
        for index in range(2):
            flag = tmp_path / f"holder-{index}"
            holders.append(
                start(
                    endpoint,
                    lock_table,
                    "--permits",
                    "2",
                    "--",
                    "sh",
                    "-c",
                    f'echo "$DYNALEASE_PERMIT_KEY" > {flag}; sleep 30',
                )
            )
            wait_for_file(flag)
        permits = {(tmp_path / f"holder-{i}").read_text().strip() for i in range(2)}
        assert permits == {"dynalease-permit:1:job", "dynalease-permit:2:job"}
        third = spawn_cli(*run_args(endpoint, lock_table, "--permits", "2"), "--", "true")
        assert third.code == EXIT_NOT_ACQUIRED
    finally:
        for holder in holders:
            holder.send_signal(signal.SIGTERM)
            holder.wait(BOUND_S)
    assert [holder.returncode for holder in holders] == [128 + signal.SIGTERM] * 2


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_to_run_are_forwarded_and_the_lock_is_released_after_the_child_exits(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path, signum: int
) -> None:
    ready, log = tmp_path / "ready", tmp_path / "log"
    child = (  # on the signal, checks that its lock row is still held, then exits 9
        "import os, signal, sys, time\n"
        "from dynalease import DynamoDBClient\n"
        f"client = DynamoDBClient(region='us-east-1', endpoint_url={endpoint!r})\n"
        "def stop(signum, frame):\n"
        "    time.sleep(0.5)\n"
        f"    held = client.sync_get_item({lock_table!r}, {{'key': 'job'}}, consistent_read=True)\n"
        "    mine = held is not None and held['owner'] == os.environ['DYNALEASE_OWNER']\n"
        f"    open({str(log)!r}, 'w').write(f'got {{signum}}, held {{mine}}')\n"
        "    sys.exit(9)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        f"open({str(ready)!r}, 'w').write('ready')\n"
        "time.sleep(60)\n"
    )
    runner = start(endpoint, lock_table, "--", sys.executable, "-c", child)
    wait_for_file(ready)
    assert row(client, lock_table) is not None
    runner.send_signal(signum)
    assert runner.wait(BOUND_S) == 9  # the child's own status
    assert log.read_text() == f"got {int(signum)}, held True"  # still held while it stopped
    assert row(client, lock_table) is None


def test_a_command_outliving_a_partitioned_lease_is_terminated(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    ready, log = tmp_path / "ready", tmp_path / "log"
    stubborn = (  # ignores SIGTERM: only the SIGKILL after --kill-after ends it
        "import signal, time\n"
        f"signal.signal(signal.SIGTERM, lambda s, f: open({str(log)!r}, 'a').write('TERM '))\n"
        f"open({str(ready)!r}, 'w').write('ready')\n"
        "time.sleep(120)\n"
    )
    with FaultProxy(endpoint) as proxy:
        options = ("--lease", "3", "--kill-after", "1")
        runner = start(proxy.url, lock_table, *options, "--", sys.executable, "-c", stubborn)
        wait_for_file(ready)
        began = time.monotonic()
        proxy.partition()  # renewals never arrive: the lease runs out
        status = runner.wait(BOUND_S)
        took = time.monotonic() - began
        assert runner.stderr is not None
        err = runner.stderr.read()
    assert status == EXIT_LEASE_LOST, err
    assert "the lease on 'job' ends in" in err
    assert log.read_text().strip() == "TERM"  # SIGTERM first, then SIGKILL
    assert took < BOUND_S


def test_a_sigkilled_run_is_recovered_by_observation_and_its_command_dies_with_it(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    runner = start(
        endpoint,
        lock_table,
        "--lease",
        "2",
        "--",
        "sh",
        "-c",
        f"echo $$ > {ready}; exec sleep 60",
    )
    child_pid = int(wait_for_file(ready).strip())
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(BOUND_S)
    killed_at = time.monotonic()
    after = spawn_cli(
        *run_args(endpoint, lock_table, "--lease", "2", "--wait", str(BOUND_S)), "--", "true"
    )
    assert after.code == 0, after.err
    assert time.monotonic() - killed_at >= 2 / 3  # taken over only after observation
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:  # the orphaned command got SIGKILL (PR_SET_PDEATHSIG)
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the command of the killed run is still running")


def test_an_outage_is_exit_1_not_contention(lock_table: str, endpoint: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with FaultProxy(endpoint) as proxy:
        proxy.partition(["PutItem", "GetItem", "BatchGetItem"])  # the table is still described
        result = spawn_cli(
            *run_args(proxy.url, lock_table, "--wait", "1", "--lease", "3"),
            "--",
            "sh",
            "-c",
            f"touch {marker}",
        )
    assert result.code == 1, result.err
    assert "outage, not contention" in result.err
    assert not marker.exists()


def living_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not ended (zombies count as ended)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def wait_until_group_ends(pgid: int, timeout: float = BOUND_S) -> list[int]:
    """Wait (bounded) until no process of ``pgid`` is left; what is left at the bound."""
    deadline = time.monotonic() + timeout
    while living_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return living_members(pgid)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_sigkilled_run_takes_the_commands_whole_process_group_with_it(
    endpoint: str, lock_table: str, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    # The shell's own children are what PR_SET_PDEATHSIG alone leaves running.
    script = f"sleep 60 & sleep 60 & echo $$ > {ready}; wait"
    runner = start(endpoint, lock_table, "--lease", "3", "--", "sh", "-c", script)
    pgid = int(wait_for_file(ready).strip())
    try:
        assert len(living_members(pgid)) == 3  # sh and its two sleeps
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(BOUND_S)
        assert wait_until_group_ends(pgid, timeout=10.0) == []
    finally:
        kill_group(pgid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_what_the_command_leaves_running_ends_before_the_lock_is_released(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    ready, late = tmp_path / "ready", tmp_path / "late"
    script = f"(sleep 2; echo without the lock > {late}) & echo $$ > {ready}; exit 3"
    result = spawn_cli(*run_args(endpoint, lock_table), "--", "sh", "-c", script)
    pgid = int(ready.read_text().strip())
    try:
        assert result.code == 3, result.err  # the command's own status
        assert "ending what it left running" in result.err
        assert living_members(pgid) == []
        assert row(client, lock_table) is None
        time.sleep(2.5)
        assert not late.exists()
    finally:
        kill_group(pgid)


def test_a_stale_token_or_permit_in_runs_environment_never_reaches_the_command(
    endpoint: str, lock_table: str, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    script = f'echo "token=$DYNALEASE_FENCING_TOKEN permit=$DYNALEASE_PERMIT_KEY" > {seen}'
    stale = cli_env(DYNALEASE_FENCING_TOKEN="999", DYNALEASE_PERMIT_KEY="dynalease-permit:1:x")
    plain = subprocess.run(
        [*CLI, *run_args(endpoint, lock_table), "--", "sh", "-c", script], env=stale, timeout=60
    )
    assert plain.returncode == 0
    assert seen.read_text().strip() == "token= permit="
    fenced = subprocess.run(
        [*CLI, *run_args(endpoint, lock_table, "--fencing"), "--", "sh", "-c", script],
        env=stale,
        timeout=60,
    )
    assert fenced.returncode == 0
    assert seen.read_text().strip() == "token=1 permit="


#: Appends time.monotonic() to argv[1] every 20 ms; on SIGTERM it either goes on for
#: 10 s more ("finishing its batch") or ignores the signal.
WRITER = """\
import signal, sys, time
log = open(sys.argv[1], "a", buffering=1)
if sys.argv[2] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    def finish(signum, frame):
        end = time.monotonic() + 10
        while time.monotonic() < end:
            log.write(f"{time.monotonic()!r}\\n")
            time.sleep(0.02)
        sys.exit(0)
    signal.signal(signal.SIGTERM, finish)
while True:
    log.write(f"{time.monotonic()!r}\\n")
    time.sleep(0.02)
"""


@pytest.mark.parametrize("on_sigterm", ["finish-the-batch", "ignore"])
def test_after_a_partition_the_command_is_dead_before_the_next_holder_acquires(
    endpoint: str, lock_table: str, tmp_path: Path, on_sigterm: str
) -> None:
    log, started = tmp_path / "a.log", tmp_path / "b-started"
    # The writer is the child of a shell that waits for it (it ignores SIGTERM itself).
    shell = f'trap "" TERM; {shlex.quote(sys.executable)} -c "$0" "$1" "$2"; true'
    command = ["sh", "-c", shell, WRITER, str(log), on_sigterm]
    with FaultProxy(endpoint) as a_path, FaultProxy(endpoint) as b_path:
        holder = start(a_path.url, lock_table, "--lease", "4", "--", *command)
        wait_for_file(log)
        a_path.partition()  # A's renewals never arrive from here on
        contender = start(
            b_path.url,
            lock_table,
            "--lease",
            "4",
            "--wait",
            str(BOUND_S),
            "--",
            sys.executable,
            "-c",
            f"import time; open({str(started)!r}, 'w').write(repr(time.monotonic()))",
        )
        try:
            assert holder.wait(BOUND_S) == EXIT_LEASE_LOST
            assert contender.wait(BOUND_S) == 0
        finally:
            for runner in (holder, contender):
                runner.kill()
                runner.wait()
        takeovers = [
            seen.at
            for seen in b_path.seen("PutItem")
            if is_takeover(seen.body) and seen.status == 200
        ]
        assert holder.stderr is not None
        err = holder.stderr.read()
    last_activity = max(float(line) for line in log.read_text().split())
    acquired = min(takeovers)  # when B's winning write reached its proxy, before it applied
    assert last_activity < acquired <= float(started.read_text()), err
    assert "renewals are failing" in err and "before another owner can take it" in err


#: Makes argv[1] (a pseudo-terminal) the controlling terminal of a new session, as a
#: login shell's, then runs the rest of argv with Python in the foreground there, with
#: SIGINT at its default as a terminal's foreground job has it (a suite started in the
#: background of a non-interactive shell inherits SIGINT ignored, and so would sh).
ON_A_TERMINAL = """\
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
terminal = os.open(sys.argv[1], os.O_RDWR)
for descriptor in (0, 1, 2):
    os.dup2(terminal, descriptor)
os.close(terminal)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def finished(runner: Any) -> int:
    """``runner``'s exit status; at the bound, a failure that shows its processes."""
    try:
        return int(runner.wait(BOUND_S))
    except subprocess.TimeoutExpired:
        processes = subprocess.run(
            ["ps", "-s", str(runner.pid), "-o", "pid,ppid,pgid,tpgid,stat,wchan:24,args"],
            capture_output=True,
            text=True,
        ).stdout
        pytest.fail(f"run did not end within {BOUND_S:g} s:\n{processes}")


class Terminal:
    """A pseudo-terminal whose output is read (and kept) by a thread."""

    def __init__(self) -> None:
        self.master, self._slave = pty.openpty()
        self.output = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.master, 4096):
                self.output += chunk

    def run(self, endpoint: str, table: str, script: str) -> Any:
        """``dynalease run ... -- sh -c SCRIPT`` in the foreground of this terminal."""
        return subprocess.Popen(
            [
                *(sys.executable, "-c", ON_A_TERMINAL, os.ttyname(self._slave), *CLI[1:]),
                *(*run_args(endpoint, table, "--lease", "3"), "--", "sh", "-c", script),
            ],
            env=cli_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def close(self) -> None:
        os.close(self._slave)
        os.close(self.master)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux pseudo-terminal")
def test_on_a_terminal_the_command_reads_it_and_ctrl_c_or_ctrl_z_ends_it(
    endpoint: str, lock_table: str, client: DynamoDBClient, tmp_path: Path
) -> None:
    got, ready = tmp_path / "got", tmp_path / "ready"
    terminal = Terminal()
    runners: list[Any] = []
    try:
        reader = terminal.run(endpoint, lock_table, f'read x; echo "$x" > {got}')
        runners.append(reader)
        os.write(terminal.master, b"typed\n")
        assert wait_for_file(got).strip() == "typed"  # not stopped by SIGTTIN
        assert finished(reader) == 0

        interrupted = terminal.run(endpoint, lock_table, f"echo $$ > {ready}; read x")
        runners.append(interrupted)
        wait_for_file(ready)
        os.write(terminal.master, b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground
        assert finished(interrupted) == 128 + signal.SIGINT

        ready.unlink()
        suspended = terminal.run(endpoint, lock_table, f"echo $$ > {ready}; sleep 60")
        runners.append(suspended)
        wait_for_file(ready)
        os.write(terminal.master, b"\x1a")  # Ctrl-Z: the command stops, run ends it
        assert finished(suspended) == 128 + signal.SIGTERM
        assert b"the command was stopped by" in terminal.output
        assert row(client, lock_table) is None
    finally:
        for runner in runners:
            runner.kill()
            runner.wait()
        terminal.close()


def test_the_row_names_the_command_by_its_program_never_its_arguments(
    endpoint: str, lock_table: str, client: DynamoDBClient
) -> None:
    process = start(endpoint, lock_table, "--", "sleep", "17.5")
    try:
        deadline = time.monotonic() + BOUND_S
        while (item := row(client, lock_table)) is None:
            assert time.monotonic() < deadline, "run did not acquire"
            time.sleep(0.05)
        holder: Any = item["holder"]
        assert holder["command"] == "sleep" and "17.5" not in str(holder)
        assert holder["pid"] == process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(BOUND_S)
