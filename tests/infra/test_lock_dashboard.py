"""``LockTable(..., dashboard=True)``: the dashboard, its three alarms and Contributor
Insights, asserted on the synthesized template."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from dynalease.cdk import LockTable


@pytest.fixture(scope="module")
def template() -> assertions.Template:
    app = cdk.App()
    stack = cdk.Stack(app, "Watched")
    LockTable(
        stack,
        "Locks",
        dashboard=True,
        metrics_namespace="Orders",
        metrics_service="orders-sync",
        wait_p99_alarm_ms=2_000,
        contributor_insights=True,
    )
    return assertions.Template.from_stack(stack)


def _alarm(template: assertions.Template, metric: str) -> dict[str, Any]:
    alarms = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": metric}}
    )
    assert len(alarms) == 1, f"one alarm on {metric}"
    properties: dict[str, Any] = next(iter(alarms.values()))["Properties"]
    return properties


def test_three_alarms_on_the_middlewares_metrics_with_the_defaults(
    template: assertions.Template,
) -> None:
    template.resource_count_is("AWS::CloudWatch::Alarm", 3)
    lost = _alarm(template, "LockLost")
    assert lost["Namespace"] == "Orders"
    assert lost["Dimensions"] == [{"Name": "service", "Value": "orders-sync"}]
    assert lost["Threshold"] == 0 and lost["ComparisonOperator"] == "GreaterThanThreshold"
    assert lost["TreatMissingData"] == "notBreaching"
    throttled = _alarm(template, "LockThrottled")
    assert throttled["Threshold"] == 0
    wait = _alarm(template, "LockWaitMs")
    assert wait["ExtendedStatistic"] == "p99" and wait["Threshold"] == 2_000
    assert wait["EvaluationPeriods"] == 3


def test_the_dashboard_shows_acquisitions_contention_wait_losses_throttles_and_capacity(
    template: assertions.Template,
) -> None:
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    body = json.dumps(next(iter(template.find_resources("AWS::CloudWatch::Dashboard").values())))
    for shown in (
        "LockAcquired",
        "LockContended",
        "LockContention",
        "LockTakeover",
        "p50",
        "p99",
        "LockLost",
        "LockThrottled",
        "ThrottledRequests",
        "ConsumedReadCapacityUnits",
        "ConsumedWriteCapacityUnits",
    ):
        assert shown in body, shown


def test_contributor_insights_watches_throttled_keys_only(template: assertions.Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"ContributorInsightsSpecification": {"Enabled": True, "Mode": "THROTTLED_KEYS"}},
    )


def test_without_dashboard_there_is_no_dashboard_alarm_or_insights() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Plain")
    assert LockTable(stack, "Locks").dashboard is None
    plain = assertions.Template.from_stack(stack)
    plain.resource_count_is("AWS::CloudWatch::Dashboard", 0)
    plain.resource_count_is("AWS::CloudWatch::Alarm", 0)
    plain.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"ContributorInsightsSpecification": assertions.Match.absent()},
    )


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"dashboard": "yes"}, "dashboard must be True or False"),
        ({"dashboard": True, "metrics_namespace": ""}, "metrics_namespace must name"),
        ({"dashboard": True, "wait_p99_alarm_ms": 0}, "wait_p99_alarm_ms must be a positive"),
    ],
)
def test_misuse_fails_at_construction(options: dict[str, Any], words: str) -> None:
    with pytest.raises((TypeError, ValueError), match=words):
        LockTable(cdk.Stack(cdk.App(), "Misused"), "Locks", **options)
