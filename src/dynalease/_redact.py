"""How lock keys and caller data appear in log lines and exception messages.

Keys often carry personal data, so a key is named by its hash (:func:`key_hash`,
keyed by ``DYNALEASE_LOG_KEY_SECRET`` when set) unless ``DYNALEASE_LOG_KEYS=key``;
exceptions keep the plain key in their ``key`` attribute. Text log lines escape
control characters (:func:`escaped`), so a key cannot start a forged line.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from urllib.parse import urlsplit  # loaded by Powertools, and by every lock's transport

from .constants import ENV_LOG_KEY_SECRET, ENV_LOG_KEYS

__all__ = ["escaped", "key_hash", "log_keys", "logged_key", "shown_in_message", "shown_url"]


def key_hash(key: str) -> str:
    """The short hash logged for ``key``: 16 hex digits of its SHA-256 (or keyed HMAC).

    With ``DYNALEASE_LOG_KEY_SECRET`` set, an HMAC-SHA256 of the key under that
    secret. Compute it for a key you know to find its log lines::

        >>> key_hash("customer:123")  # without DYNALEASE_LOG_KEY_SECRET
        '02ec19c58d54ce98'
    """
    data = key.encode("utf-8", "surrogatepass")
    secret = os.environ.get(ENV_LOG_KEY_SECRET, "")
    if secret:
        return hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()[:16]
    return hashlib.sha256(data).hexdigest()[:16]


def log_keys() -> str:
    """``"key"`` when ``DYNALEASE_LOG_KEYS=key``, else ``"hash"``; read each call: it can change."""
    return "key" if os.environ.get(ENV_LOG_KEYS, "").strip().lower() == "key" else "hash"


def logged_key(key: str) -> str:
    """How a log line or a message names ``key``: ``key_hash=<16 hex>``, or the key's repr."""
    return repr(key) if log_keys() == "key" else f"key_hash={key_hash(key)}"


def shown_in_message(message: str, key: str | None) -> str:
    """``message`` (which names ``key`` as its repr) with the key as :func:`logged_key` names it."""
    if key is None or log_keys() == "key":
        return message
    return message.replace(repr(key), logged_key(key))


def shown_url(url: str) -> str:
    """``url`` as a message, a ``repr`` or a span shows it: scheme, host and port only when it
    has user info, a path or a query, which may hold a password or a token::

        >>> shown_url("http://user:secret@127.0.0.1:8000/")
        'http://127.0.0.1:8000 (its user info, path or query not shown)'
    """
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unparsable URL)"
    if not (parts.username or parts.password or parts.query or parts.path not in ("", "/")):
        return url
    return f"{parts.scheme}://{parts.hostname or ''}{port} (its user info, path or query not shown)"


def escaped(text: str) -> str:
    """``text`` with control characters (newlines, escape sequences ...) as ``\\x..`` escapes."""
    if text.isprintable():
        return text
    return "".join(
        character if character.isprintable() else repr(character)[1:-1] for character in text
    )
