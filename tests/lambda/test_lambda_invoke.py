"""Local invocation: a context that really counts down, and `dynalease-dev invoke`."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest
from dynalease_dev.invoke import CountdownContext, HandlerTimeout, invoke, load_handler, main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_context_counts_down_in_whole_milliseconds_and_stops_at_zero() -> None:
    context = CountdownContext(0.3)
    first = context.get_remaining_time_in_millis()
    assert isinstance(first, int) and 250 <= first <= 300
    time.sleep(0.1)
    second = context.get_remaining_time_in_millis()
    assert second <= first - 90
    time.sleep(0.3)
    assert context.get_remaining_time_in_millis() == 0


def test_the_context_looks_like_a_real_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    context = CountdownContext(3, function_name="orders", memory_limit_in_mb=512)
    assert context.function_name == "orders"
    assert context.function_version == "$LATEST"
    assert context.memory_limit_in_mb == 512
    assert context.invoked_function_arn == "arn:aws:lambda:eu-west-1:123456789012:function:orders"
    assert context.log_group_name == "/aws/lambda/orders"
    assert "[$LATEST]" in context.log_stream_name
    assert str(uuid.UUID(context.aws_request_id)) == context.aws_request_id
    assert CountdownContext().aws_request_id != CountdownContext().aws_request_id


@pytest.mark.parametrize(
    ("timeout", "error"), [(0, ValueError), (-1, ValueError), (True, TypeError), ("30", TypeError)]
)
def test_the_context_rejects_a_timeout_that_is_not_a_positive_number(
    timeout: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="timeout"):
        CountdownContext(timeout)


@pytest.fixture
def handler_file(tmp_path: pathlib.Path) -> pathlib.Path:
    name = f"local_handler_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(
        textwrap.dedent(
            """
            import time
            from decimal import Decimal

            def handler(event, context):
                return {"echo": event, "remaining_ms": context.get_remaining_time_in_millis()}

            def slow(event, context):
                time.sleep(event["sleep"])
                return "finished"

            def fails(event, context):
                raise ValueError("no customer " + event["customer_id"])

            def decimal(event, context):
                return {"count": Decimal("3"), "ratio": Decimal("0.5")}

            def unserializable(event, context):
                return {"when": object()}
            """
        )
    )
    return path


def test_invoke_runs_a_handler_file_with_a_fresh_countdown(handler_file: pathlib.Path) -> None:
    result = invoke(f"{handler_file}:handler", {"customer_id": "c-1"}, timeout=5)
    assert result["echo"] == {"customer_id": "c-1"}
    assert 4000 <= result["remaining_ms"] <= 5000


def test_invoke_accepts_module_colon_function_and_lambdas_module_dot_function(
    handler_file: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(handler_file.parent))
    for target in (f"{handler_file.stem}:handler", f"{handler_file.stem}.handler"):
        assert invoke(target, {"n": 1})["echo"] == {"n": 1}


def test_a_handler_module_is_imported_once_like_a_warm_environment(
    handler_file: pathlib.Path,
) -> None:
    assert load_handler(f"{handler_file}:handler") is load_handler(f"{handler_file}:handler")


def test_a_handler_that_outlives_its_timeout_fails_as_lambda_does(
    handler_file: pathlib.Path,
) -> None:
    with pytest.raises(HandlerTimeout, match=r"Task timed out after 0\.20 seconds"):
        invoke(f"{handler_file}:slow", {"sleep": 1.0}, timeout=0.2)


def _run_main(
    capsys: pytest.CaptureFixture[str], target: str, event: str, *options: str
) -> tuple[int, str, str]:
    """Run the command in this process on an event file holding ``event``."""
    path = pathlib.Path(target.partition(":")[0]).with_suffix(".event.json")
    path.write_text(event)
    code = main([target, str(path), *options])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_prints_the_result_as_json_on_stdout(
    handler_file: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run_main(capsys, f"{handler_file}:decimal", '{"customer_id": "c-9"}')
    assert code == 0
    assert json.loads(out) == {"count": 3, "ratio": 0.5}


def test_the_command_exits_1_with_lambdas_error_shape_when_the_handler_raises(
    handler_file: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run_main(capsys, f"{handler_file}:fails", '{"customer_id": "c-9"}')
    assert code == 1
    error = json.loads(out)
    assert error["errorType"] == "ValueError"
    assert error["errorMessage"] == "no customer c-9"
    assert "raise ValueError" in error["stackTrace"][-1]
    assert "invoke.py" not in error["stackTrace"][0]  # starts at the handler
    assert "Traceback" in err  # the log, as Lambda writes it to CloudWatch


def test_the_command_reports_a_result_that_is_not_json(
    handler_file: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run_main(capsys, f"{handler_file}:unserializable", "{}")
    assert code == 1
    assert json.loads(out)["errorType"] == "Runtime.MarshalError"


def test_the_command_reports_a_timeout(
    handler_file: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run_main(capsys, f"{handler_file}:slow", '{"sleep": 1.0}', "--timeout", "0.2")
    assert code == 1
    assert json.loads(out)["errorType"] == "Sandbox.Timedout"


@pytest.mark.parametrize(
    ("target", "event_text", "message"),
    [
        ("no_such_module_here:handler", "{}", "no module named 'no_such_module_here'"),
        ("{file}:missing", "{}", "has no attribute 'missing'"),
        ("{file}", "{}", "is not MODULE:FUNCTION"),
        ("{dir}/absent.py:handler", "{}", "does not exist"),
        ("{file}:handler", "{not json", "is not valid JSON: Expecting property name"),
        ("{file}:handler", None, "cannot read event file"),
        ("{file}:handler", b"\xff\xfe{}", "is not UTF-8 text"),
    ],
)
def test_bad_input_is_one_clear_line_with_exit_code_2_and_no_traceback(
    target: str,
    event_text: str | bytes | None,
    message: str,
    handler_file: pathlib.Path,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    event = tmp_path / "event.json"
    if isinstance(event_text, bytes):
        event.write_bytes(event_text)
    elif event_text is not None:
        event.write_text(event_text)
    target = target.format(file=handler_file, dir=tmp_path)
    code = main([target, str(event)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynalease-dev invoke: error: ")
    assert message in lines[0]
    assert "Traceback" not in err


SCRIPT = pathlib.Path(sys.executable).with_name("dynalease-dev")


def _run_direct_example(command: list[str], endpoint: str, table: str, timeout: str) -> Any:
    """Run the direct example through a command line, in a clean AWS environment."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "DYNALEASE_", "POWERTOOLS_"))
    }
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    arguments = ["examples/lambda/direct_handler.py:handler", "events/direct.json"]
    arguments += ["--endpoint", endpoint, "--table", table, "--region", "us-east-1"]
    return subprocess.run(
        [*command, *arguments, "--timeout", timeout],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dynalease_invoke_runs_an_example_end_to_end_against_the_server(
    lock_table: str, aws_env: str
) -> None:
    completed = _run_direct_example(
        [sys.executable, "-m", "dynalease_dev.cli", "invoke"], aws_env, lock_table, "20"
    )
    assert completed.returncode == 0, completed.stderr
    # stdout is only the result; the handler's logs and EMF metrics went to stderr.
    assert json.loads(completed.stdout) == {
        "customer_id": "c-1001",
        "action": "rebuild-summary",
        "lock_key": "customer:c-1001",
    }
    logs = [json.loads(line) for line in completed.stderr.splitlines() if line.startswith("{")]
    assert any(line.get("message") == "dynalease lock released" for line in logs)
    assert any(line.get("LockAcquired") == [1.0] for line in logs)


@pytest.mark.skipif(not SCRIPT.exists(), reason="the dynalease-dev console script is not installed")
def test_the_dynalease_dev_console_script_dispatches_invoke_and_fails_when_time_is_short(
    lock_table: str, aws_env: str
) -> None:
    # 12 s is less than the 5 s reserve + 10 s cleanup budget the example needs.
    completed = _run_direct_example([str(SCRIPT), "invoke"], aws_env, lock_table, "12")
    assert completed.returncode == 1, completed.stderr
    error = json.loads(completed.stdout)
    assert error["errorType"] == "LockNotAcquired"
    assert "no request was made" in error["errorMessage"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a:b", "event.json", "--timeout", "soon"], "invalid float value: 'soon'"),
        (["a:b", "event.json", "--timeout", "901"], "at most 900 seconds"),
        ([], "the following arguments are required: handler, event"),
    ],
)
def test_bad_arguments_are_one_line_with_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
