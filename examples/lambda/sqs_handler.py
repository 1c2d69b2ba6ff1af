"""SQS: each message is processed under the lock of its customer.

Messages carry JSON bodies such as ``{"customer_id": "c-1001", ...}``. A message
whose customer is locked elsewhere (another batch, an ECS worker using
``distributed_lock(key="customer:{customer_id}")``) waits up to 2 s, then is
reported in ``batchItemFailures`` and comes back after the visibility timeout;
the rest of the batch is acknowledged.

Event source mapping: enable ``ReportBatchItemFailures``. Function timeout: at
least the batch size x (wait + reserve) plus the 10 s cleanup budget of a 30 s
lease; a record that no longer fits fails at once, without a request.
Environment: ``DYNALEASE_TABLE``.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from dynalease.middleware import current_lock, lock_record

logger = Logger(service="customer-sync")
processor = BatchProcessor(event_type=EventType.SQS)


@lock_record(
    key="customer:{customer_id}",
    fields={"customer_id": "powertools_json(body).customer_id"},
    wait_timeout=2,
    reserve_time=5,
    logger=logger,
)
def record_handler(record: SQSRecord) -> str:
    order = json.loads(record.body)
    # ... rebuild the customer's summary from the order ...
    current_lock().raise_if_lost()  # still ours before reporting the work as done
    return f"synchronized {order['customer_id']} for {order['order_id']}"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
