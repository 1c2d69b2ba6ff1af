"""A Lambda handler under ``lock_handler`` with Powertools' Logger, as the examples write it.

The client comes from the environment (``AWS_ENDPOINT_URL_DYNAMODB``, the keys,
the Region) and the table from ``DYNALEASE_TABLE``, as in a deployed function.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from dynalease.middleware import current_lock, lock_handler

logger = Logger(service="bench-cold")


@logger.inject_lambda_context
@lock_handler(key="customer:{customer_id}", reserve_time=1, logger=logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    lease = current_lock()
    return {"customer_id": event["customer_id"], "lock_key": lease.key}
