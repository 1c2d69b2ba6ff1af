"""API Gateway REST API (payload 1.0): 409 while the customer is locked, 503 in an outage.

A caller is waiting on the other end, so the wait is short (1 s) and
contention becomes ``409`` with ``Retry-After`` instead of an error, through
``on_contention``. When DynamoDB answered none of the lock's requests
(``LockUnavailable``: unreachable, timing out, 5xx, throttled), the answer is
``503`` instead: the service is down, the customer is not busy. The key comes
from the path: ``/customers/{customer_id}/sync``.

Environment: ``DYNALEASE_TABLE``. The 10 s lease has a 6 s cleanup budget; with
3 s reserved for the work the function needs a timeout above 9 s (REST APIs
stop waiting after 29 s).
"""

from __future__ import annotations

import json
from typing import Any

from dynalease.exceptions import LockNotAcquired, LockUnavailable
from dynalease.middleware import lock_handler

#: Seconds a client should wait after a 503. Longer than contention's 1 s: an outage
#: (DynamoDB or the network path to it) seldom clears in a second, and each retry
#: spends the whole wait on failing requests; short enough to recover soon after.
UNAVAILABLE_RETRY_AFTER_S = 5


def conflict(event: dict[str, Any], context: Any, error: LockNotAcquired) -> dict[str, Any]:
    if isinstance(error, LockUnavailable):  # DynamoDB answered no request: not contention
        return {
            "statusCode": 503,
            "headers": {
                "Content-Type": "application/json",
                "Retry-After": str(UNAVAILABLE_RETRY_AFTER_S),
            },
            "body": json.dumps({"message": "temporarily unavailable; retry later"}),
        }
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
