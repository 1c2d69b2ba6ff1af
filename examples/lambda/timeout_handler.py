"""A handler that can outlive its timeout while holding a lock.

Run it with ``dynalease-dev invoke --lifecycle``.

The event says which customer and how long the work takes:
``{"customer_id": "c-1001", "work_s": 30}``. With a 12 s function timeout the
first invocation of ``events/lifecycle-timeout.json`` is killed while it holds
``customer:c-1001`` (30 s lease); the second one, for the same customer, gets
the lock at once when the recovery extension freed the row, and fails with
``LockNotAcquired`` (the row is still there, for 30 s) when it did not.

Environment: ``DYNALEASE_TABLE``. Function timeout: above the 10 s cleanup budget of
the 30 s lease plus the 1 s wait.
"""

from __future__ import annotations

import time
from typing import Any

from dynalease.middleware import current_lock, lock_handler


@lock_handler(key="customer:{customer_id}", wait_timeout=1)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    waited_ms = current_lock().metrics.wait_ms
    time.sleep(float(event.get("work_s", 0)))
    return {"customer_id": event["customer_id"], "waited_ms": round(waited_ms)}
