"""End to end: the synthesized layer and function code, in an interpreter that has nothing else.

Each example handler runs in ``python -I -S`` whose path holds only the function
code asset, the layer asset's ``python/`` and the SDK packages the Lambda Python
runtime ships (boto3, botocore, jmespath, s3transfer, urllib3, dateutil, six),
with an event from events/, against the moto server the tests start.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from infra_helpers import EXAMPLE_STACK, ROOT, Assembly
from support.servers import raw_dynamodb

RUNNER = Path(__file__).with_name("lambda_runner.py")
# What the Lambda Python runtime provides besides the standard library.
RUNTIME_SHIPPED = ("boto3", "botocore", "jmespath", "s3transfer", "urllib3", "dateutil", "six")


@dataclass(frozen=True)
class LambdaPaths:
    task: Path
    layer: Path
    runtime: Path
    runner: Path


@pytest.fixture(scope="module")
def paths(assembly: Assembly, tmp_path_factory: pytest.TempPathFactory) -> LambdaPaths:
    root = tmp_path_factory.mktemp("lambda")
    with zipfile.ZipFile(assembly.layer_asset()) as archive:
        archive.extractall(root / "opt")
    runtime = root / "runtime"
    runtime.mkdir()
    for name in RUNTIME_SHIPPED:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"{name} is not installed"
        source = Path(spec.origin)
        source = source.parent if source.name == "__init__.py" else source
        (runtime / source.name).symlink_to(source, target_is_directory=source.is_dir())
    # The function code as CDK staged it (a directory asset named after its hash).
    (function,) = [
        f
        for f in assembly.resources(EXAMPLE_STACK, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "direct_handler.handler"
    ]
    task = assembly.directory / f"asset.{function['Properties']['Code']['S3Key']}"
    task = task.with_name(task.name.removesuffix(".zip"))
    assert (task / "direct_handler.py").is_file()
    # The runner lives alone so its directory brings nothing onto the path.
    runner = root / "runner" / RUNNER.name
    runner.parent.mkdir()
    runner.write_bytes(RUNNER.read_bytes())
    return LambdaPaths(task, root / "opt" / "python", runtime, runner)


@pytest.fixture(scope="module")
def dynamodb(endpoint: str) -> Any:
    return raw_dynamodb(endpoint)


@pytest.fixture
def table(dynamodb: Any) -> Iterator[str]:
    name = f"infra-e2e-{uuid.uuid4().hex[:12]}"
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield name
    dynamodb.delete_table(TableName=name)


def _invoke(
    paths: LambdaPaths, endpoint: str, table: str, module: str, event: str
) -> dict[str, Any]:
    # Lambda's environment, not the test's: nothing from the developer's AWS setup leaks in.
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_LAMBDA_FUNCTION_NAME": module,
        "POWERTOOLS_SERVICE_NAME": "dynalease-examples",
        "POWERTOOLS_METRICS_NAMESPACE": "DynaleaseExamples",
        "DYNALEASE_TABLE": table,
    }
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(paths.runner),
            str(paths.task),
            str(paths.layer),
            str(paths.runtime),
            str(ROOT / "dev"),  # the runner's invoke(): a development tool, not in the layer
            module,
            str(ROOT / "events" / event),
        ],
        env=env,
        cwd=paths.runner.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def _assert_ran_from_the_layer(paths: LambdaPaths, report: dict[str, Any]) -> None:
    origins = report["origins"]
    assert origins["dynalease"].startswith(str(paths.layer))
    assert origins["boto3"].startswith(str(paths.runtime))
    assert origins["botocore"].startswith(str(paths.runtime))
    assert report["importable"] == {"aws_cdk": False, "moto": False, "pytest": False}


@pytest.mark.parametrize(
    ("module", "event", "expected"),
    [
        ("sqs_handler", "sqs.json", {"batchItemFailures": []}),
        ("sqs_fifo_handler", "sqs-fifo.json", {"batchItemFailures": []}),
        ("eventbridge_handler", "eventbridge.json", {"customer_id": "c-1001"}),
        ("apigw_rest_handler", "apigw-rest.json", {"statusCode": 200}),
        ("apigw_http_handler", "apigw-http.json", {"statusCode": 200}),
        ("direct_handler", "direct.json", {"lock_key": "customer:c-1001"}),
    ],
)
def test_each_example_handler_runs_with_only_the_layer_and_the_runtime_sdk(
    paths: LambdaPaths,
    endpoint: str,
    table: str,
    module: str,
    event: str,
    expected: dict[str, Any],
) -> None:
    report = _invoke(paths, endpoint, table, module, event)
    assert "error" not in report, report.get("traceback")
    assert expected.items() <= report["result"].items()
    _assert_ran_from_the_layer(paths, report)
    if module.startswith("sqs"):
        assert report["origins"]["aws_lambda_powertools"].startswith(str(paths.layer))


def test_a_record_whose_customer_is_locked_elsewhere_comes_back_as_a_batch_item_failure(
    paths: LambdaPaths, endpoint: str, table: str, dynamodb: Any
) -> None:
    # Another worker (say an ECS task) holds customer c-1001 with a long lease.
    dynamodb.put_item(
        TableName=table,
        Item={
            "key": {"S": "customer:c-1001"},
            "owner": {"S": str(uuid.uuid4())},
            "version": {"S": str(uuid.uuid4())},
            "lease_ms": {"N": "600000"},
            "protocol": {"N": "1"},
        },
    )
    report = _invoke(paths, endpoint, table, "sqs_handler", "sqs.json")
    records = json.loads((ROOT / "events" / "sqs.json").read_text())["Records"]
    locked = {r["messageId"] for r in records if json.loads(r["body"])["customer_id"] == "c-1001"}
    failed = {item["itemIdentifier"] for item in report["result"]["batchItemFailures"]}
    assert failed == locked
    assert len(failed) < len(records)


def test_without_the_table_the_handler_fails_because_requests_reach_the_server(
    paths: LambdaPaths, endpoint: str
) -> None:
    report = _invoke(paths, endpoint, "no-such-table-e2e", "direct_handler", "direct.json")
    assert report.get("error", "").startswith("TableNotFoundError"), report
