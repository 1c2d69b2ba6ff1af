"""EventBridge: one lock per event, keyed by the customer in ``detail``.

EventBridge invokes asynchronously, so contention simply raises
``LockNotAcquired``: Lambda retries the event (twice by default, with backoff)
and then sends it to the on-failure destination or DLQ if one is configured.
The wait is whatever the invocation can afford: remaining time minus
``reserve_time`` and the lease's cleanup budget.

Environment: ``DYNALEASE_TABLE``. Function timeout: more than 10 s (cleanup
budget of the 30 s lease) + 10 s reserved for the work.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from dynalease.middleware import lock_handler

logger = Logger(service="customer-sync")


@logger.inject_lambda_context
@lock_handler(
    key="customer:{customer_id}",
    fields={"customer_id": "detail.customer_id"},
    reserve_time=10,
    logger=logger,
)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    customer_id = event["detail"]["customer_id"]
    changed = event["detail"].get("changed", [])
    # ... refresh what depends on the changed fields ...
    return {"customer_id": customer_id, "refreshed": changed}
