"""The doctor accepts TTL on single flight's result attribute, which no lock row carries."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from support.cli_runner import Result
from support.servers import raw_dynamodb

from dynalease._results import EXPIRES_ATTRIBUTE


def test_ttl_on_the_single_flight_result_attribute_is_ok(
    dynalease: Callable[..., Result], endpoint: str
) -> None:
    name = f"cli-flight-{uuid.uuid4().hex[:8]}"
    raw = raw_dynamodb(endpoint)
    raw.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    raw.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": EXPIRES_ATTRIBUTE},
    )
    result = dynalease("doctor", "--table", name, "--endpoint", endpoint)
    assert result.code == 0, result.out + result.err
    assert "TTL: enabled on 'dynalease_expires' (single-flight results only)" in result.out
