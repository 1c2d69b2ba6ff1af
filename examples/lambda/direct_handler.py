"""Direct invocation (``aws lambda invoke``, Step Functions): the event is the arguments.

Without ``fields`` each placeholder names a top-level event key, so
``{"customer_id": "c-1001"}`` locks ``customer:c-1001``: the same key an ECS
worker's ``@distributed_lock(client, table=..., key="customer:{customer_id}")``
resolves for ``synchronize("c-1001")``. Stacked with Powertools' Logger and
Metrics: one structured log line and EMF metrics (LockAcquired, LockWaitMs,
LockRenewals, ...) per invocation.

Environment: ``DYNALEASE_TABLE``; ``POWERTOOLS_METRICS_NAMESPACE`` optional.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics

from dynalease.middleware import current_lock, lock_handler

logger = Logger(service="customer-sync")
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "DynaleaseExamples"),
    service="customer-sync",
)


@logger.inject_lambda_context
@metrics.log_metrics
@lock_handler(key="customer:{customer_id}", reserve_time=5, logger=logger, metrics=metrics)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    lease = current_lock()
    # ... the work; long work can check lease.raise_if_lost() between steps ...
    lease.raise_if_lost()
    return {
        "customer_id": event["customer_id"],
        "action": event.get("action", "synchronize"),
        "lock_key": lease.key,
    }
