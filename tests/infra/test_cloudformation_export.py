"""deploy/cloudformation/dynalease.json is the constructs' table and layer, and it deploys."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
from moto import mock_aws

from dynalease.cdk.build import PYTHON_VERSIONS
from dynalease.cdk.layer import synth_runtime

ROOT = Path(__file__).resolve().parents[2]


def _exporter() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "export_template", ROOT / "infra/export_template.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _checked_in() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "deploy/cloudformation/dynalease.json").read_text())
    return data


def test_the_checked_in_template_is_what_the_constructs_synthesize_now() -> None:
    exporter = _exporter()
    assert (ROOT / "deploy/cloudformation/dynalease.json").read_text() == exporter.render(), (
        "stale: run .venv/bin/python infra/export_template.py"
    )


def test_its_table_and_layer_equal_the_synthesized_ones_but_for_the_parameters() -> None:
    synthesized = _exporter().synthesized()["Resources"]
    (table,) = [r for r in synthesized.values() if r["Type"] == "AWS::DynamoDB::Table"]
    (layer,) = [r for r in synthesized.values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    exported = _checked_in()["Resources"]
    ours_table, ours_layer = exported["LockTable"], exported["LockLayer"]
    assert table["Properties"].pop("DeletionProtectionEnabled") is True
    assert ours_table["Properties"].pop("DeletionProtectionEnabled") == {
        "Ref": "DeletionProtection"
    }
    assert _checked_in()["Parameters"]["DeletionProtection"]["Default"] == "true"
    assert ours_table == table
    # One runtime, chosen at deploy time with the zip built for it.
    assert layer["Properties"]["CompatibleRuntimes"] == [synth_runtime().name]
    assert ours_layer["Properties"]["CompatibleRuntimes"] == [{"Ref": "PythonRuntime"}]
    assert _checked_in()["Parameters"]["PythonRuntime"]["AllowedValues"] == [
        f"python{version}" for version in PYTHON_VERSIONS
    ]
    for resource in (layer, ours_layer):
        for name in ("Content", "Description", "CompatibleRuntimes"):
            resource["Properties"].pop(name)
    assert ours_layer == layer


def test_the_template_deploys_the_table_and_the_layer() -> None:
    """A deployment on moto's CloudFormation (the stand-in for the real service here)."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="layer-zips")
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as archive:
            archive.writestr("python/dynalease/__init__.py", "")
        key = "dynalease-layer-python3.13.zip"
        s3.put_object(Bucket="layer-zips", Key=key, Body=zipped.getvalue())
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        cloudformation.create_stack(
            StackName="locks",
            TemplateBody=(ROOT / "deploy/cloudformation/dynalease.json").read_text(),
            Parameters=[
                {"ParameterKey": "LayerZipBucket", "ParameterValue": "layer-zips"},
                {"ParameterKey": "LayerZipKey", "ParameterValue": key},
                {"ParameterKey": "PythonRuntime", "ParameterValue": "python3.13"},
            ],
        )
        (stack,) = cloudformation.describe_stacks(StackName="locks")["Stacks"]
        assert stack["StackStatus"] == "CREATE_COMPLETE"
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        table = boto3.client("dynamodb", region_name="us-east-1").describe_table(
            TableName=outputs["TableName"]
        )["Table"]
        assert table["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
        assert table["AttributeDefinitions"] == [{"AttributeName": "key", "AttributeType": "S"}]
        assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        (layer,) = boto3.client("lambda", region_name="us-east-1").list_layers()["Layers"]
        assert layer["LatestMatchingVersion"]["CompatibleRuntimes"] == ["python3.13"]


def test_the_template_can_pin_the_zips_object_version() -> None:
    """A versioned bucket: the layer comes from the upload named, not whatever is there now."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="layer-zips")
        s3.put_bucket_versioning(Bucket="layer-zips", VersioningConfiguration={"Status": "Enabled"})
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as archive:
            archive.writestr("python/dynalease/__init__.py", "")
        key = "dynalease-layer-python3.12.zip"
        version = s3.put_object(Bucket="layer-zips", Key=key, Body=zipped.getvalue())["VersionId"]
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        cloudformation.create_stack(
            StackName="pinned",
            TemplateBody=(ROOT / "deploy/cloudformation/dynalease.json").read_text(),
            Parameters=[
                {"ParameterKey": "LayerZipBucket", "ParameterValue": "layer-zips"},
                {"ParameterKey": "LayerZipKey", "ParameterValue": key},
                {"ParameterKey": "LayerZipObjectVersion", "ParameterValue": version},
                {"ParameterKey": "PythonRuntime", "ParameterValue": "python3.12"},
            ],
        )
        (stack,) = cloudformation.describe_stacks(StackName="pinned")["Stacks"]
        assert stack["StackStatus"] == "CREATE_COMPLETE"
    content = _checked_in()["Resources"]["LockLayer"]["Properties"]["Content"]
    assert content["S3ObjectVersion"]["Fn::If"][0] == "PinnedZipVersion"


def test_check_says_the_file_is_up_to_date_in_one_line_without_node_banners() -> None:
    # As a user runs it: a fresh process, without the variables that silence jsii's Node
    # banners (which it prints as bytes literals).
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "infra/export_template.py"), "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("dynalease.json is up to date"), done.stdout
    assert "b'!!" not in done.stdout + done.stderr
