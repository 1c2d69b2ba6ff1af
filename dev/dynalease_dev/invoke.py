"""Run a Lambda handler locally with a context whose remaining time really counts down.

``dynalease-dev invoke MODULE:HANDLER EVENT.json`` imports the handler the way the
Lambda runtime does (the handler's directory first on ``sys.path``, the module
imported once and kept warm), builds a context that behaves like a real one,
calls the handler with the event, and prints the result as JSON. No Docker: the
handler runs in this interpreter, so what it imports is what is installed here.

The context's clock starts when the invocation starts, so middleware that sizes
its work from ``get_remaining_time_in_millis()`` sees the same numbers it would
see in Lambda. Like Lambda, an invocation that outlives its timeout fails with
"Task timed out"; unlike Lambda, its thread cannot be frozen, so the command
exits rather than wait for it.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import datetime
import decimal
import importlib
import importlib.util
import json
import os
import pathlib
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["CountdownContext", "HandlerTimeout", "invoke", "load_handler", "main"]

_ACCOUNT = "123456789012"


class HandlerTimeout(TimeoutError):
    """The handler was still running when the invocation's time was up."""


class CountdownContext:
    """A Lambda context whose remaining time counts down from ``timeout`` seconds.

    The countdown starts when the context is created; ``get_remaining_time_in_millis``
    returns whole milliseconds, never below 0, as Lambda's does. The other
    attributes are shaped like a real context's (``function_name``,
    ``aws_request_id``, ``invoked_function_arn``, ``log_group_name``...);
    ``tenant_id`` is the invocation's tenant (tenant isolation mode), else None.

    Example::

        context = CountdownContext(timeout=3.0)
        handler(event, context)   # the middleware sees about 3,000 ms left
    """

    def __init__(
        self,
        timeout: float = 30.0,
        *,
        function_name: str = "dynalease-local",
        function_version: str = "$LATEST",
        memory_limit_in_mb: int = 128,
        region: str | None = None,
        account_id: str = _ACCOUNT,
        aws_request_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        tenant_id: str | None = None,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(f"timeout must be a number of seconds, got {type(timeout).__name__}")
        if not 0 < timeout <= 86_400:
            raise ValueError(
                f"timeout must be more than 0 and at most 86,400 seconds, got {timeout!r} "
                "(Lambda allows 1 to 900)"
            )
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        region = region or "us-east-1"
        self._clock = clock
        self.timeout = float(timeout)
        self._deadline = clock() + self.timeout
        self.function_name = function_name
        self.function_version = function_version
        self.memory_limit_in_mb = memory_limit_in_mb
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{account_id}:function:{function_name}"
        self.aws_request_id = aws_request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        today = datetime.datetime.now(datetime.UTC).strftime("%Y/%m/%d")
        self.log_stream_name = f"{today}/[{function_version}]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self.tenant_id = tenant_id

    def get_remaining_time_in_millis(self) -> int:
        """Whole milliseconds until the timeout, 0 once it has passed."""
        return max(0, int((self._deadline - self._clock()) * 1000))

    def __repr__(self) -> str:
        return (
            f"CountdownContext(function_name={self.function_name!r}, "
            f"remaining_ms={self.get_remaining_time_in_millis()}, "
            f"aws_request_id={self.aws_request_id!r})"
        )


class _BadInput(ValueError):
    """Input the command cannot run with; printed as one line, no traceback."""


def load_handler(target: str) -> Callable[..., Any]:
    """Import ``"module:function"``, ``"path/to/file.py:function"`` or ``"module.function"``.

    A file's directory goes first on ``sys.path`` (Lambda's task root), so the
    handler's sibling modules import as they would in Lambda. Modules are
    imported once and reused, like a warm execution environment.
    """
    if not isinstance(target, str):
        raise TypeError(f"handler target must be a str such as 'app:handler', got {target!r}")
    module_part, sep, function_name = target.rpartition(":")
    if not sep and "/" not in target and os.sep not in target and not target.endswith(".py"):
        # Lambda's own spelling: "app.handler".
        module_part, sep, function_name = target.rpartition(".")
    if not sep or not module_part or not function_name.isidentifier():
        raise _BadInput(
            f"handler {target!r} is not MODULE:FUNCTION, FILE.py:FUNCTION or MODULE.FUNCTION; "
            "e.g. examples/lambda/direct_handler.py:handler"
        )
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        module = _load_file(pathlib.Path(module_part))
    else:
        module = _load_module(module_part)
    function = getattr(module, function_name, None)
    if function is None:
        raise _BadInput(f"module {module.__name__!r} has no attribute {function_name!r}")
    if not callable(function):
        raise _BadInput(
            f"{module.__name__}.{function_name} is {type(function).__name__}, not a function"
        )
    handler: Callable[..., Any] = function
    return handler


def _load_file(path: pathlib.Path) -> Any:
    if not path.is_file():
        raise _BadInput(f"handler file {str(path)!r} does not exist")
    path = path.resolve()
    root = str(path.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise _BadInput(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _load_module(name: str) -> Any:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and (name == error.name or name.startswith(error.name + ".")):
            raise _BadInput(
                f"no module named {name!r} (looked in the current directory and sys.path)"
            ) from None
        raise


def invoke(target: str, event: Any, *, timeout: float = 30.0) -> Any:
    """Call the handler named by ``target`` with ``event`` and a :class:`CountdownContext`.

    Returns what the handler returns and raises what it raises. A handler still
    running after ``timeout`` seconds raises :class:`HandlerTimeout` (its thread
    keeps running in the background; Lambda would freeze it).
    """
    handler = load_handler(target)
    context = CountdownContext(timeout)
    return _call(handler, event, context)


def _call(handler: Callable[..., Any], event: Any, context: CountdownContext) -> Any:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = handler(event, context)
        except BaseException as error:
            outcome["error"] = error

    # A thread, so the invocation can end at its timeout while the handler is stuck;
    # the caller's context variables come along, as they would on the caller's thread.
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="lambda-invocation", daemon=True
    )
    thread.start()
    thread.join(max(0.0, context._deadline - context._clock()))
    if thread.is_alive():
        raise HandlerTimeout(f"Task timed out after {context.timeout:.2f} seconds")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _read_event(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise _BadInput(f"cannot read event file {path!r}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise _BadInput(f"event file {path!r} is not UTF-8 text: {error.reason}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _BadInput(
            f"event file {path!r} is not valid JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}"
        ) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, like every other input error of this command (no usage dump).
        self.exit(2, f"dynalease-dev invoke: error: {message} (see dynalease-dev invoke --help)\n")


def _parser(parser_class: type[argparse.ArgumentParser] = _Parser) -> argparse.ArgumentParser:
    from dynalease.cli.common import endpoint_url

    parser = parser_class(
        prog="dynalease-dev invoke",
        description=(
            "Run a Lambda handler locally with a context whose remaining time counts down "
            "from --timeout, and print its result as JSON."
        ),
    )
    parser.add_argument(
        "handler", help="MODULE:FUNCTION, FILE.py:FUNCTION or MODULE.FUNCTION (Lambda's form)"
    )
    parser.add_argument("event", help="the event as a JSON file, or - to read it from stdin")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="the function timeout in seconds (30)"
    )
    parser.add_argument(
        "--endpoint",
        type=endpoint_url,
        help="DynamoDB endpoint URL (sets AWS_ENDPOINT_URL_DYNAMODB)",
    )
    parser.add_argument("--table", help="lock table (sets DYNALEASE_TABLE)")
    parser.add_argument("--region", help="AWS Region (sets AWS_REGION)")
    parser.add_argument("--profile", help="AWS profile (sets AWS_PROFILE)")
    return parser


def _apply_settings(arguments: argparse.Namespace) -> None:
    from dynalease.constants import ENV_TABLE

    # Environment variables, not arguments: the handler reads its configuration
    # from the environment in Lambda, so it must do the same here.
    settings = {
        "AWS_ENDPOINT_URL_DYNAMODB": arguments.endpoint,
        ENV_TABLE: arguments.table,
        "AWS_REGION": arguments.region,
        "AWS_DEFAULT_REGION": arguments.region,
        "AWS_PROFILE": arguments.profile,
    }
    for name, value in settings.items():
        if value is not None:
            os.environ[name] = value


def main(
    argv: list[str] | None = None, parser_class: type[argparse.ArgumentParser] = _Parser
) -> int:
    """``dynalease-dev invoke``: 0 when the handler returned, 1 when it raised, 2 on bad input.

    The result goes to stdout as JSON; whatever the handler prints (logs, EMF
    metrics) goes to stderr, so stdout stays parseable. ``parser_class`` is the
    command line's (``dynalease-dev invoke`` passes the one every subcommand uses).
    """
    parser = _parser(parser_class)
    arguments = parser.parse_args(argv)
    if not 0 < arguments.timeout <= 900:
        parser.error(
            "--timeout must be more than 0 and at most 900 seconds (Lambda's maximum), "
            f"got {arguments.timeout:g}"
        )
    out = sys.stdout
    try:
        event = _read_event(arguments.event)
        _apply_settings(arguments)
        with contextlib.redirect_stdout(sys.stderr):
            try:
                handler = load_handler(arguments.handler)
            except _BadInput:
                raise
            except Exception as error:
                # The handler's module failed while importing: Lambda's init error.
                return _report_failure(error, CountdownContext(arguments.timeout), out, "init")
            context = CountdownContext(arguments.timeout)
            try:
                result = _call(handler, event, context)
            except Exception as error:
                missing = _missing_table(error)
                if missing is not None:
                    print(f"dynalease-dev invoke: error: {missing}", file=sys.stderr)
                    return 1
                return _report_failure(error, context, out, "invoke")
    except _BadInput as error:
        print(f"dynalease-dev invoke: error: {error}", file=sys.stderr)
        return 2
    try:
        text = json.dumps(result, default=_json_default)
    except (TypeError, ValueError) as error:
        _print_error(out, "Runtime.MarshalError", f"Unable to marshal response: {error}", context)
        return 1
    print(text, file=out)
    return 0


def _missing_table(error: BaseException) -> str | None:
    """What is missing when a lock's table is, with the command that creates it; else None.

    The lock's error may be the handler's, or every record's of a batch (Powertools'
    ``BatchProcessingError`` carries them as ``child_exceptions``, each with its
    traceback: kilobytes of text for one missing table).
    """
    from dynalease._advice import where
    from dynalease._tooling.diagnose import create_table_hint
    from dynalease.exceptions import TableNotFoundError

    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, TableNotFoundError) and current.table is not None:
            table, region, endpoint = current.table, current.region, current.endpoint
            return (
                f"table {table!r} does not exist in {where(region, endpoint)}: "
                f"{create_table_hint(table, region, endpoint)}"
            )
        children = getattr(current, "child_exceptions", None) or []
        pending += [child for _, child, _ in children if isinstance(child, BaseException)]
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return None


def _report_failure(error: Exception, context: CountdownContext, out: Any, phase: str) -> int:
    if isinstance(error, HandlerTimeout):
        _print_error(out, "Sandbox.Timedout", str(error), context)
        return 1
    traceback.print_exception(error, file=sys.stderr)
    error_type = type(error).__name__
    if phase == "init":
        error_type = f"Runtime.ImportModuleError ({error_type})"
    _print_error(out, error_type, str(error), context, error)
    return 1


def _print_error(
    out: Any,
    error_type: str,
    message: str,
    context: CountdownContext,
    error: BaseException | None = None,
) -> None:
    # The shape Lambda returns for a failed synchronous invocation.
    body: dict[str, Any] = {
        "errorMessage": message,
        "errorType": error_type,
        "requestId": context.aws_request_id,
    }
    if error is not None:
        frames = traceback.extract_tb(error.__traceback__)
        # Start at the handler, as Lambda's trace does, not in this runner.
        while frames and frames[0].filename == __file__:
            frames.pop(0)
        body["stackTrace"] = traceback.format_list(frames)
    print(json.dumps(body), file=out)


if __name__ == "__main__":
    sys.exit(main())
