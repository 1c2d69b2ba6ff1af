"""Names of the environment variables dynalease reads, in one place.

An explicit argument always wins over the environment.
"""

from __future__ import annotations

__all__ = [
    "ENV_ECS_METADATA",
    "ENV_EXTENSIONS_DIR",
    "ENV_FUNCTION_NAME",
    "ENV_FUNCTION_VERSION",
    "ENV_INITIALIZATION_TYPE",
    "ENV_JOURNAL_DIR",
    "ENV_LOG_KEYS",
    "ENV_LOG_KEY_SECRET",
    "ENV_MAX_CONCURRENCY",
    "ENV_RECOVERY_TABLES",
    "ENV_RUNTIME_API",
    "ENV_TABLE",
    "ENV_TRANSPORT",
    "MANAGED_INSTANCES",
    "RECOVERY_EXTENSION",
    "SNAP_START",
]

ENV_TABLE = "DYNALEASE_TABLE"
"""The lock table for the Lambda middleware (the CDK construct sets it)."""

ENV_TRANSPORT = "DYNALEASE_TRANSPORT"
"""Which request path lock requests take: ``lean`` or ``boto``."""

ENV_LOG_KEYS = "DYNALEASE_LOG_KEYS"
"""How log lines name a lock key: ``hash`` (default, a SHA-256 prefix) or ``key`` (the key).

One rule for the engine's log lines, the Lambda middleware's (whose ``log_key=``
argument wins) and the messages of lock errors (whose ``key`` attribute keeps the
key). Any other value counts as ``hash``.
"""

ENV_LOG_KEY_SECRET = "DYNALEASE_LOG_KEY_SECRET"
"""A per-deployment secret that makes the logged key hash an HMAC (unset: plain SHA-256)."""

ENV_RUNTIME_API = "AWS_LAMBDA_RUNTIME_API"
"""Set by Lambda in every sandbox: where the Runtime and Extensions APIs listen."""

ENV_INITIALIZATION_TYPE = "AWS_LAMBDA_INITIALIZATION_TYPE"
"""Set by Lambda: how the environment started (``on-demand``, ``snap-start``,
``lambda-managed-instances``...); read through ``dynalease._compute_modes``, and by
``import dynalease`` itself for SnapStart."""

MANAGED_INSTANCES = "lambda-managed-instances"
"""``AWS_LAMBDA_INITIALIZATION_TYPE`` on Lambda Managed Instances."""

SNAP_START = "snap-start"
"""``AWS_LAMBDA_INITIALIZATION_TYPE`` on SnapStart: the runtime runs its snapshot hooks then."""

ENV_MAX_CONCURRENCY = "AWS_LAMBDA_MAX_CONCURRENCY"
"""Set by Lambda Managed Instances: awslambdaric runs that many runtime worker processes
when it is set (whatever ``AWS_LAMBDA_INITIALIZATION_TYPE`` says)."""

ENV_EXTENSIONS_DIR = "DYNALEASE_EXTENSIONS_DIR"
"""Where external extensions are installed (default ``/opt/extensions``; for tests)."""

ENV_JOURNAL_DIR = "DYNALEASE_JOURNAL_DIR"
"""Where guards journal the rows they may hold (default ``/tmp/dynalease-journal``)."""

ENV_RECOVERY_TABLES = "DYNALEASE_RECOVERY_TABLES"
"""Lock tables besides ``DYNALEASE_TABLE`` whose rows the recovery extension may release,
separated by commas; a journal entry naming any other table is skipped."""

RECOVERY_EXTENSION = "dynalease-recovery"
"""The recovery extension's file name in the extensions directory (and its registered name)."""

ENV_FUNCTION_NAME = "AWS_LAMBDA_FUNCTION_NAME"
"""Set by Lambda: the function's name, written in the holder of the rows its guards hold."""

ENV_FUNCTION_VERSION = "AWS_LAMBDA_FUNCTION_VERSION"
"""Set by Lambda: the function version running (``$LATEST`` or a number), for the holder."""

ENV_ECS_METADATA = "ECS_CONTAINER_METADATA_URI_V4"
"""Set by ECS (and Fargate) in every container: the task metadata endpoint. The task ARN
is behind an HTTP request there, which no acquisition waits for: a holder says ``ecs``."""
