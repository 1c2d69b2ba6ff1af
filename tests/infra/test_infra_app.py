"""The infra app: ``python infra/app.py`` synthesizes both stacks, least privilege, nag-clean."""

from __future__ import annotations

import ast
import json
from typing import Any

from infra_helpers import EXAMPLE_STACK, LOCK_STACK, ROOT, Assembly, policy_statements, strings_in

LOCK_ACTIONS = sorted(
    f"dynamodb:{action}"
    for action in (
        "GetItem",
        "BatchGetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "ConditionCheckItem",
    )
)
SQS_CONSUME = sorted(
    f"sqs:{action}"
    for action in (
        "ReceiveMessage",
        "ChangeMessageVisibility",
        "GetQueueUrl",
        "DeleteMessage",
        "GetQueueAttributes",
    )
)
HANDLERS = {
    "sqs_handler",
    "sqs_fifo_handler",
    "eventbridge_handler",
    "apigw_rest_handler",
    "apigw_http_handler",
    "direct_handler",
}
# Every suppression is deliberate: a new one must be added here with its reason in the stack.
EXPECTED_SUPPRESSIONS = {
    "AwsSolutions-SQS3",
    "AwsSolutions-COG4",
    "AwsSolutions-APIG3",
    "AwsSolutions-APIG6",
}


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return sorted([actions] if isinstance(actions, str) else actions)


def _functions(assembly: Assembly) -> dict[str, dict[str, Any]]:
    return assembly.resources(EXAMPLE_STACK, "AWS::Lambda::Function")


def test_python_infra_app_synthesizes_both_stacks_and_their_assets(assembly: Assembly) -> None:
    artifacts = assembly.manifest["artifacts"]
    assert artifacts[LOCK_STACK]["type"] == "aws:cloudformation:stack"
    assert artifacts[EXAMPLE_STACK]["type"] == "aws:cloudformation:stack"
    assert assembly.layer_asset().is_file()
    assert LOCK_STACK in artifacts[EXAMPLE_STACK]["dependencies"]


def test_the_lock_stack_holds_table_layer_parameter_and_outputs(assembly: Assembly) -> None:
    (table_id,) = assembly.resources(LOCK_STACK, "AWS::DynamoDB::Table")
    (layer_id,) = assembly.resources(LOCK_STACK, "AWS::Lambda::LayerVersion")
    (parameter,) = assembly.resources(LOCK_STACK, "AWS::SSM::Parameter").values()
    assert parameter["Properties"]["Name"] == "/dynalease/layer-arn"
    assert parameter["Properties"]["Value"] == {"Ref": layer_id}
    outputs = assembly.templates[LOCK_STACK]["Outputs"]
    assert outputs["TableName"]["Value"] == {"Ref": table_id}
    assert outputs["LayerVersionArn"]["Value"] == {"Ref": layer_id}


def test_every_example_handler_is_deployed_from_examples_lambda(assembly: Assembly) -> None:
    handlers = {f["Properties"]["Handler"] for f in _functions(assembly).values()}
    assert handlers == {f"{module}.handler" for module in HANDLERS}
    for module in HANDLERS:
        source = (ROOT / "examples" / "lambda" / f"{module}.py").read_text()
        names = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        assert "handler" in names, f"examples/lambda/{module}.py has no handler()"


def test_every_function_gets_the_table_variable_the_layer_and_the_newest_runtime(
    assembly: Assembly,
) -> None:
    (layer,) = assembly.resources(LOCK_STACK, "AWS::Lambda::LayerVersion").values()
    newest = layer["Properties"]["CompatibleRuntimes"][-1]
    parameters = assembly.templates[EXAMPLE_STACK]["Parameters"]
    for function in _functions(assembly).values():
        props = function["Properties"]
        assert props["Runtime"] == newest
        assert props["Architectures"] == ["arm64"]
        (layer_ref,) = props["Layers"]
        assert parameters[layer_ref["Ref"]]["Default"] == "/dynalease/layer-arn"
        table = props["Environment"]["Variables"]["DYNALEASE_TABLE"]
        assert "Fn::ImportValue" in table


def test_roles_have_no_managed_policies_and_only_their_own_permissions(
    assembly: Assembly,
) -> None:
    roles = assembly.resources(EXAMPLE_STACK, "AWS::IAM::Role")
    policies = assembly.resources(EXAMPLE_STACK, "AWS::IAM::Policy").values()
    for function_id, function in _functions(assembly).items():
        role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
        assert "ManagedPolicyArns" not in roles[role_id]["Properties"]
        (policy,) = [p for p in policies if p["Properties"]["Roles"] == [{"Ref": role_id}]]
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        by_actions = {tuple(_actions(s)): s["Resource"] for s in statements}
        logs = by_actions.pop(("logs:CreateLogStream", "logs:PutLogEvents"))
        log_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert logs == {"Fn::GetAtt": [log_group, "Arn"]}
        lock = by_actions.pop(tuple(LOCK_ACTIONS))
        assert "Fn::ImportValue" in lock and "Arn" in lock["Fn::ImportValue"]
        if "sqs" in function["Properties"]["Handler"]:
            queue = by_actions.pop(tuple(SQS_CONSUME))
            assert queue["Fn::GetAtt"][1] == "Arn"
        assert by_actions == {}, f"{function_id} has extra permissions: {by_actions}"


def test_no_policy_in_either_stack_names_a_wildcard_resource_or_action(
    assembly: Assembly,
) -> None:
    for stack in (LOCK_STACK, EXAMPLE_STACK):
        for statement in policy_statements(assembly.templates[stack]):
            assert statement["Effect"] == "Allow"
            assert not [s for s in strings_in(statement["Resource"]) if "*" in s], statement
            assert not [a for a in _actions(statement) if "*" in a], statement


def test_both_sqs_sources_report_batch_item_failures(assembly: Assembly) -> None:
    mappings = assembly.resources(EXAMPLE_STACK, "AWS::Lambda::EventSourceMapping").values()
    queues = assembly.resources(EXAMPLE_STACK, "AWS::SQS::Queue")
    sources = set()
    for mapping in mappings:
        assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        queue = queues[mapping["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        assert queue["RedrivePolicy"]["maxReceiveCount"] == 3
        function = _functions(assembly)[mapping["Properties"]["FunctionName"]["Ref"]]
        # A batch of 10 records x (2 s wait + 5 s reserve) + 10 s cleanup must fit.
        assert function["Properties"]["Timeout"] >= 80
        assert queue["VisibilityTimeout"] == 6 * function["Properties"]["Timeout"]
        sources.add(bool(queue.get("FifoQueue")))
    assert sources == {False, True}
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True


def test_the_eventbridge_rule_matches_the_sample_event_and_has_a_dead_letter_queue(
    assembly: Assembly,
) -> None:
    event = json.loads((ROOT / "events" / "eventbridge.json").read_text())
    (rule,) = assembly.resources(EXAMPLE_STACK, "AWS::Events::Rule").values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern == {"source": [event["source"]], "detail-type": [event["detail-type"]]}
    (target,) = rule["Properties"]["Targets"]
    assert "DeadLetterConfig" in target
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2


def test_both_apis_require_iam_authorization_and_write_access_logs(assembly: Assembly) -> None:
    methods = assembly.resources(EXAMPLE_STACK, "AWS::ApiGateway::Method").values()
    assert methods
    for method in methods:
        assert method["Properties"]["AuthorizationType"] == "AWS_IAM"
        assert "RequestValidatorId" in method["Properties"]
    (rest_stage,) = assembly.resources(EXAMPLE_STACK, "AWS::ApiGateway::Stage").values()
    assert "DestinationArn" in rest_stage["Properties"]["AccessLogSetting"]
    (route,) = assembly.resources(EXAMPLE_STACK, "AWS::ApiGatewayV2::Route").values()
    assert route["Properties"]["AuthorizationType"] == "AWS_IAM"
    (http_stage,) = assembly.resources(EXAMPLE_STACK, "AWS::ApiGatewayV2::Stage").values()
    assert http_stage["Properties"]["StageName"] == "$default"
    assert "DestinationArn" in http_stage["Properties"]["AccessLogSettings"]


def test_cdk_nag_finds_no_unsuppressed_errors_or_warnings(assembly: Assembly) -> None:
    for stack in (LOCK_STACK, EXAMPLE_STACK):
        assert assembly.messages(stack, "error") == []
        assert [m for m in assembly.messages(stack, "warning") if "AwsSolutions" in m] == []
    reports = sorted(p.name for p in assembly.directory.glob("AwsSolutions-*-NagReport.csv"))
    assert reports == [
        f"AwsSolutions--{EXAMPLE_STACK}-NagReport.csv",
        f"AwsSolutions--{LOCK_STACK}-NagReport.csv",
    ]


def test_every_nag_suppression_is_expected_and_carries_a_written_reason(
    assembly: Assembly,
) -> None:
    seen = set()
    for stack in (LOCK_STACK, EXAMPLE_STACK):
        for resource in assembly.templates[stack]["Resources"].values():
            for rule in (
                resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
            ):
                assert len(rule["reason"].split()) >= 10, rule
                seen.add(rule["id"])
    assert seen == EXPECTED_SUPPRESSIONS
