"""LockTable's ``result_expiry``: TTL on the attribute only single-flight result items carry."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from dynalease._results import EXPIRES_ATTRIBUTE
from dynalease.cdk import LockTable
from dynalease.cdk.table import RESULT_EXPIRY_ATTRIBUTE


def _table(**props: object) -> dict[str, object]:
    stack = cdk.Stack(cdk.App(), "Stack")
    LockTable(stack, "Locks", **props)  # type: ignore[arg-type]
    resources = assertions.Template.from_stack(stack).find_resources("AWS::DynamoDB::Table")
    (table,) = resources.values()
    properties: dict[str, object] = table["Properties"]
    return properties


def test_result_expiry_enables_ttl_on_the_result_items_attribute_only() -> None:
    assert RESULT_EXPIRY_ATTRIBUTE == EXPIRES_ATTRIBUTE == "dynalease_expires"
    assert _table(result_expiry=True)["TimeToLiveSpecification"] == {
        "AttributeName": "dynalease_expires",
        "Enabled": True,
    }
    assert "TimeToLiveSpecification" not in _table()


def test_result_expiry_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="result_expiry must be True or False"):
        _table(result_expiry="yes")
