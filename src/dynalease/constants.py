"""Names of the environment variables dynalease reads, in one place.

An explicit argument always wins over the environment.
"""

from __future__ import annotations

__all__ = ["ENV_LOG_KEYS", "ENV_TABLE", "ENV_TRANSPORT"]

ENV_TABLE = "DYNALEASE_TABLE"
"""The lock table for the Lambda middleware (the CDK construct sets it)."""

ENV_TRANSPORT = "DYNALEASE_TRANSPORT"
"""Which request path lock requests take: ``lean`` or ``boto``."""

ENV_LOG_KEYS = "DYNALEASE_LOG_KEYS"
"""How log lines name a lock key: ``hash`` (default, a SHA-256 prefix) or ``key`` (the key).

One rule for the engine's log lines and the Lambda middleware's (whose ``log_key=``
argument wins). Any other value counts as ``hash``. Exceptions always name the key.
"""
