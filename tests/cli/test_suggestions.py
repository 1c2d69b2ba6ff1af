"""A misspelled flag or subcommand: the command's own usage, one wording, the closest match."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.cli_runner import Result, run_dev_cli


@pytest.mark.parametrize(
    ("argv", "prog", "suggestion"),
    [
        (["doctor", "--table", "locks", "--mesure"], "dynalease doctor", "--measure"),
        (["inspect", "--tabel", "locks"], "dynalease inspect", "--table"),
        (["local", "--prot", "0"], "dynalease local", "--port"),
        (["doctr", "--table", "locks"], "dynalease", "doctor"),
        (["inspct"], "dynalease", "inspect"),
    ],
)
def test_a_misspelling_prints_the_usage_it_was_made_in_and_the_closest_match(
    dynalease: Callable[..., Result], argv: list[str], prog: str, suggestion: str
) -> None:
    result = dynalease(*argv)
    assert result.code == 2, result.err
    usage, error = result.err.strip().splitlines()[0], result.err.strip().splitlines()[-1]
    assert usage.startswith(f"usage: {prog} "), result.err
    assert error.startswith(f"{prog}: error: ") or error.startswith(f"{prog} --lifecycle: error:")
    assert error.endswith(f"; did you mean {suggestion}?"), error
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    ("argv", "prog", "suggestion"),
    [
        (["demo", "--quik"], "dynalease-dev demo", "--quick"),
        (["invoke", "h.py:f", "-", "--timout", "3"], "dynalease-dev invoke", "--timeout"),
        (
            ["invoke", "--lifecycle", "h.py:f", "e.json", "--no-extention"],
            "dynalease-dev invoke",
            "--no-extension",
        ),
        (["demoo"], "dynalease-dev", "demo"),
    ],
)
def test_the_development_commands_suggest_the_same_way(
    argv: list[str], prog: str, suggestion: str
) -> None:
    test_a_misspelling_prints_the_usage_it_was_made_in_and_the_closest_match(
        run_dev_cli, argv, prog, suggestion
    )


def test_run_keeps_its_one_line_error_with_the_same_wording(
    dynalease: Callable[..., Result],
) -> None:
    result = dynalease("run", "--tabel", "locks", "--key", "k", "--", "true")
    assert result.code == 2
    assert result.err.strip() == (
        "dynalease run: error: unrecognized arguments: --tabel locks; did you mean --table?"
    )


def test_nothing_close_gets_no_guess(dynalease: Callable[..., Result]) -> None:
    result = dynalease("doctor", "--table", "locks", "--zzzzzz")
    assert result.code == 2
    assert result.err.strip().splitlines()[-1] == (
        "dynalease doctor: error: unrecognized arguments: --zzzzzz"
    )
