"""Running the ``dynalease`` command (and ``dynalease-dev``, the development tools' ``demo``
and ``invoke``) with test credentials, in this process or a new one."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

CLI = [sys.executable, "-c", "import sys; from dynalease.cli import main; sys.exit(main())"]
DEV_CLI = [sys.executable, "-c", "import sys; from dynalease_dev.cli import main; sys.exit(main())"]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def cli_env(**overrides: str | None) -> dict[str, str]:
    """The environment a user with test credentials for the moto server would have."""
    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_DYNAMODB"):
        env.pop(name, None)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Replace os.environ for the duration of the block, as a new process would see it.

    boto3's default session (which clients without keys, profile or session use)
    caches the credentials it found: it is set aside too, so the block starts with
    none, as a new process does.
    """
    import boto3

    saved, saved_session = dict(os.environ), boto3.DEFAULT_SESSION
    os.environ.clear()
    os.environ.update(env)
    boto3.DEFAULT_SESSION = None
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        boto3.DEFAULT_SESSION = saved_session


def run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``dynalease ARGS`` through its entry point in this process (fast)."""
    from dynalease.cli import main

    return _run_main(main, args, env)


def run_dev_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``dynalease-dev ARGS`` (``demo``, ``invoke``) in this process."""
    from dynalease_dev.cli import main

    return _run_main(main, args, env)


def _run_main(
    main: Callable[[list[str]], int], args: tuple[str, ...], env: dict[str, str] | None
) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with (
        environment(cli_env() if env is None else env),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(list(args))
    return Result(code, out.getvalue(), err.getvalue())


def spawn_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    """Run ``dynalease ARGS`` in a new interpreter, as a user would."""
    return _spawn(CLI, args, env, timeout)


def spawn_dev_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    """Run ``dynalease-dev ARGS`` in a new interpreter, as a user would."""
    return _spawn(DEV_CLI, args, env, timeout)


def _spawn(
    command: list[str], args: tuple[str, ...], env: dict[str, str] | None, timeout: float
) -> Result:
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=cli_env() if env is None else env,
        timeout=timeout,
    )
    return Result(done.returncode, done.stdout, done.stderr)


#: Runs ``<command>.main(argv)`` in an interpreter where one package cannot be imported.
_WITHOUT = """\
import importlib, sys
command = sys.argv.pop(1)
blocked = sys.argv.pop(1)
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == blocked or name.startswith(blocked + '.'):
            raise ModuleNotFoundError(f'No module named {name!r}', name=name)
sys.meta_path.insert(0, Block())
sys.exit(importlib.import_module(command).main(sys.argv[1:]))
"""


def spawn_cli_without(package: str, *args: str, command: str = "dynalease.cli") -> Result:
    """Run ``dynalease ARGS`` (``command``'s main) in a separate process as an installation
    without ``package`` would."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT, command, package, *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def spawn_cli_without_moto(*args: str) -> Result:
    """Run ``dynalease ARGS`` in a separate process as an installation without moto would."""
    return spawn_cli_without("moto", *args)


def spawn_dev_cli_without_moto(*args: str) -> Result:
    """Run ``dynalease-dev ARGS`` in a separate process as an installation without moto would."""
    return spawn_cli_without("moto", *args, command="dynalease_dev.cli")
