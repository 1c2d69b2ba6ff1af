"""Child process: how much of a refused answer outlives its request, by tracemalloc.

``python retained_answer.py KIND HOW`` starts ``benchmarks.hostile``'s server for KIND
(``chunk``: one 16 MB chunk, refused at the 4 MiB cap; ``garbage``: a 2 MB body that is
no JSON, read whole and refused) in a thread, sends a PutItem through a real
:class:`LeanTransport` the HOW way (``loop`` or ``thread``), keeps the error it raised,
as the engine keeps its errors, and prints one JSON line: the bytes still allocated
since just before the request, and the error's type and ``may_have_committed``.
A warm-up request first loads everything the failure path imports.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import threading
import tracemalloc
from typing import Any

from botocore.config import Config

from benchmarks.hostile import serve
from dynalease._transport.boto import lock_config
from dynalease._transport.lean import LeanTransport
from support.lean_paths import botocore_client, sender_for

SIZES = {"chunk": 16 * 1000 * 1000, "garbage": 2 * 1000 * 1000}
PUT = {"TableName": "locks", "Item": {"key": {"S": "k"}}}


class _Port:
    """What ``serve`` reports its port to."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.port = 0

    def send(self, port: int) -> None:
        self.port = port
        self.ready.set()


def main(kind: str, how: str) -> None:
    port = _Port()
    threading.Thread(target=serve, args=(kind, SIZES[kind], port), daemon=True).start()
    port.ready.wait(10)
    config = lock_config(None).merge(Config(connect_timeout=2, read_timeout=10))
    lean = LeanTransport(lambda: botocore_client(f"http://127.0.0.1:{port.port}", config))

    async def refused() -> BaseException:
        try:
            await sender_for(lean, how, timeout=10)("PutItem", PUT)
        except Exception as error:
            return error
        raise AssertionError("a refused answer was taken as a success")

    asyncio.run(refused())  # the warm-up
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept: Any = asyncio.run(refused())
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    error = {"type": type(kept).__name__, "may_have_committed": kept.may_have_committed}
    print(json.dumps({"retained": retained, "error": error}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
