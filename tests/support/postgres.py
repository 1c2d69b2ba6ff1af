"""A private PostgreSQL cluster for the tests: initdb and pg_ctl in a temporary folder.

It listens on a unix socket in that folder only (no TCP port to collide on),
trusts local connections, and is stopped and removed at the end. PostgreSQL
refuses to run as root, so as root the cluster belongs to ``nobody`` (via
``runuser``); as anyone else it runs as that user. The binaries are Debian's
(``apt-get install postgresql``: /usr/lib/postgresql/<version>/bin), else
whatever ``initdb`` is on PATH. :func:`unavailable` says why there is none.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "postgres"  # the cluster's superuser (initdb --username)


def bin_dir() -> Path | None:
    """Where initdb, pg_ctl and postgres are, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if found:
        return Path(found[0]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def unavailable() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (it is in the dev extra: pip install -e '.[dev]')"
    if bin_dir() is None:
        return "PostgreSQL is not installed (apt-get install postgresql; `make system-deps`)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL refuses to run as root"
    return None


@dataclass(frozen=True)
class Cluster:
    """A running cluster: connect with ``psycopg.connect(cluster.dsn)``."""

    socket_dir: str

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} user={USER} dbname=postgres"


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a cluster; stop and remove it on exit."""
    binaries = bin_dir()
    assert binaries is not None, unavailable()
    # Short path: a unix socket path must stay under ~107 bytes.
    root = tempfile.mkdtemp(prefix="dlpg", dir="/tmp")
    data = os.path.join(root, "data")
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "nobody")
        os.chmod(root, 0o755)
        run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
        subprocess.run(
            _as_owner(
                [str(binaries / "initdb"), "-D", data, "-U", USER, "--auth=trust", "-E", "UTF8"]
            ),
            **run,  # type: ignore[call-overload]
        )
        options = f"-k {root} -c listen_addresses='' -c fsync=off"
        subprocess.run(
            _as_owner(
                [
                    str(binaries / "pg_ctl"),
                    "-D",
                    data,
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    os.path.join(root, "log"),
                    "start",
                ]
            ),
            **run,  # type: ignore[call-overload]
        )
        try:
            yield Cluster(root)
        finally:
            subprocess.run(
                _as_owner([str(binaries / "pg_ctl"), "-D", data, "-m", "immediate", "stop"]),
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """A PostgreSQL cluster for the session (skips, naming why, only when none can run)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with cluster() as running:
        yield running
