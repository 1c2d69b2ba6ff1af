"""LockTable and LockLayer in a stack of their own: exact table settings and exact grants.

One app with a few stacks is synthesized once for the module; misuse cases build
constructs without synthesizing, because they must fail at construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from infra_helpers import policy_statements, strings_in

from dynalease.cdk import LockLayer, LockTable
from dynalease.cdk._bytecode import find_interpreter
from dynalease.cdk.layer import (
    DEFAULT_RUNTIMES,
    SOURCE_ONLY_WARNING,
    source_only_warning,
    synth_runtime,
)
from dynalease.cdk.table import INSPECT_ACTIONS, LOCK_ACTIONS
from dynalease.constants import ENV_TABLE

LOCK = sorted(
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


def _function(scope: cdk.Stack, id: str, **props: Any) -> lambda_.Function:
    options: dict[str, Any] = {
        "runtime": synth_runtime(),  # the runtime LockLayer is built for by default
        "handler": "index.handler",
        "code": lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        **props,
    }
    return lambda_.Function(scope, id, **options)


def _role(scope: cdk.Stack, id: str) -> iam.Role:
    return iam.Role(scope, id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))


@dataclass(frozen=True)
class Synthesized:
    default: dict[str, Any]
    custom: dict[str, Any]
    layers: dict[str, Any]
    every_runtime: dict[str, Any]
    warnings: list[str]
    """The synth warnings of the stack with functions on every runtime."""
    lock_grant: iam.Grant
    table: LockTable


@pytest.fixture(scope="module")
def synthesized() -> Synthesized:
    app = cdk.App()

    default = cdk.Stack(app, "Default")
    table = LockTable(default, "Locks")
    lock_grant = table.grant_lock(_role(default, "Worker"))
    table.grant_inspect(_role(default, "Operator"))
    layer = LockLayer(default, "Layer", parameter_name="/dynalease/layer-arn")
    table.configure_function(_function(default, "Handler"), layer=layer)

    custom = cdk.Stack(app, "Custom")
    key = kms.Key(custom, "Key", enable_key_rotation=True)
    custom_table = LockTable(
        custom,
        "Locks",
        table_name="team-locks",
        removal_policy=cdk.RemovalPolicy.DESTROY,
        point_in_time_recovery=False,
        deletion_protection=False,
        encryption_key=key,
    )
    custom_table.grant_lock(_role(custom, "Worker"))

    layers = cdk.Stack(app, "Layers")
    LockLayer(
        layers,
        "Slim",
        include_powertools=False,
        runtime=synth_runtime(),
        compatible_architectures=[lambda_.Architecture.ARM_64],
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )

    # The report of issue 44: functions on several runtimes beside one default layer.
    every = cdk.Stack(app, "EveryRuntime")
    every_table = LockTable(every, "Locks")
    every_layer = LockLayer(every, "Layer")
    for runtime in DEFAULT_RUNTIMES:
        function = _function(every, runtime.name.replace(".", ""), runtime=runtime)
        every_table.configure_function(function, layer=every_layer)

    assembly = app.synth()
    templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    warnings = [
        str(message.entry.data)
        for message in assembly.get_stack_by_name("EveryRuntime").messages
        if message.entry.type == "aws:cdk:warning"
    ]
    return Synthesized(
        templates["Default"],
        templates["Custom"],
        templates["Layers"],
        templates["EveryRuntime"],
        warnings,
        lock_grant,
        table,
    )


def _only(template: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [r for r in template["Resources"].values() if r["Type"] == type_]
    assert len(found) == 1, f"expected one {type_}, found {len(found)}"
    return found[0]


def _policy_of(template: dict[str, Any], role_prefix: str) -> list[dict[str, Any]]:
    (policy,) = [
        resource
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        and resource["Properties"]["Roles"][0]["Ref"].startswith(role_prefix)
    ]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _table_arn(template: dict[str, Any]) -> dict[str, Any]:
    (logical_id,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"
    ]
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return sorted([actions] if isinstance(actions, str) else actions)


def test_the_table_has_only_a_string_partition_key_named_key(synthesized: Synthesized) -> None:
    table = _only(synthesized.default, "AWS::DynamoDB::Table")["Properties"]
    assert table["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [{"AttributeName": "key", "AttributeType": "S"}]


def test_the_table_is_on_demand_without_ttl_or_stream_or_indexes(
    synthesized: Synthesized,
) -> None:
    table = _only(synthesized.default, "AWS::DynamoDB::Table")["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    for absent in (
        "TimeToLiveSpecification",
        "StreamSpecification",
        "GlobalSecondaryIndexes",
        "LocalSecondaryIndexes",
        "ProvisionedThroughput",
        "TableName",
    ):
        assert absent not in table


def test_the_table_defaults_to_point_in_time_recovery_deletion_protection_and_retain(
    synthesized: Synthesized,
) -> None:
    resource = _only(synthesized.default, "AWS::DynamoDB::Table")
    assert resource["Properties"]["PointInTimeRecoverySpecification"] == {
        "PointInTimeRecoveryEnabled": True
    }
    assert resource["Properties"]["DeletionProtectionEnabled"] is True
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_grant_lock_allows_exactly_the_six_actions_locks_send_on_the_table_arn(
    synthesized: Synthesized,
) -> None:
    (statement,) = _policy_of(synthesized.default, "Worker")
    assert statement["Effect"] == "Allow"
    assert _actions(statement) == LOCK
    assert statement["Resource"] == _table_arn(synthesized.default)
    assert set(statement) == {"Action", "Effect", "Resource"}
    assert sorted(LOCK_ACTIONS) == LOCK


def test_grant_lock_returns_a_successful_grant(synthesized: Synthesized) -> None:
    assert isinstance(synthesized.lock_grant, iam.Grant)
    assert synthesized.lock_grant.success


def test_grant_inspect_is_read_only_and_covers_what_the_doctor_reads(
    synthesized: Synthesized,
) -> None:
    (statement,) = _policy_of(synthesized.default, "Operator")
    assert _actions(statement) == sorted(INSPECT_ACTIONS)
    assert sorted(INSPECT_ACTIONS) == [
        "dynamodb:DescribeTable",
        "dynamodb:DescribeTimeToLive",
        "dynamodb:GetItem",
        "dynamodb:Scan",
    ]
    assert statement["Resource"] == _table_arn(synthesized.default)
    assert {"dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"} <= set(INSPECT_ACTIONS)
    writes = ("Put", "Update", "Delete", "Write", "Create", "Tag", "Restore")
    assert not [a for a in INSPECT_ACTIONS if any(w in a for w in writes)]


def test_configure_function_sets_the_table_variable_grants_and_adds_the_layer(
    synthesized: Synthesized,
) -> None:
    function = _only(synthesized.default, "AWS::Lambda::Function")["Properties"]
    table_id = _table_arn(synthesized.default)["Fn::GetAtt"][0]
    assert function["Environment"]["Variables"] == {ENV_TABLE: {"Ref": table_id}}
    (layer_id,) = [
        k
        for k, r in synthesized.default["Resources"].items()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    assert function["Layers"] == [{"Ref": layer_id}]
    (statement,) = _policy_of(synthesized.default, "HandlerServiceRole")
    assert _actions(statement) == LOCK
    assert statement["Resource"] == _table_arn(synthesized.default)


def test_no_policy_in_any_stack_names_a_wildcard_resource(synthesized: Synthesized) -> None:
    for template in (synthesized.default, synthesized.custom):
        for statement in policy_statements(template):
            assert not [s for s in strings_in(statement["Resource"]) if "*" in s], statement
            assert not [a for a in statement["Action"] if "*" in a], statement


def test_custom_settings_reach_the_table(synthesized: Synthesized) -> None:
    resource = _only(synthesized.custom, "AWS::DynamoDB::Table")
    table = resource["Properties"]
    assert table["TableName"] == "team-locks"
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": False}
    assert table["DeletionProtectionEnabled"] is False
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert table["SSESpecification"]["SSEType"] == "KMS"
    assert resource["DeletionPolicy"] == "Delete"


def test_with_a_customer_key_grant_lock_adds_only_named_key_actions_on_that_key(
    synthesized: Synthesized,
) -> None:
    statements = _policy_of(synthesized.custom, "Worker")
    (key_id,) = [
        k for k, r in synthesized.custom["Resources"].items() if r["Type"] == "AWS::KMS::Key"
    ]
    by_resource = {str(s["Resource"]): _actions(s) for s in statements}
    assert by_resource == {
        str(_table_arn(synthesized.custom)): LOCK,
        str({"Fn::GetAtt": [key_id, "Arn"]}): [
            "kms:Decrypt",
            "kms:DescribeKey",
            "kms:Encrypt",
            "kms:GenerateDataKey",
        ],
    }


def test_the_default_layer_serves_every_python_runtime_on_both_architectures(
    synthesized: Synthesized,
) -> None:
    resource = _only(synthesized.default, "AWS::Lambda::LayerVersion")
    layer = resource["Properties"]
    names = [runtime.name for runtime in DEFAULT_RUNTIMES]
    assert layer["CompatibleRuntimes"] == names
    assert names[:3] == ["python3.11", "python3.12", "python3.13"]
    assert f"for {', '.join(names)}:" in layer["Description"]
    assert layer["CompatibleArchitectures"] == ["x86_64", "arm64"]
    assert layer["LicenseInfo"] == "Apache-2.0"
    assert "aws-lambda-powertools" in layer["Description"]
    assert resource["DeletionPolicy"] == "Retain"


def _missing(runtime: lambda_.Runtime) -> bool:
    try:
        find_interpreter(runtime.name.removeprefix("python"))
    except LookupError:
        return True
    return False


def test_functions_on_every_runtime_share_the_default_layer_and_warn_of_missing_bytecode(
    synthesized: Synthesized,
) -> None:
    template = synthesized.every_runtime
    (layer_id,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    functions = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    ]
    assert sorted(f["Runtime"] for f in functions) == [r.name for r in DEFAULT_RUNTIMES]
    assert all(f["Layers"] == [{"Ref": layer_id}] for f in functions)
    # A version without an interpreter on this machine ships as source, with one warning
    # naming what to install; with every interpreter there is no warning.
    missing = [r.name.removeprefix("python") for r in DEFAULT_RUNTIMES if _missing(r)]
    expected = [f"{source_only_warning(missing)} [ack: {SOURCE_ONLY_WARNING}]"] if missing else []
    assert synthesized.warnings == expected


def test_the_layer_parameter_holds_the_layer_version_arn(synthesized: Synthesized) -> None:
    parameter = _only(synthesized.default, "AWS::SSM::Parameter")["Properties"]
    (layer_id,) = [
        k
        for k, r in synthesized.default["Resources"].items()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    assert parameter["Name"] == "/dynalease/layer-arn"
    assert parameter["Type"] == "String"
    assert parameter["Value"] == {"Ref": layer_id}


def test_layer_options_reach_the_layer_version(synthesized: Synthesized) -> None:
    resource = _only(synthesized.layers, "AWS::Lambda::LayerVersion")
    layer = resource["Properties"]
    assert layer["CompatibleRuntimes"] == [synth_runtime().name]
    assert layer["CompatibleArchitectures"] == ["arm64"]
    assert "powertools" not in layer["Description"]
    assert resource["DeletionPolicy"] == "Delete"
    assert not [r for r in synthesized.layers["Resources"].values() if "SSM" in r["Type"]]


def test_the_template_matches_with_cdk_assertions(synthesized: Synthesized) -> None:
    template = assertions.Template.from_json(synthesized.default)
    template.resource_count_is("AWS::DynamoDB::Table", 1)
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"TimeToLiveSpecification": assertions.Match.absent(), "BillingMode": "PAY_PER_REQUEST"},
    )


def test_dynalease_cdk_exports_exactly_the_two_constructs() -> None:
    import dynalease.cdk

    assert dynalease.cdk.__all__ == ["LockLayer", "LockTable"]
    assert dynalease.cdk.LockTable is LockTable
    assert dynalease.cdk.LockLayer is LockLayer


def test_grant_semaphore_is_the_lock_grant_on_the_table_arn() -> None:
    from dynalease.cdk.table import SEMAPHORE_ACTIONS

    app = cdk.App()
    stack = cdk.Stack(app, "Semaphores")
    table = LockTable(stack, "Locks")
    assert table.grant_semaphore(_role(stack, "Pool")).success
    table.grant_lock(_role(stack, "Worker"))
    template = app.synth().get_stack_by_name("Semaphores").template
    (pool,) = _policy_of(template, "Pool")
    assert _actions(pool) == LOCK == sorted(SEMAPHORE_ACTIONS)
    assert pool["Resource"] == _table_arn(template)
    assert set(pool) == {"Action", "Effect", "Resource"}
    (worker,) = _policy_of(template, "Worker")
    assert _actions(worker) == LOCK
