"""Names of the environment variables dynalease reads, in one place.

An explicit argument always wins over the environment.
"""

from __future__ import annotations

__all__ = ["ENV_TABLE", "ENV_TRANSPORT"]

ENV_TABLE = "DYNALEASE_TABLE"
"""The lock table for the Lambda middleware (the CDK construct sets it)."""

ENV_TRANSPORT = "DYNALEASE_TRANSPORT"
"""Which request path lock requests take: ``lean`` or ``boto``."""
