"""The same handler over pydynox 1.8's sync ``distributed_lock`` decorator, with Powertools' Logger.

pydynox's client is made at module level, as its documentation shows, from
the same environment the dynalease handler reads.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger
from pydynox import DynamoDBClient
from pydynox.lock import distributed_lock

logger = Logger(service="bench-cold")
client = DynamoDBClient(endpoint_url=os.environ["AWS_ENDPOINT_URL_DYNAMODB"])


@distributed_lock(client, table=os.environ["DYNALEASE_TABLE"], key="customer:{customer_id}")
def synchronize(customer_id: str) -> str:
    return f"customer:{customer_id}"


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"customer_id": event["customer_id"], "lock_key": synchronize(event["customer_id"])}
