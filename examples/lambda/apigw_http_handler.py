"""API Gateway HTTP API (payload 2.0): the key comes from the JSON body.

``powertools_json(body)`` parses the body inside the JMESPath expression, so
``{"customer_id": "c-1001"}`` posted to ``/customers/sync`` locks
``customer:c-1001``. Contention answers ``409`` through ``on_contention``.

Environment: ``DYNALEASE_TABLE``. Function timeout: above 9 s (6 s cleanup
budget of the 10 s lease + 3 s reserved); HTTP APIs stop waiting after 30 s.
"""

from __future__ import annotations

import json
from typing import Any

from dynalease.exceptions import LockNotAcquired
from dynalease.middleware import lock_handler


def conflict(event: dict[str, Any], context: Any, error: LockNotAcquired) -> dict[str, Any]:
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
