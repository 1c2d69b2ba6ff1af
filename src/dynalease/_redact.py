"""How lock keys and caller data appear in log lines and exception messages.

Keys often carry personal data (``customer:jane@example.com``). By default a key
is named by its hash (``key_hash=<16 hex digits>``) in every log line and in every
exception message; ``DYNALEASE_LOG_KEYS=key`` shows keys instead. The exception
objects keep the plain key in their ``key`` attribute for code.

The hash is the first 16 hex digits of the key's SHA-256: pseudonymous, not
anonymous. Anyone who can guess the shape of a key (``customer:{id}`` with a
numeric id) can hash every candidate and find it in seconds. Set
``DYNALEASE_LOG_KEY_SECRET`` (per deployment, kept like any secret) to make it an
HMAC-SHA256 under that secret instead: the same key still gives the same hash in
that deployment, and without the secret the hash cannot be reversed by guessing.

Text log lines escape control characters in what they carry (:func:`escaped`), so
a key or a message cannot start a forged line.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from .constants import ENV_LOG_KEY_SECRET, ENV_LOG_KEYS

__all__ = ["escaped", "key_hash", "log_keys", "logged_key", "shown_in_message"]


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
    """``"key"`` when ``DYNALEASE_LOG_KEYS=key`` asks for keys in log lines, else ``"hash"``.

    Read each time: log lines and errors are rare, and a test or a process may change it.
    """
    return "key" if os.environ.get(ENV_LOG_KEYS, "").strip().lower() == "key" else "hash"


def logged_key(key: str) -> str:
    """How a log line or a message names ``key``: ``key_hash=<16 hex>``, or the key's repr."""
    return repr(key) if log_keys() == "key" else f"key_hash={key_hash(key)}"


def shown_in_message(message: str, key: str | None) -> str:
    """``message`` (which names ``key`` as its repr) with the key as :func:`logged_key` names it."""
    if key is None or log_keys() == "key":
        return message
    return message.replace(repr(key), logged_key(key))


def escaped(text: str) -> str:
    """``text`` with control characters (newlines, escape sequences ...) as ``\\x..`` escapes."""
    if text.isprintable():
        return text
    return "".join(
        character if character.isprintable() else repr(character)[1:-1] for character in text
    )
