"""Keys, owner tokens and control characters in error messages and log lines.

Lock errors end up where logs do (Lambda logs an unhandled error, returns it to
the invoker and records it in traces): their messages follow the log lines' key
rule, and never carry another holder's owner token. Text log lines cannot be
split by a key with a newline.
"""

from __future__ import annotations

import hashlib
import hmac
import logging

import pytest

from dynalease._redact import shown_url
from dynalease.constants import ENV_LOG_KEY_SECRET, ENV_LOG_KEYS
from dynalease.exceptions import LockNotAcquired
from dynalease.lock import SyncDistributedLock
from dynalease.metrics import LockMetrics
from dynalease.middleware import key_hash
from dynalease.semaphore import SyncDistributedSemaphore
from dynalease.testing import MemoryBackend

KEY = "customer:jane.doe@example.com"


def contended(backend: MemoryBackend, permits: int = 1) -> tuple[LockNotAcquired, list[str]]:
    """The error of a guard that finds ``KEY`` fully held, and the holders' owner tokens."""
    options = {"table": "locks", "key": KEY, "wait_timeout": 0}
    make = (
        (lambda: SyncDistributedLock(backend.client, **options))  # type: ignore[arg-type]
        if permits == 1
        else (lambda: SyncDistributedSemaphore(backend.client, permits=permits, **options))  # type: ignore[arg-type]
    )
    holders = [make() for _ in range(permits)]
    for holder in holders:
        holder.__enter__()
    try:
        with pytest.raises(LockNotAcquired) as raised, make():
            pass
    finally:
        for holder in holders:
            holder.__exit__(None, None, None)
    return raised.value, [holder.owner for holder in holders]


@pytest.mark.parametrize("permits", [1, 3])
def test_a_lock_error_names_the_key_by_its_hash_and_no_other_owner(
    monkeypatch: pytest.MonkeyPatch, permits: int
) -> None:
    monkeypatch.delenv(ENV_LOG_KEYS, raising=False)
    monkeypatch.delenv(ENV_LOG_KEY_SECRET, raising=False)
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks")
        error, owners = contended(backend, permits)
    for text in (str(error), repr(error)):
        assert KEY not in text and "jane" not in text
        assert f"key_hash={key_hash(KEY)}" in text
        assert not any(owner in text for owner in owners)
    assert error.key == KEY  # for code: the key itself


def test_with_dynalease_log_keys_key_the_message_names_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_LOG_KEYS, "key")
    with MemoryBackend() as backend:
        backend.client.sync_create_table("locks")
        error, owners = contended(backend)
    assert repr(KEY) in str(error) and "key_hash" not in str(error)
    assert not any(owner in str(error) for owner in owners)


def test_a_deployment_secret_keys_the_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_LOG_KEY_SECRET, raising=False)
    plain = key_hash(KEY)
    assert plain == hashlib.sha256(KEY.encode()).hexdigest()[:16]
    monkeypatch.setenv(ENV_LOG_KEY_SECRET, "per-deployment")
    keyed = hmac.new(b"per-deployment", KEY.encode(), hashlib.sha256).hexdigest()[:16]
    assert key_hash(KEY) == keyed != plain


@pytest.mark.parametrize("log_key", ["key", "hash"])
def test_a_key_with_a_newline_cannot_forge_a_middleware_log_line(
    caplog: pytest.LogCaptureFixture, log_key: str
) -> None:
    from dynalease._lambda.report import Reporter

    forged = (
        "customer:42 wait_ms=0.0\nERROR dynalease.middleware dynalease lock released: "
        "table=payments key=admin\x1b[2K"
    )
    reporter = Reporter(template="customer:{id}", logger=None, metrics=None, log_key=log_key)
    with caplog.at_level(logging.DEBUG, logger="dynalease.middleware"):
        reporter.not_acquired("locks", forged, LockMetrics(), 5.0)
        reporter.finished("locks\n", forged, LockMetrics(), 1.0)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2
    for line in lines:
        assert "\n" not in line and "\x1b" not in line
    if log_key == "key":
        # Still readable: escaped, and quoted as logfmt quotes (a backslash doubled).
        assert 'key="customer:42 wait_ms=0.0\\\\nERROR' in lines[0]


def test_a_url_is_shown_without_its_user_info_path_or_query() -> None:
    hidden = "(its user info, path or query not shown)"
    assert shown_url("http://user:pa55word@127.0.0.1:8000/") == f"http://127.0.0.1:8000 {hidden}"
    assert shown_url("https://h.example/x?token=t") == f"https://h.example {hidden}"
    assert shown_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/"  # nothing to hide
    assert shown_url("http://[::1") == "(an unparsable URL)"


def _fields(line: str) -> dict[str, str]:
    """A logfmt line's fields as a logfmt reader splits them (quoted values unescaped)."""
    fields, at = {}, line.index(": ") + 2
    while at < len(line):
        name, _, rest = line[at:].partition("=")
        if rest.startswith('"'):
            value, index = "", 1
            while rest[index] != '"':
                if rest[index] == "\\":
                    index += 1
                value += rest[index]
                index += 1
            consumed = index + 1
        else:
            value = rest.split(" ", 1)[0]
            consumed = len(value)
        fields[name] = value
        at += len(name) + 1 + consumed + 1
    return fields


@pytest.mark.parametrize(
    "key",
    [
        "customer:42 wait_ms=0.0",
        'customer:42" wait_ms="0.0',
        'customer:42\\" wait_ms=0.0 x="',
        "customer:42=",
    ],
)
def test_a_key_with_spaces_or_quotes_cannot_add_a_field_to_a_middleware_log_line(
    caplog: pytest.LogCaptureFixture, key: str
) -> None:
    from dynalease._lambda.report import Reporter

    reporter = Reporter(template="customer:{id}", logger=None, metrics=None, log_key="key")
    with caplog.at_level(logging.DEBUG, logger="dynalease.middleware"):
        reporter.finished("locks", key, LockMetrics(wait_ms=12.5), 1.0)
    [line] = [record.getMessage() for record in caplog.records]
    fields = _fields(line)
    assert fields["key"] == key
    assert fields["wait_ms"] == "12.5"
    names = ["table", "template", "key", "wait_ms", "renewals", "held_ms", "requests"]
    assert list(fields) == names
