"""Every fenced code block in README.md and docs/*.md is checked.

The convention the docs are written to:

- ```python blocks run top to bottom in one namespace per document, against a
  fresh empty moto server, with AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION=us-east-1
  and test credentials set, in the repository root, and with what the document's
  shell blocks exported so far. Top-level ``await`` works.
- The pages a reader follows in order (READER_PATH) get no endpoint and no
  credentials: each must start ``dynalease local`` and export what it prints, as a
  reader without AWS does, and they run one after the other, twice, on one server.
- ```console, ```bash, ```sh (and unlabelled) blocks: ``dynalease ...`` and
  ``dynalease-dev invoke ...`` commands run against that server and must exit 0
  (``dynalease-dev demo`` and ``dynalease local`` are only parsed: they have their
  own tests; the address ``local`` would serve on is replaced by the docs server in
  later commands, emptied as a fresh ``local`` would be, with its ``--table`` tables;
  ``inspect --watch`` gets ``--for 1``); ``make X`` must name a Makefile target;
  ``pip install`` must name extras the project declares;
  ``python -m M`` / ``python FILE`` must name a module or file that exists;
  ``export NAME=value`` applies to the document's later commands. In console
  blocks with ``$ `` prompts only the prompted lines are commands.
- ```crontab blocks: each entry's command (after its five schedule fields, or an
  ``@daily``-style one) runs as a shell command, at once; ``NAME=value`` lines set
  the environment of the entries below them, as cron does.
- Commands must work as written from a fresh clone after ``make demo``: the
  project's programs are ``.venv/bin/dynalease`` and ``.venv/bin/python``, or
  bare ``dynalease`` / ``python`` once the document has run
  ``. .venv/bin/activate``. Any other program (``aws``, ``cdk``, ...) fails the
  document unless the line before the block says why it is not run:
  ``<!-- not run by the docs tests: <reason> -->``.
- ```text blocks are output; ```json and ```toml blocks must parse.
- A line ``--8<-- "examples/FILE.py"`` in a block (pymdownx.snippets, as the site's build
  includes it) stands for that file's text, which then runs as the block: code on the
  site lives in files this test runs, not in copies.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import traceback
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from dynalease_dev.cli import build_parser as build_dev_parser
from support.cli_runner import run_cli

from dynalease._tooling.local_server import LocalServer
from dynalease.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # the site's pages
SHELL = {"", "console", "bash", "sh", "shell"}
DISPLAY = {"text"}
PARSED = {"json", "toml"}
# Any indentation: a block in a list item, or in a content tab (``=== "CDK"``, four spaces).
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_SEPARATORS = {"&&", "||", ";", "|"}
_NOT_RUN = re.compile(r"^<!-- not run by the docs tests: (?P<reason>\S.*?) -->$")
_ACTIVATED = "_DOCS_VENV_ACTIVATED"  # set once a document has sourced .venv/bin/activate
_SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"(?P<path>[^"]+)"\s*$')  # pymdownx.snippets


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    language: str
    text: str
    not_run: str | None = None  # the reason given in a comment before the fence

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line} ({self.language or 'unlabelled'})"


def fenced_blocks(document: Path) -> list[Block]:
    """The fenced code blocks of a Markdown document, in order."""
    blocks: list[Block] = []
    lines = document.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, start, indent = opening["fence"], index + 1, len(opening["indent"])
        before = _NOT_RUN.match(lines[index - 1].strip()) if index else None
        language = opening["info"].strip().split(" ")[0].lower() if opening["info"] else ""
        index += 1
        body: list[str] = []
        while index < len(lines) and not (
            lines[index].strip().startswith(fence) and not lines[index].strip().strip(fence[0])
        ):
            line = lines[index]  # content loses up to the fence's own indentation
            line = line[min(indent, len(line) - len(line.lstrip(" "))) :]
            snippet = _SNIPPET.match(line)
            body.extend(included(snippet["path"]) if snippet else [line])
            index += 1
        text = "\n".join(body) + "\n"
        blocks.append(Block(document, start, language, text, before and before["reason"]))
        index += 1
    return blocks


def included(path: str) -> list[str]:
    """The lines of a file a block includes, as the site's build reads it (from the root)."""
    return (ROOT / path).read_text(encoding="utf-8").splitlines()


# --- python -------------------------------------------------------------------


def run_python(block: Block, namespace: dict[str, object]) -> None:
    code = compile(
        block.text, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    result = eval(code, namespace)  # a coroutine when the block awaits at top level
    if inspect.iscoroutine(result):
        asyncio.run(result)


# --- shell ----------------------------------------------------------------------


def shell_commands(block: Block) -> list[list[str]]:
    """The commands of a shell block: prompts, continuations, comments and && handled."""
    joined: list[str] = []
    pending = ""
    for line in block.text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if block.language == "console" and any(line.startswith("$ ") for line in joined):
        joined = [line[2:] for line in joined if line.startswith("$ ")]
    commands: list[list[str]] = []
    for line in joined:
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in [*words, ";"]:
            if word in _SEPARATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(word)
    return commands


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.MULTILINE))


def declared_extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project.get("optional-dependencies", {}))


def check_pip(words: list[str], where: str) -> None:
    extras = declared_extras()
    for word in words:
        match = re.fullmatch(r"(?:dynalease|\.|-e\s*\.)\[([^\]]*)\]", word)
        if match:
            for extra in match[1].split(","):
                assert extra.strip() in extras, f"{where}: no extra {extra!r} in pyproject.toml"


def check_python(words: list[str], where: str) -> None:
    if "-m" in words:
        module = words[words.index("-m") + 1]
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        assert importlib.util.find_spec(module) is not None, f"{where}: no module {module!r}"
    else:
        scripts = [w for w in words[1:] if w.endswith(".py")]
        for script in scripts[:1]:
            assert (ROOT / script).is_file(), f"{where}: no file {script!r}"


def run_dynalease(args: list[str], env: dict[str, str], where: str) -> None:
    if args[:1] == ["inspect"] and "--watch" in args and "--for" not in args:
        args = [*args, "--for", "1"]
    result = run_cli(*args, env=env)
    code, out, err = result.code, result.out, result.err
    assert code == 0, f"{where}: `dynalease {shlex.join(args)}` exited {code}:\n{out}\n{err}"


def run_dynalease_dev(args: list[str], env: dict[str, str], where: str) -> None:
    if args[:1] == ["demo"]:
        try:
            build_dev_parser().parse_args(args)
        except SystemExit as exit_:
            pytest.fail(f"{where}: `dynalease-dev {shlex.join(args)}` is not valid ({exit_})")
        return
    # invoke: the handler is imported and configured from the environment: its own process.
    done = subprocess.run(
        [sys.executable, "-m", "dynalease_dev.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    code, out, err = done.returncode, done.stdout, done.stderr
    assert code == 0, f"{where}: `dynalease-dev {shlex.join(args)}` exited {code}:\n{out}\n{err}"


_LOCAL = "_DOCS_LOCAL_URL"  # where the document's `dynalease local` would listen
_SERVER = "_DOCS_SERVER_URL"  # the docs server, where a reader's `dynalease local` is


def run_shell(block: Block, env: dict[str, str]) -> None:
    for words in shell_commands(block):
        if words[:2] == ["dynalease", "local"] or words[:2] == [".venv/bin/dynalease", "local"]:
            # It serves until Ctrl-C: parse it, and send its address to the docs server.
            try:
                parsed = build_parser().parse_args(words[1:])
            except SystemExit as exit_:
                pytest.fail(f"{block.where}: `{shlex.join(words)}` is not valid ({exit_})")
            env[_LOCAL] = f"http://{parsed.host}:{parsed.port}"
            # The reader test keeps one server across its pages and runs (what a reader who
            # never stops `dynalease local` has); elsewhere each `local` is a fresh server.
            target = env.get(_SERVER) or env["AWS_ENDPOINT_URL_DYNAMODB"]
            env[_LOCAL + "_TO"] = target
            serve_as_local(target, parsed.table, fresh=_SERVER not in env)
            continue
        if _LOCAL in env:
            words = [w.replace(env[_LOCAL], env[_LOCAL + "_TO"]) for w in words]
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env = {**env, name: value}
        if not words:
            continue
        program = Path(words[0]).name
        if words[0] in (".", "source"):
            assert words[1:] == [".venv/bin/activate"], (
                f"{block.where}: `{shlex.join(words)}`: only `. .venv/bin/activate` is known"
            )
            env[_ACTIVATED] = "1"
            continue
        if program in ("dynalease", "dynalease-dev", "python", "python3"):
            check_interpreter(words[0], env, block.where)
        if program == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                env[name] = value
        elif program == "dynalease":
            run_dynalease(words[1:], env, block.where)
        elif program == "dynalease-dev":
            run_dynalease_dev(words[1:], env, block.where)
        elif program == "make":
            targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            missing = set(targets) - makefile_targets()
            assert not missing, f"{block.where}: no Makefile target {sorted(missing)}"
        elif program in ("pip", "pip3") or words[1:3] == ["-m", "pip"]:
            check_pip(words, block.where)
        elif program in ("python", "python3"):
            check_python(words, block.where)
        elif block.not_run is None:
            pytest.fail(
                f"{block.where}: `{shlex.join(words)}` is neither run nor checked by the docs "
                f"tests; put `<!-- not run by the docs tests: <reason> -->` on the line "
                f"before the block if it cannot run here"
            )


def serve_as_local(url: str, tables: list[str], *, fresh: bool) -> None:
    """Make the docs server what `dynalease local --table ...` serves: those tables (only
    those when ``fresh``)."""
    from dynalease import DynamoDBClient

    if fresh:
        request = urllib.request.Request(f"{url}/moto-api/reset", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=10).close()
    client = DynamoDBClient(
        region="us-east-1", endpoint_url=url, access_key="testing", secret_key="testing"
    )
    for table in tables:
        if not client.sync_table_exists(table):
            client.sync_create_table(table, partition_key=("key", "S"), wait=True)


def check_interpreter(program: str, env: dict[str, str], where: str) -> None:
    """The project's own programs, as a fresh clone has them after ``make demo``."""
    name = Path(program).name
    if program in (f".venv/bin/{name}", f"./.venv/bin/{name}"):
        return
    assert "/" not in program and env.get(_ACTIVATED), (
        f"{where}: bare `{program}` is not on PATH in a fresh clone; write "
        f"`.venv/bin/{'python' if name.startswith('python') else name}` or run "
        f"`. .venv/bin/activate` in an earlier block"
    )


def crontab_as_shell(block: Block) -> Block:
    """A crontab block as the shell block cron would run: its entries' commands, in order."""
    lines: list[str] = []
    for line in block.text.splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        if re.fullmatch(r"[A-Za-z_]\w*=\S*", entry):
            lines.append(f"export {entry}")
            continue
        fields = entry.split(None, 1 if entry.startswith("@") else 5)
        assert len(fields) == (2 if entry.startswith("@") else 6), (
            f"{block.where}: {entry!r} is not a crontab entry (schedule, then command)"
        )
        lines.append(fields[-1])
    return Block(block.document, block.line, "sh", "\n".join(lines) + "\n", block.not_run)


# --- the test ---------------------------------------------------------------------


def check_block(block: Block, namespace: dict[str, object], env: dict[str, str]) -> None:
    if block.language == "python":
        run_python(block, namespace)
    elif block.language in SHELL:
        run_shell(block, env)
    elif block.language == "crontab":
        run_shell(crontab_as_shell(block), env)
    elif block.language == "json":
        json.loads(block.text)
    elif block.language == "toml":
        tomllib.loads(block.text)
    elif block.language not in DISPLAY:
        pytest.fail(
            f"{block.where}: fence language {block.language!r} is not one the docs test knows; "
            f"use python, console/bash/sh, crontab, json, toml or text"
        )


def export_to_python(shell_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Give the Python blocks what the shell blocks exported (as a REPL in that shell has)."""
    for name in set(os.environ) - set(shell_env):
        monkeypatch.delenv(name)
    for name, value in shell_env.items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)


#: The pages a reader without AWS follows in this order, in one shell each, against the one
#: `dynalease local` the first of them starts: each brings its own endpoint (the environment
#: starts without one) and runs on a server that already has what the earlier pages made.
READER_PATH = ["docs/getting-started.md", "docs/locks.md", "docs/operations.md"]
#: The pages a newcomer follows step by step; each must run again as written on the same
#: server (a reader tries it twice), so nothing in them may fail because it already ran.
#: (docs/getting-started.md is on READER_PATH, which runs twice too.)
NEWCOMER_PAGES = ["README.md", "docs/lambda.md", "docs/semaphores.md"]


# Every other page, once, on a fresh server. The newcomers' pages are not run here as well:
# the first of their two runs below is exactly this test (the same environment, a fresh
# server), and docs/lambda.md alone is a 12 s function timeout each time.
@pytest.mark.parametrize(
    "document",
    [d for d in DOCUMENTS if str(d.relative_to(ROOT)) not in READER_PATH + NEWCOMER_PAGES],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_every_code_block_of_the_document_runs(
    document: Path, docs_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs_server.reset()
    env = {
        "AWS_ENDPOINT_URL_DYNAMODB": docs_server.url,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.chdir(ROOT)
    shell_env = dict(os.environ)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in fenced_blocks(document):
        if block.language == "python":
            export_to_python(shell_env, monkeypatch)
        try:
            check_block(block, namespace, shell_env)
        except (AssertionError, pytest.fail.Exception):
            raise
        except Exception:
            pytest.fail(f"{block.where} failed:\n{traceback.format_exc()}")


def test_the_block_reader_finds_languages_prompts_and_continuations(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```python\nx = 1\n```\n\n````console\n$ dynalease doctor \\\n"
        "    --table locks  # check\nOK  fine\n$ make demo && make test\n````\n```\nplain\n```\n"
    )
    blocks = fenced_blocks(page)
    assert [(b.language, b.line) for b in blocks] == [("python", 2), ("console", 6), ("", 12)]
    listed = tmp_path / "list.md"
    listed.write_text("- step\n\n   ```python\n   if True:\n       y = 2\n   ```\n")
    assert fenced_blocks(listed)[0].text == "if True:\n    y = 2\n"
    assert shell_commands(blocks[1]) == [
        ["dynalease", "doctor", "--table", "locks"],
        ["make", "demo"],
        ["make", "test"],
    ]


def test_a_snippet_line_in_a_block_stands_for_the_included_files_text(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('```python\nbefore = 1\n--8<-- "examples/first_lock.py"\n```\n')
    (block,) = fenced_blocks(page)
    example = (ROOT / "examples" / "first_lock.py").read_text()
    assert block.text == "before = 1\n" + example
    assert "--8<--" not in block.text


def test_crontab_blocks_run_each_entrys_command_with_the_lines_above_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```crontab\n# m h dom mon dow command\nDYNALEASE_TABLE=locks\n"
        "*/5 * * * *  dynalease run --key a -- true\n@daily dynalease doctor\n```\n"
    )
    (block,) = fenced_blocks(page)
    assert shell_commands(crontab_as_shell(block)) == [
        ["export", "DYNALEASE_TABLE=locks"],
        ["dynalease", "run", "--key", "a", "--", "true"],
        ["dynalease", "doctor"],
    ]


@pytest.mark.parametrize(
    ("language", "text", "complaint"),
    [
        ("sh", "make deploy-everything\n", "no Makefile target ['deploy-everything']"),
        ("console", "$ pip install 'dynalease[turbo]'\n", "no extra 'turbo'"),
        ("bash", ".venv/bin/python -m dynalease.nope\n", "no module 'dynalease.nope'"),
        ("sh", ".venv/bin/python examples/missing.py\n", "no file 'examples/missing.py'"),
        ("yaml", "a: 1\n", "fence language 'yaml' is not one the docs test knows"),
        ("console", "$ aws s3 ls\n", "`aws s3 ls` is neither run nor checked"),
        ("sh", "python infra/app.py\n", "bare `python` is not on PATH in a fresh clone"),
        ("console", "$ dynalease doctor --table t\n", "bare `dynalease` is not on PATH"),
        ("sh", "source venv/bin/activate\n", "only `. .venv/bin/activate` is known"),
    ],
)
def test_stale_commands_and_unknown_languages_fail_the_document(
    language: str, text: str, complaint: str
) -> None:
    block = Block(ROOT / "README.md", 1, language, text)
    with pytest.raises((AssertionError, pytest.fail.Exception), match=re.escape(complaint)):
        check_block(block, {}, dict(os.environ))


@pytest.mark.parametrize("page", NEWCOMER_PAGES)
def test_a_newcomers_page_runs_twice_in_order_on_the_same_server(
    page: str, docs_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs_server.reset()
    env = {
        "AWS_ENDPOINT_URL_DYNAMODB": docs_server.url,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.chdir(ROOT)
    for run in ("first", "second"):
        namespace: dict[str, object] = {"__name__": "__docs__"}
        shell_env = dict(os.environ)
        for block in fenced_blocks(ROOT / page):
            if block.language == "python":
                export_to_python(shell_env, monkeypatch)
            try:
                check_block(block, namespace, shell_env)
            except (AssertionError, pytest.fail.Exception) as failure:
                pytest.fail(f"on the {run} run: {failure}")
            except Exception:
                pytest.fail(f"{block.where} failed on the {run} run:\n{traceback.format_exc()}")


#: Where a reader's requests go before a page exports an endpoint: a loopback port nothing
#: listens on (discard), so a page that forgets the endpoint fails here instead of sending
#: its requests to AWS.
_NOWHERE = "http://127.0.0.1:9"


def test_the_readers_path_runs_in_order_twice_on_one_local_server_each_page_with_its_endpoint(
    docs_server: LocalServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    docs_server.reset()
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", _NOWHERE)
    monkeypatch.chdir(ROOT)
    reader = dict(os.environ)
    for run in ("first", "second"):
        for page in READER_PATH:
            namespace: dict[str, object] = {"__name__": "__docs__"}
            shell_env = {**reader, _SERVER: docs_server.url}
            started = False
            for block in fenced_blocks(ROOT / page):
                if block.language == "python":
                    export_to_python(shell_env, monkeypatch)
                try:
                    check_block(block, namespace, shell_env)
                except (AssertionError, pytest.fail.Exception) as failure:
                    pytest.fail(f"on the {run} run: {failure}")
                except Exception:
                    pytest.fail(
                        f"{block.where} failed on the {run} run (a reader's shell has no "
                        "endpoint until the page exports the one `dynalease local` prints):\n"
                        f"{traceback.format_exc()}"
                    )
                started = started or _LOCAL in shell_env
            assert started, f"{page} never starts `dynalease local` for a reader without AWS"
            assert shell_env.get("AWS_ENDPOINT_URL_DYNAMODB") == docs_server.url, (
                f"{page} never exports the endpoint `dynalease local` prints"
            )


def test_a_block_marked_not_run_and_an_activated_venv_are_accepted(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not run by the docs tests: needs an AWS account -->\n"
        "```console\n$ aws s3 ls\n```\n\n```sh\n. .venv/bin/activate\npython -m benchmarks\n```\n"
    )
    marked, activating = (replace(b, document=ROOT / "README.md") for b in fenced_blocks(page))
    assert marked.not_run == "needs an AWS account"
    assert activating.not_run is None
    env = dict(os.environ)
    env.pop(_ACTIVATED, None)
    check_block(marked, {}, env)
    check_block(activating, {}, env)
    assert env[_ACTIVATED] == "1"
