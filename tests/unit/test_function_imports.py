"""Function-level imports in ``src/dynalease``: each one listed here with why it is not at
the top of its module. An import moves into a function only to keep something off a path
that a budget guards (tests/unit/test_budgets.py) or off a dependency that may be absent;
a new one joins this list by a change to this test, with its reason.

Issue 46 asked for at most 54 (half of the 108 it counted); the count is the AST's, every
``import``/``from ... import`` nested anywhere inside a ``def``.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "dynalease"
MAX_FUNCTION_IMPORTS = 54

_LOOP = "the event loop: loop-side, loaded only once a lease needs the loop (short holds never)"
_ASYNC_FACE = "asyncio for an async face: the sync faces in the same module never load it"
_BOTOCORE = "botocore: only where a botocore client is used; a lean client never loads it"
_CLI = "a CLI command's own heavy part, loaded by that command only (the CLI starts fast)"
_RICH = "rich: optional, and only when output goes to a terminal"
_COLD = "the middleware's cold import (MIDDLEWARE_COLD_MODULES) stays without it"
_ATTEMPTS = "the acquire rules: a first create that wins never loads the driver's modules"
_MOTO = "moto: a test dependency, loaded by a memory backend or a local server only"

#: (module, function, what it imports) -> why it is imported there.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("_engine/acquire.py", "Acquirer.acquire", ".driver"): _LOOP,
    ("_engine/base.py", "LeaseCore.lost_signal", "concurrent.futures"): _LOOP,
    ("_engine/clock.py", "SystemClock.sleep", "asyncio"): _LOOP,
    ("_engine/journal_switch.py", "process_journal", ".journal"): (
        "the journal: only a process that keeps one (the recovery extension installed) loads it"
    ),
    ("_engine/permits.py", "PermitTarget.rules", ".attempts"): _ATTEMPTS,
    ("_engine/release.py", "Releaser.on_loop", ".release_loop"): _LOOP,
    ("_engine/renew.py", "Renewer.start_renewing", ".watch"): _LOOP,
    ("_engine/runtime.py", "Runtime._run", ".loop"): _LOOP,
    ("_engine/runtime.py", "_pool", "concurrent.futures"): _LOOP,
    ("_engine/scheduling.py", "DeferredRenewals._schedule", "asyncio"): _LOOP,
    ("_engine/targets.py", "KeyTarget.rules", ".attempts"): _ATTEMPTS,
    ("_engine/targets.py", "KeysTarget.rules", ".attempts"): _ATTEMPTS,
    ("_engine/wire.py", "bounded", "asyncio"): _LOOP,
    ("_engine/wire.py", "late_answer", "asyncio"): _LOOP,
    ("_engine/wire.py", "LoopTransport.handle_async", "asyncio"): _LOOP,
    ("_extension/recovery.py", "recover", ".releasing"): (
        "the extension's release path: a recovery with nothing to release never loads it"
    ),
    ("_lambda/holding.py", "_rw_guard", "..rwlock"): (
        "read/write locks: only a handler given mode= loads them"
    ),
    ("_lambda/plan.py", "_is_client", "..client"): _COLD,
    ("_lambda/snapstart.py", "_clients", "..client"): _COLD,
    ("_lambda/snapstart.py", "register", "snapshot_restore_py"): (
        "SnapStart's runtime hooks: present on SnapStart only"
    ),
    ("client.py", "DynamoDBClient._new_lease", "._engine.queue"): (
        "fair waiting's queue: only a fair guard loads it"
    ),
    ("middleware.py", "lock_handler", ".single_flight"): (
        "single flight: only a handler given single_flight= loads it (and the results' module)"
    ),
    ("single_flight.py", "single_flight.decorate.async_wrapper", "asyncio"): _ASYNC_FACE,
    ("_tooling/console.py", "rich_table", "rich.table"): _RICH,
    ("_tooling/local_server.py", "dynamodb_app", "..testing._moto"): _MOTO,
    ("_tooling/local_server.py", "main", "werkzeug.serving"): _MOTO,
    ("_tracing.py", "_spans", "."): "OpenTelemetry: only once a tracer provider is found",
    ("_values.py", "_exact", "decimal"): "exact numbers: only for a number no int can hold",
    ("_transport/boto.py", "lock_config", "botocore.config"): _BOTOCORE,
    ("_transport/boto.py", "BotoTransport.prepare", "asyncio"): _LOOP,
    ("_transport/boto.py", "BotoTransport.handle", "botocore.exceptions"): _BOTOCORE,
    ("_transport/connections.py", "proxy_for", "urllib.request"): (
        "the system proxy reader: only when proxy variables are set (a budget test)"
    ),
    ("_transport/connections.py", "_default_ca_bundle", "certifi"): (
        "optional: botocore's bundle is the fallback"
    ),
    ("_transport/factory.py", "from_settings.make_session", "boto3"): _BOTOCORE,
    ("_transport/factory.py", "from_settings.make_config", "botocore.config"): _BOTOCORE,
    ("_transport/factory.py", "from_client.lock_client", "botocore.session"): _BOTOCORE,
    ("_transport/lean.py", "LeanTransport._prepare", "asyncio"): _LOOP,
    ("_transport/lean.py", "LeanTransport.handle_async", "asyncio"): _LOOP,
    ("cli/command_group.py", "_become_subreaper", "ctypes"): "Linux only, one command's",
    ("cli/common.py", "run_command", "botocore.exceptions"): _BOTOCORE,
    ("cli/doctor.py", "run", ".._tooling.diagnose"): _CLI,
    ("cli/inspect.py", "follow", "rich.live"): _RICH,
    ("cli/inspect.py", "rich_cells", "rich.markup"): _RICH,
    ("cli/local.py", "run", ".._tooling.local_server"): _CLI,
    ("client.py", "DynamoDBClient._in_pool", "asyncio"): _ASYNC_FACE,
    ("lock.py", "_Guard.until_lost", "asyncio"): _ASYNC_FACE,
    ("election.py", "Election.lead", "asyncio"): _ASYNC_FACE,
    ("election.py", "Election.observe", "asyncio"): _ASYNC_FACE,
    ("lock.py", "_Guard.check_in", ".transaction"): (
        "transaction imports lock: the cycle is broken here"
    ),
    ("lock.py", "DistributedLock.__aenter__", "asyncio"): _ASYNC_FACE,
    ("middleware.py", "_hold", "._lambda.holding"): _COLD,
    ("middleware.py", "_import_ahead", "._lambda"): _COLD,
    ("testing/__init__.py", "MemoryBackend.__init__", "._moto"): _MOTO,
    ("testing/__init__.py", "MemoryBackend.__init__", "._transport"): _MOTO,
}


def _function_imports(path: Path) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    module = path.relative_to(PACKAGE).as_posix()

    def visit(node: ast.AST, scope: str, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{scope}.{child.name}" if scope else child.name
                function = in_function or not isinstance(child, ast.ClassDef)
                visit(child, name, function)
            elif isinstance(child, ast.ImportFrom) and in_function:
                found.append((module, scope, "." * child.level + (child.module or "")))
            elif isinstance(child, ast.Import) and in_function:
                found.extend((module, scope, alias.name) for alias in child.names)
            else:
                visit(child, scope, in_function)

    visit(ast.parse(path.read_text()), "", False)
    return found


def _all_function_imports() -> Counter[tuple[str, str, str]]:
    return Counter(row for path in sorted(PACKAGE.rglob("*.py")) for row in _function_imports(path))


def test_every_function_level_import_is_listed_with_its_reason() -> None:
    found = _all_function_imports()
    unlisted = sorted(set(found) - set(ALLOWED))
    assert unlisted == [], "move these to the top of their module, or list them with why"
    gone = sorted(set(ALLOWED) - set(found))
    assert gone == [], "these are no longer function-level: take them off the list"
    assert [row for row, count in found.items() if count > 1] == []


def test_function_level_imports_stay_within_the_budget() -> None:
    assert sum(_all_function_imports().values()) <= MAX_FUNCTION_IMPORTS
