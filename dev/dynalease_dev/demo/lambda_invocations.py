"""The demo's Lambda process: example handlers invoked on the sample events.

Run by ``dynalease-dev demo`` as
``python -m dynalease_dev.demo.lambda_invocations CONFIG_JSON``. Each invocation goes
through :func:`dynalease_dev.invoke.invoke`, so the handler's middleware
sizes its lock wait from a context whose remaining time really counts down.
The handlers lock the same customer keys as the workers, through
the lock table named in ``DYNALEASE_TABLE``, as the CDK construct would set it.
Events are reported as JSON lines, like the workers'.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

#: Lambda's default timeout is 3 s; the examples need room for a 30 s lease's cleanup.
INVOCATION_TIMEOUT_S = 30.0
PAUSE_S = 0.5
#: Seconds of run left for the one Lambda timeout (``lambda_timeout``, about 4 s).
TIMEOUT_SCENARIO_ROOM_S = 10.0


def handlers(root: Path) -> dict[str, str]:
    """Event file -> handler target, for every event with a matching example handler."""
    found = {}
    for event in sorted((root / "events").glob("*.json")):
        handler = root / "examples" / "lambda" / f"{event.stem.replace('-', '_')}_handler.py"
        if handler.is_file():
            found[str(event)] = f"{handler}:handler"
    return found


def repository_root() -> Path | None:
    """The checkout holding examples/ and events/: the working directory or the source tree."""
    # dev/dynalease_dev/demo/this file -> the checkout, for an editable install.
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (candidate / "events").is_dir() and (candidate / "examples" / "lambda").is_dir():
            return candidate
    return None


def lambda_plan(common: dict[str, Any]) -> dict[str, Any] | None:
    """The Lambda process's config, or None when this installation has no examples."""
    root = repository_root()
    if root is None:
        return None
    pairs = handlers(root)
    if not pairs:
        return None
    return {**common, "handlers": pairs}


def _invoke_once(invoke: Any, target: str, event: Any) -> tuple[str, str]:
    """(outcome, detail): ok, contended (the lock was busy; Lambda retries) or error."""
    from dynalease.exceptions import LockNotAcquired

    try:
        result = invoke(target, event, timeout=INVOCATION_TIMEOUT_S)
    except LockNotAcquired as error:
        return "contended", str(error)
    except Exception as error:
        contended = _contended_records(error)
        if contended:
            return "contended", f"{contended} records left for redelivery"
        return "error", f"{type(error).__name__}: {error}"
    if isinstance(result, dict):
        failures = result.get("batchItemFailures")
        if failures:
            return "contended", f"{len(failures)} records left for redelivery"
        status = result.get("statusCode")
        if isinstance(status, int) and status == 409:
            return "contended", "HTTP 409"
        if isinstance(status, int) and status >= 400:
            return "error", f"HTTP {status}"
    return "ok", ""


def _contended_records(error: Exception) -> int:
    """How many records a batch left for redelivery when every one of them failed only by
    contention, else 0.

    Powertools raises ``BatchProcessingError`` when no record of a batch succeeded: on a
    FIFO queue, the first record of each busy customer did not get its lock and the rest
    of its group was skipped to keep the order. That is contention, as a batch with some
    ``batchItemFailures`` is; its message carries a traceback per record.
    """
    try:
        from aws_lambda_powertools.utilities.batch.exceptions import (
            BatchProcessingError,
            SQSFifoCircuitBreakerError,
            SQSFifoMessageGroupCircuitBreakerError,
        )
    except ImportError:  # no Powertools here: no batch to read
        return 0
    from dynalease.exceptions import LockNotAcquired, LockUnavailable

    if not isinstance(error, BatchProcessingError):
        return 0
    failures = [failure for _, failure, _ in error.child_exceptions]
    skipped = (SQSFifoCircuitBreakerError, SQSFifoMessageGroupCircuitBreakerError)

    def busy(failure: object) -> bool:  # LockUnavailable: DynamoDB failed, not contention
        return isinstance(failure, LockNotAcquired) and not isinstance(failure, LockUnavailable)

    if any(busy(f) for f in failures) and all(busy(f) or isinstance(f, skipped) for f in failures):
        return len(failures)
    return 0


def main(argv: list[str]) -> int:
    from dynalease.constants import ENV_TABLE

    from ..invoke import invoke
    from .worker import emit, wait_for_start

    config = json.loads(argv[0])
    os.environ[ENV_TABLE] = config["locks"]
    if config["endpoint"]:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = config["endpoint"]
    if config["region"]:
        os.environ["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"] = config["region"]
    if config["profile"]:
        os.environ["AWS_PROFILE"] = config["profile"]
    events = {path: json.loads(Path(path).read_text()) for path in config["handlers"]}
    end_at = wait_for_start()["end_at"]
    if end_at - time.time() > TIMEOUT_SCENARIO_ROOM_S:
        from .lambda_timeout import scenario

        with contextlib.redirect_stdout(sys.stderr):
            text = scenario(config["locks"])
        emit("note", text=text)
    while time.time() < end_at:
        for path, target in config["handlers"].items():
            if time.time() >= end_at:
                break
            name = Path(path).stem
            started = time.monotonic()
            # The handlers log to stdout; keep it for our events.
            with contextlib.redirect_stdout(sys.stderr):
                outcome, detail = _invoke_once(invoke, target, events[path])
            emit(
                "invoked",
                handler=name,
                outcome=outcome,
                detail=detail,
                ms=(time.monotonic() - started) * 1000,
            )
            time.sleep(PAUSE_S)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
