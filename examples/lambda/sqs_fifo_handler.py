"""SQS FIFO: per-customer locks on top of FIFO message groups.

FIFO already orders one message group within this queue; the lock also keeps
out everyone else working on the customer (other queues, ECS workers, cron
jobs). With ``skip_group_on_error=True`` a failed or locked message fails only
the rest of its own group, which keeps FIFO order: the group is retried from
the failed message, while other groups go on.

Event source mapping: enable ``ReportBatchItemFailures``. Environment:
``DYNALEASE_TABLE``.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from dynalease.middleware import lock_record

processor = SqsFifoPartialProcessor(skip_group_on_error=True)


@lock_record(
    key="customer:{customer_id}",
    fields={"customer_id": "powertools_json(body).customer_id"},
    wait_timeout=2,
    reserve_time=5,
)
def record_handler(record: SQSRecord) -> str:
    order = json.loads(record.body)
    # ... apply the order to the customer, in the group's order ...
    return f"applied {order['order_id']} to {order['customer_id']}"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
