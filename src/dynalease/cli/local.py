"""``dynalease local``: a DynamoDB-compatible server on loopback, for trying things.

moto's DynamoDB, served one request at a time by
:mod:`dynalease._tooling.local_server`, in the foreground until Ctrl-C or SIGTERM.
It prints its endpoint and the environment to export at once, so that the
other commands, ``dynalease-dev invoke`` and the Python client reach it and not AWS.
Tables live in memory and vanish when it stops. Only DynamoDB is served, and no
web page can reach it (requests with an ``Origin`` are refused); a ``--host``
that is not loopback gets a warning, since anyone who can reach that address can
then read and write every table. Needs the ``local`` (or ``dev``) extra.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .._tooling import LOCAL_CREDENTIALS, LOCAL_REGION
from ..client import DynamoDBClient
from .common import EXIT_OK, EXIT_USAGE, NEEDS_MOTO, CommandError, table_name, whole_number

DEFAULT_PORT = 8000
DEFAULT_HOST = "127.0.0.1"


_port = whole_number(0, 65_535, kind="port number", unit="port")


def add_parser(commands: Any) -> None:
    """Register ``local`` and its options on the ``dynalease`` subcommands."""
    local = commands.add_parser(
        "local",
        help="serve a local DynamoDB-compatible server (moto) for trying things",
        description="Serve moto's DynamoDB on loopback in the foreground until Ctrl-C, and "
        "print the endpoint and the environment to export (dummy credentials, a Region). "
        "Tables are kept in memory only. Needs the `local` extra: "
        "pip install '.[local]' in a clone of the repository.",
    )
    local.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    local.add_argument(
        "--table",
        action="append",
        default=[],
        type=table_name,
        metavar="NAME",
        help="create a lock table of this name (partition key 'key', S) before serving; "
        "repeat it for several tables",
    )
    local.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; any other than loopback is "
        "reachable, without credentials, by anyone on that network)",
    )


def instructions(url: str, tables: Sequence[str] = ()) -> str:
    """What ``dynalease local`` prints once it listens on ``url``: shell lines to paste."""
    exports = {
        "AWS_ENDPOINT_URL_DYNAMODB": url,
        **LOCAL_CREDENTIALS,
        "AWS_DEFAULT_REGION": LOCAL_REGION,
    }
    lines = [
        f"# dynalease local: moto's DynamoDB on {url} (in memory; Ctrl-C stops it)",
        *(f"# lock table {table!r} created (partition key 'key', S)" for table in tables),
        "# In another shell, export these (dummy credentials; nothing goes to AWS):",
        *(f"export {name}={value}" for name, value in exports.items()),
        f"# or keep your environment and pass --endpoint {url} to each dynalease command",
        f"# (then set --region {LOCAL_REGION} and any credentials: the server accepts all).",
    ]
    return "\n".join(lines)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def remote_warning(host: str) -> str:
    """The warning printed for a ``--host`` that is not loopback."""
    return (
        f"# dynalease local: WARNING: --host {host} is not a loopback address: anyone who "
        "can reach it can read, write and delete every table, without credentials. Pass "
        f"--host {DEFAULT_HOST} unless other machines (or containers) must reach it."
    )


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; exit 0 on Ctrl-C or SIGTERM."""
    try:
        from .._tooling.local_server import is_loopback, make_server

        if not is_loopback(args.host):
            print(remote_warning(args.host), file=sys.stderr, flush=True)

        server = make_server(args.host, args.port)
    except ImportError:
        raise CommandError(NEEDS_MOTO) from None
    except OSError as error:
        raise CommandError(
            f"cannot listen on {args.host}:{args.port} ({error.strerror or error}): "
            "pass another --port, or --port 0 for a free one",
            EXIT_USAGE,
        ) from None
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    previous = signal.signal(signal.SIGTERM, _stop)
    # Served from a thread, so that this one can create the tables through the server
    # (as any client would) before printing what to paste, and then wait for Ctrl-C.
    serving = threading.Thread(target=server.serve_forever, name="dynalease-local", daemon=True)
    try:
        serving.start()
        _create_tables(url, args.table)
        print(instructions(url, args.table), flush=True)
        serving.join()
    except KeyboardInterrupt:
        print("# dynalease local: stopped", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if serving.is_alive():
            server.shutdown()
        server.server_close()
    return EXIT_OK


def _create_tables(url: str, tables: Sequence[str]) -> None:
    """Create each lock table on the server at ``url`` (a fresh one: none exists yet)."""
    if not tables:
        return
    client = DynamoDBClient(
        region=LOCAL_REGION,
        endpoint_url=url,
        access_key=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        secret_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    for table in dict.fromkeys(tables):  # a name given twice is created once
        client.sync_create_table(table, partition_key=("key", "S"), wait=True)
