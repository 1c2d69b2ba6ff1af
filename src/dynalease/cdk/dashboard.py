"""LockDashboard: the CloudWatch dashboard and alarms of ``LockTable(..., dashboard=True)``.

The lock widgets read the EMF metrics the Lambda middleware emits through the user's
Powertools ``Metrics`` (their namespace and ``service`` dimension); the table widgets
read DynamoDB's own metrics of the table. docs/cdk.md says what each part costs a month.
"""

from __future__ import annotations

import math

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

__all__ = ["LockDashboard"]

_PERIOD = cdk.Duration.minutes(5)
#: The operations lock requests use (the table's throttles of these are the locks').
_LOCK_OPERATIONS = [
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.BATCH_GET_ITEM,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
]


class LockDashboard(Construct):
    """A dashboard of one lock table's locks and capacity, and three alarms.

    The dashboard shows acquisitions, contention, wait p50/p99, losses, throttles and
    consumed capacity; the alarms fire on a lost lock, throttled lock requests and a p99
    wait too long.

    :param table: the lock table.
    :param namespace: the Powertools ``Metrics`` namespace the middleware emits into.
    :param service: the ``service`` dimension of those metrics (Powertools' ``service``).
    :param wait_p99_alarm_ms: the p99 wait that raises the wait alarm (5 minutes, 3 of them).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        namespace: str,
        service: str,
        wait_p99_alarm_ms: float = 5_000.0,
    ) -> None:
        for name, value in (("metrics_namespace", namespace), ("metrics_service", service)):
            if not isinstance(value, str) or not value:
                raise ValueError(
                    f"{name} must name the Powertools Metrics {name.split('_')[1]} the "
                    f"middleware emits with, got {value!r}"
                )
        if (
            isinstance(wait_p99_alarm_ms, bool)
            or not isinstance(wait_p99_alarm_ms, int | float)
            or not math.isfinite(wait_p99_alarm_ms)
            or wait_p99_alarm_ms <= 0
        ):
            raise ValueError(
                f"wait_p99_alarm_ms must be a positive number of milliseconds, got "
                f"{wait_p99_alarm_ms!r}"
            )
        super().__init__(scope, id)

        def lock(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=namespace,
                metric_name=name,
                dimensions_map={"service": service},
                statistic=statistic,
                period=_PERIOD,
            )

        wait_p99 = lock("LockWaitMs", "p99")
        throttled = lock("LockThrottled")

        def alarm(
            id: str, about: str, metric: cloudwatch.Metric, limit: float, periods: int
        ) -> cloudwatch.Alarm:
            return cloudwatch.Alarm(
                self,
                id,
                alarm_description=about,
                metric=metric,
                threshold=limit,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        lost_about = "a dynalease lock was lost while held (taken over or expired)"
        self.losses_alarm = alarm("LossesAlarm", lost_about, lock("LockLost"), 0, 1)
        """Any lost lock in 5 minutes (construct ID ``LossesAlarm``)."""
        throttled_about = "DynamoDB throttled dynalease lock requests (a hot key?)"
        self.throttles_alarm = alarm("ThrottlesAlarm", throttled_about, throttled, 0, 1)
        """Any throttled lock request in 5 minutes (construct ID ``ThrottlesAlarm``)."""
        wait_about = f"p99 wait to acquire a dynalease lock over {wait_p99_alarm_ms:g} ms"
        self.wait_alarm = alarm("WaitP99Alarm", wait_about, wait_p99, wait_p99_alarm_ms, 3)
        """p99 wait over the threshold for 15 minutes (construct ID ``WaitP99Alarm``)."""
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        """The dashboard (construct ID ``Dashboard``)."""
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Acquisitions and contention",
                left=[lock("LockAcquired"), lock("LockContended"), lock("LockContention")],
                right=[lock("LockTakeover"), lock("LockUnavailable")],
            ),
            cloudwatch.GraphWidget(
                title="Wait to acquire (ms)",
                left=[lock("LockWaitMs", "p50"), wait_p99],
            ),
            cloudwatch.GraphWidget(
                title="Losses and throttles",
                left=[lock("LockLost"), throttled],
                right=[
                    table.metric_throttled_requests_for_operations(
                        operations=_LOCK_OPERATIONS, period=_PERIOD
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Consumed capacity",
                left=[
                    table.metric_consumed_read_capacity_units(period=_PERIOD),
                    table.metric_consumed_write_capacity_units(period=_PERIOD),
                ],
            ),
        )
