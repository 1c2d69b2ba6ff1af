"""API Gateway REST API (payload 1.0): 409 Conflict while the customer is locked.

A caller is waiting on the other end, so the wait is short (1 s) and
contention becomes ``409`` with ``Retry-After`` instead of an error, through
``on_contention``. The key comes from the path: ``/customers/{customer_id}/sync``.

Environment: ``DYNALEASE_TABLE``. The 10 s lease has a 6 s cleanup budget; with
3 s reserved for the work the function needs a timeout above 9 s (REST APIs
stop waiting after 29 s).
"""

from __future__ import annotations

import json
from typing import Any

from dynalease.exceptions import LockNotAcquired
from dynalease.middleware import lock_handler


def conflict(event: dict[str, Any], context: Any, error: LockNotAcquired) -> dict[str, Any]:
    return {
        "statusCode": 409,
        "headers": {"Content-Type": "application/json", "Retry-After": "1"},
        "body": json.dumps({"message": "this customer is being synchronized; retry shortly"}),
    }


@lock_handler(
    key="customer:{customer_id}",
    fields={"customer_id": "pathParameters.customer_id"},
    lease_duration=10,
    wait_timeout=1,
    reserve_time=3,
    on_contention=conflict,
)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    customer_id = event["pathParameters"]["customer_id"]
    # ... synchronize the customer ...
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"customer_id": customer_id, "status": "synchronized"}),
    }
