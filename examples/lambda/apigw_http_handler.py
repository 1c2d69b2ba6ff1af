"""API Gateway HTTP API (payload 2.0): the key comes from the JSON body.

``powertools_json(body)`` parses the body inside the JMESPath expression, so
``{"customer_id": "c-1001"}`` posted to ``/customers/sync`` locks
``customer:c-1001``. Contention answers ``409`` through ``on_contention``, and
``LockUnavailable`` (DynamoDB answered none of the lock's requests) ``503``.

Environment: ``DYNALEASE_TABLE``. Function timeout: above 9 s (6 s cleanup
budget of the 10 s lease + 3 s reserved); HTTP APIs stop waiting after 30 s.
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
                "content-type": "application/json",
                "retry-after": str(UNAVAILABLE_RETRY_AFTER_S),
            },
            "body": json.dumps({"message": "temporarily unavailable; retry later"}),
        }
    return {
        "statusCode": 409,
        "headers": {"content-type": "application/json", "retry-after": "1"},
        "body": json.dumps({"message": "this customer is being synchronized; retry shortly"}),
    }


@lock_handler(
    key="customer:{customer_id}",
    fields={"customer_id": "powertools_json(body).customer_id"},
    lease_duration=10,
    wait_timeout=1,
    reserve_time=3,
    on_contention=conflict,
)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = json.loads(event["body"])
    # ... synchronize the customer ...
    return {
        "statusCode": 200,
        "headers": {"content-type": "application/json"},
        "body": json.dumps({"customer_id": request["customer_id"], "status": "synchronized"}),
    }
