"""Which Lambda compute mode this process runs in, read from what Lambda sets: one answer
for the recovery extension and the middleware alike.

Lambda Managed Instances give two signals, and awslambdaric runs its concurrent workers on
``AWS_LAMBDA_MAX_CONCURRENCY`` alone; either counts here, so a platform whose
``AWS_LAMBDA_INITIALIZATION_TYPE`` reads otherwise still gets the worker watch.
``import dynalease`` tests for SnapStart itself (see its ``__init__``), to import nothing
more elsewhere.
"""

from __future__ import annotations

import functools
import logging
import os

from .constants import ENV_INITIALIZATION_TYPE, ENV_MAX_CONCURRENCY, MANAGED_INSTANCES, SNAP_START

__all__ = ["init_runs_ahead", "initialization_type", "managed_instances"]

log = logging.getLogger("dynalease")

#: Init types whose init runs before any request is routed to the environment.
_INIT_AHEAD_OF_REQUESTS = frozenset({"provisioned-concurrency", SNAP_START, MANAGED_INSTANCES})


def initialization_type() -> str:
    """``AWS_LAMBDA_INITIALIZATION_TYPE`` in lower case, ``""`` when unset."""
    return os.environ.get(ENV_INITIALIZATION_TYPE, "").strip().lower()


def managed_instances() -> bool:
    """Whether this process runs on Lambda Managed Instances: one runtime worker process per
    concurrent invocation, where a worker that dies sends no event.

    True when ``AWS_LAMBDA_MAX_CONCURRENCY`` is set (as awslambdaric reads it: set at all)
    or ``AWS_LAMBDA_INITIALIZATION_TYPE`` is ``lambda-managed-instances``. The answer is
    logged once per process with the values it came from, on logger ``dynalease``: at INFO
    when it is Managed Instances (the recovery extension then watches its workers), at DEBUG
    otherwise (nothing changes).
    """
    concurrency = os.environ.get(ENV_MAX_CONCURRENCY)
    init_type = initialization_type()
    answer = concurrency is not None or init_type == MANAGED_INSTANCES
    _tell(answer, concurrency, init_type)
    return answer


def init_runs_ahead() -> bool:
    """Whether init runs before any request is routed here (provisioned concurrency,
    SnapStart, Managed Instances): work moved into init is then off every request's path."""
    return managed_instances() or initialization_type() in _INIT_AHEAD_OF_REQUESTS


@functools.cache
def _tell(answer: bool, concurrency: str | None, init_type: str) -> None:
    # Cached on its arguments: once per process, and again only if the environment changes.
    mode = "Lambda Managed Instances" if answer else "not Lambda Managed Instances"
    shown = "unset" if concurrency is None else repr(concurrency)
    log.log(
        logging.INFO if answer else logging.DEBUG,
        "dynalease: %s (%s %s, %s %r)",
        mode,
        ENV_MAX_CONCURRENCY,
        shown,
        ENV_INITIALIZATION_TYPE,
        init_type,
    )
