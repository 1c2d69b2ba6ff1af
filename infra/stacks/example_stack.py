"""ExampleStack: the example handlers behind each event source, with least-privilege roles.

Each function gets its own role (no AWS managed policies) that may write to its
own log group and use the lock table with exactly ``LockTable.grant_lock``'s
actions; event sources add only what they need to deliver (the SQS mappings
receive and delete on their own queue, API Gateway and EventBridge get
resource-based invoke permissions scoped to their API or rule).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from dynalease.cdk import LockTable
from dynalease.cdk.layer import synth_runtime

from .nag import suppress

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "lambda"

#: Construct ID -> module in examples/lambda exposing ``handler(event, context)``.
EXAMPLE_FUNCTIONS: dict[str, str] = {
    "SqsHandler": "sqs_handler",
    "SqsFifoHandler": "sqs_fifo_handler",
    "EventBridgeHandler": "eventbridge_handler",
    "RestApiHandler": "apigw_rest_handler",
    "HttpApiHandler": "apigw_http_handler",
    "DirectHandler": "direct_handler",
}

#: The events the example rule sends to the handler (as in events/eventbridge.json).
EVENT_SOURCE = "com.example.customers"
EVENT_DETAIL_TYPE = "CustomerUpdated"

# Function timeouts (seconds), from each handler's budget: SQS batches of 10 records
# x (2 s wait + 5 s reserve) + the 10 s cleanup budget of a 30 s lease; the API
# handlers stay under API Gateway's 29-30 s integration limit.
_TIMEOUTS: dict[str, int] = {
    "SqsHandler": 90,
    "SqsFifoHandler": 90,
    "EventBridgeHandler": 60,
    "RestApiHandler": 28,
    "HttpApiHandler": 28,
    "DirectHandler": 60,
}
_RETENTION = logs.RetentionDays.ONE_MONTH


@jsii.implements(apigwv2.IAccessLogSettings)
class _HttpAccessLogs:
    """Access log settings for an HTTP API stage (the interface has no concrete class)."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return _access_log_format()


def _access_log_format() -> apigw.AccessLogFormat:
    return apigw.AccessLogFormat.json_with_standard_fields(
        caller=True,
        http_method=True,
        ip=True,
        protocol=True,
        request_time=True,
        resource_path=True,
        response_length=True,
        status=True,
        user=True,
    )


def _log_group(scope: Construct, id: str) -> logs.LogGroup:
    # Example logs are disposable; the lock table and layer live in LockStack.
    return logs.LogGroup(scope, id, retention=_RETENTION, removal_policy=cdk.RemovalPolicy.DESTROY)


def _encrypted_queue(scope: Construct, id: str, **props: Any) -> sqs.Queue:
    return sqs.Queue(
        scope,
        id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        **props,
    )


class ExampleStack(cdk.Stack):
    """The examples in ``examples/lambda`` wired to SQS, EventBridge and API Gateway.

    ``locks`` is the LockStack's table; ``layer_parameter_name`` the SSM parameter
    where LockStack publishes the current layer version ARN.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        locks: LockTable,
        layer_parameter_name: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, id, description="dynalease example handlers behind each event source", **kwargs
        )
        self._locks = locks
        # The layer ARN is read from SSM at deploy time rather than exported: a new
        # layer version replaces the old one, and CloudFormation refuses to change
        # an export another stack uses, so an export would block every layer update.
        self._layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "LockLayer",
            ssm.StringParameter.value_for_string_parameter(self, layer_parameter_name),
        )
        self._code = lambda_.Code.from_asset(
            str(EXAMPLES_DIR), exclude=["__pycache__", "*.pyc", "README*"]
        )
        self.functions: dict[str, lambda_.Function] = {
            id: self._function(id, module) for id, module in EXAMPLE_FUNCTIONS.items()
        }
        self._sqs(self.functions["SqsHandler"], "Queue", fifo=False)
        self._sqs(self.functions["SqsFifoHandler"], "FifoQueue", fifo=True)
        self._eventbridge(self.functions["EventBridgeHandler"])
        self._rest_api(self.functions["RestApiHandler"])
        self._http_api(self.functions["HttpApiHandler"])
        cdk.CfnOutput(
            self,
            "DirectFunctionName",
            value=self.functions["DirectHandler"].function_name,
            description="invoke directly: aws lambda invoke --function-name <this>",
        )

    def _function(self, id: str, module: str) -> lambda_.Function:
        log_group = _log_group(self, f"{id}Logs")
        role = iam.Role(
            self,
            f"{id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{module}: its own log group and the dynalease lock actions only",
        )
        # The log group's ARN (Fn::GetAtt Arn) covers its own streams and nothing else;
        # no CreateLogGroup because the stack creates the group.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        function = lambda_.Function(
            self,
            id,
            # The runtime LockStack's layer is built for (its bytecode is for one version).
            runtime=synth_runtime(),
            architecture=lambda_.Architecture.ARM_64,
            code=self._code,
            handler=f"{module}.handler",
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.seconds(_TIMEOUTS[id]),
            memory_size=256,
            environment={"POWERTOOLS_SERVICE_NAME": "dynalease-examples"},
            description=f"dynalease example: examples/lambda/{module}.py",
        )
        self._locks.configure_function(function, layer=self._layer)
        return function

    def _sqs(self, function: lambda_.Function, id: str, *, fifo: bool) -> None:
        fifo_props: dict[str, Any] = {"fifo": True} if fifo else {}
        dead_letters = _encrypted_queue(
            self, f"{id}DeadLetters", retention_period=cdk.Duration.days(14), **fifo_props
        )
        queue = _encrypted_queue(
            self,
            id,
            # Six times the function timeout, as Lambda recommends for SQS sources.
            visibility_timeout=cdk.Duration.seconds(_TIMEOUTS[function.node.id] * 6),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=3, queue=dead_letters),
            **({"content_based_deduplication": True, **fifo_props} if fifo else {}),
        )
        # Records that could not be locked come back as batchItemFailures and are
        # retried alone; the rest of the batch is acknowledged.
        function.add_event_source(
            sources.SqsEventSource(queue, batch_size=10, report_batch_item_failures=True)
        )
        cdk.CfnOutput(self, f"{id}Url", value=queue.queue_url)

    def _eventbridge(self, function: lambda_.Function) -> None:
        rule = events.Rule(
            self,
            "ExampleRule",
            description=f"{EVENT_DETAIL_TYPE} events from {EVENT_SOURCE} go to the example",
            event_pattern=events.EventPattern(
                source=[EVENT_SOURCE], detail_type=[EVENT_DETAIL_TYPE]
            ),
        )
        dead_letters = _encrypted_queue(
            self, "RuleDeadLetters", retention_period=cdk.Duration.days(14)
        )
        suppress(
            dead_letters,
            "AwsSolutions-SQS3",
            "This queue is the dead-letter queue of the EventBridge rule's Lambda target; "
            "cdk-nag only recognises dead-letter queues of other SQS queues.",
        )
        rule.add_target(
            targets.LambdaFunction(
                function,
                dead_letter_queue=dead_letters,
                retry_attempts=2,
                max_event_age=cdk.Duration.hours(1),
            )
        )

    def _rest_api(self, function: lambda_.Function) -> None:
        api = apigw.RestApi(
            self,
            "RestApi",
            description="dynalease example: REST API (IAM authorization)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Execution logging needs an account-wide CloudWatch role; see the suppression.
            cloud_watch_role=False,
            deploy_options=apigw.StageOptions(
                access_log_destination=apigw.LogGroupLogDestination(
                    _log_group(self, "RestApiAccessLogs")
                ),
                access_log_format=_access_log_format(),
                throttling_rate_limit=20,
                throttling_burst_limit=40,
            ),
        )
        # Required parameters are checked; bodies too wherever a method declares a model.
        validator = api.add_request_validator(
            "RequestValidator", validate_request_parameters=True, validate_request_body=True
        )
        integration = apigw.LambdaIntegration(function)
        # Every path and method reaches the handler, which routes by itself.
        proxy = api.root.add_proxy(any_method=False)
        methods = [
            resource.add_method(
                "ANY",
                integration,
                authorization_type=apigw.AuthorizationType.IAM,
                request_validator=validator,
            )
            for resource in (api.root, proxy)
        ]
        for method in methods:
            suppress(
                method,
                "AwsSolutions-COG4",
                "Callers sign requests with SigV4 (IAM authorization on this method); the "
                "example has no end users, so a Cognito user pool authorizer adds nothing.",
            )
        suppress(
            api.deployment_stage,
            "AwsSolutions-APIG6",
            "Execution logging needs the account-wide API Gateway CloudWatch role, which an "
            "example stack must not change for the whole account; access logs are on instead.",
        )
        suppress(
            api.deployment_stage,
            "AwsSolutions-APIG3",
            "WAF is an account security choice with its own cost; the example API is IAM-"
            "authorized and throttled, and a team deploying it attaches its own web ACL.",
        )
        cdk.CfnOutput(self, "RestApiUrl", value=api.url)

    def _http_api(self, function: lambda_.Function) -> None:
        api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="dynalease example: HTTP API (IAM authorization)",
            default_integration=integrations.HttpLambdaIntegration("Integration", function),
            default_authorizer=authorizers.HttpIamAuthorizer(),
            create_default_stage=False,
        )
        stage = api.add_stage(
            "DefaultStage",
            stage_name="$default",
            auto_deploy=True,
            access_log_settings=_HttpAccessLogs(_log_group(self, "HttpApiAccessLogs")),
            throttle=apigwv2.ThrottleSettings(rate_limit=20, burst_limit=40),
        )
        cdk.CfnOutput(self, "HttpApiUrl", value=stage.url)
