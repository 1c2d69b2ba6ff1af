"""Misusing LockTable or LockLayer fails while the stack is being defined, with a clear message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from dynalease.cdk import LockLayer, LockTable
from dynalease.cdk.build import LayerBuildError
from dynalease.cdk.layer import (
    DEFAULT_RUNTIMES,
    SOURCE_ONLY_WARNING,
    source_only_warning,
    synth_runtime,
)


@pytest.fixture
def stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Misuse")


def _function(stack: cdk.Stack, **props: Any) -> lambda_.Function:
    options: dict[str, Any] = {
        "runtime": synth_runtime(),  # the runtime LockLayer is built for by default
        "handler": "index.handler",
        "code": lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        **props,
    }
    return lambda_.Function(stack, "Function", **options)


@pytest.mark.parametrize(
    ("props", "error", "message"),
    [
        ({"table_name": "ab"}, ValueError, "is not valid: a DynamoDB table name"),
        ({"table_name": "locks/prod"}, ValueError, "is not valid: a DynamoDB table name"),
        ({"table_name": 42}, TypeError, "table_name must be a str"),
        ({"removal_policy": "retain"}, TypeError, "aws_cdk.RemovalPolicy"),
        ({"point_in_time_recovery": "yes"}, TypeError, "point_in_time_recovery must be"),
        ({"deletion_protection": 1}, TypeError, "deletion_protection must be"),
        ({"encryption_key": "arn:aws:kms:eu-west-1:1:key/x"}, TypeError, "aws_kms.IKey"),
    ],
)
def test_lock_table_rejects_bad_props(
    stack: cdk.Stack, props: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        LockTable(stack, "Locks", **props)


def test_grant_lock_rejects_something_that_cannot_be_granted(stack: cdk.Stack) -> None:
    locks = LockTable(stack, "Locks")
    with pytest.raises(TypeError, match=r"aws_iam\.IGrantable"):
        locks.grant_lock("arn:aws:iam::123456789012:role/worker")  # type: ignore[arg-type]


def test_configure_function_rejects_an_imported_function_and_says_to_use_grant_lock(
    stack: cdk.Stack,
) -> None:
    locks = LockTable(stack, "Locks")
    imported = lambda_.Function.from_function_arn(
        stack, "Imported", "arn:aws:lambda:eu-west-1:123456789012:function:worker"
    )
    with pytest.raises(TypeError, match="grant_lock"):
        locks.configure_function(imported)  # type: ignore[arg-type]


def test_configure_function_rejects_a_layer_on_a_non_python_function(stack: cdk.Stack) -> None:
    locks = LockTable(stack, "Locks")
    layer = LockLayer(stack, "Layer", include_powertools=False)
    function = _function(
        stack, runtime=lambda_.Runtime.NODEJS_22_X, code=lambda_.Code.from_inline("exports.h=1")
    )
    with pytest.raises(ValueError, match="for Python functions"):
        locks.configure_function(function, layer=layer)


def test_configure_function_rejects_a_runtime_the_layer_was_not_built_for_and_says_what_to_do(
    stack: cdk.Stack,
) -> None:
    locks = LockTable(stack, "Locks")
    layer = LockLayer(stack, "Layer", runtime=synth_runtime(), include_powertools=False)
    other = next(r for r in DEFAULT_RUNTIMES if r.name != layer.runtime.name)
    constant = other.name.upper().replace(".", "_").replace("PYTHON", "PYTHON_")
    assert getattr(lambda_.Runtime, constant).name == other.name
    with pytest.raises(ValueError) as caught:
        locks.configure_function(_function(stack, runtime=other), layer=layer)
    message = str(caught.value)
    assert f"uses {other.name}, which Misuse/Layer does not support" in message
    assert f"(compatible runtimes: {layer.runtime.name})" in message
    assert "leave runtime out of the LockLayer for a layer that serves every Python runtime" in (
        message
    )
    assert f"LockLayer(..., runtime=aws_lambda.Runtime.{constant})" in message


def test_configure_function_says_a_function_older_than_python_3_11_needs_a_newer_runtime(
    stack: cdk.Stack,
) -> None:
    locks = LockTable(stack, "Locks")
    layer = LockLayer(stack, "Layer", runtime=synth_runtime(), include_powertools=False)
    function = _function(stack, runtime=lambda_.Runtime.PYTHON_3_10)
    with pytest.raises(ValueError, match=r"3\.11 or newer; give the function runtime="):
        locks.configure_function(function, layer=layer)


def test_a_default_layer_has_no_one_runtime_and_says_what_to_give_the_functions(
    stack: cdk.Stack,
) -> None:
    layer = LockLayer(stack, "Layer", include_powertools=False)
    assert layer.compatible_runtime_names == tuple(r.name for r in DEFAULT_RUNTIMES)
    with pytest.raises(ValueError, match="give each function the runtime it needs"):
        _ = layer.runtime


def test_a_default_layer_built_where_only_one_python_is_found_warns_naming_what_to_install(
    stack: cdk.Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    for runtime in DEFAULT_RUNTIMES:
        monkeypatch.delenv(f"DYNALEASE_PYTHON_{runtime.name[6:].replace('.', '_')}", raising=False)
    layer = LockLayer(stack, "Layer", include_powertools=False)
    others = tuple(r.name[6:] for r in DEFAULT_RUNTIMES if r.name != synth_runtime().name)
    assert layer.build.source_only_pythons == others
    warnings = [m.data for m in layer.node.metadata if m.type == "aws:cdk:warning"]
    assert warnings == [f"{source_only_warning(others)} [ack: {SOURCE_ONLY_WARNING}]"]
    for version in others:
        assert f"pyenv install {version}" in warnings[0]
        assert f"DYNALEASE_PYTHON_{version.replace('.', '_')}" in warnings[0]
    # The smallest layer needs its interpreter: without it the synth fails.
    with pytest.raises(LayerBuildError, match=f"no Python {others[0]} interpreter"):
        LockLayer(stack, "Slim", runtime=next(r for r in DEFAULT_RUNTIMES if r.name[6:] in others))


def test_configure_function_rejects_an_architecture_the_layer_does_not_support(
    stack: cdk.Stack,
) -> None:
    locks = LockTable(stack, "Locks")
    layer = LockLayer(
        stack,
        "Layer",
        include_powertools=False,
        compatible_architectures=[lambda_.Architecture.X86_64],
    )
    function = _function(stack, architecture=lambda_.Architecture.ARM_64)
    with pytest.raises(ValueError, match="arm64") as caught:
        locks.configure_function(function, layer=layer)
    assert "leave compatible_architectures out of the LockLayer" in str(caught.value)
    assert "architecture=aws_lambda.Architecture.X86_64" in str(caught.value)


def test_configure_function_rejects_a_layer_that_is_not_a_layer(stack: cdk.Stack) -> None:
    locks = LockTable(stack, "Locks")
    with pytest.raises(TypeError, match="ILayerVersion"):
        locks.configure_function(_function(stack), layer="arn:aws:lambda:layer")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("props", "error", "message"),
    [
        ({"runtime": lambda_.Runtime.PYTHON_3_10}, ValueError, "3.11 or newer"),
        ({"runtime": lambda_.Runtime.NODEJS_22_X}, ValueError, "3.11 or newer"),
        ({"runtime": [lambda_.Runtime.PYTHON_3_12]}, TypeError, "not an aws_lambda.Runtime"),
        ({"runtime": "python3.12"}, TypeError, "not an aws_lambda.Runtime"),
        ({"compatible_architectures": []}, ValueError, "at least one architecture"),
        ({"compatible_architectures": ["arm64"]}, ValueError, "Architecture.X86_64"),
        ({"removal_policy": "destroy"}, TypeError, "aws_cdk.RemovalPolicy"),
        ({"parameter_name": "dynalease layer"}, ValueError, "is not valid: an SSM parameter name"),
        ({"parameter_name": 7}, TypeError, "parameter_name must be a str"),
        ({"include_powertools": "yes"}, TypeError, "include_powertools must be a bool"),
    ],
)
def test_lock_layer_rejects_bad_props(
    stack: cdk.Stack, props: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        LockLayer(stack, "Layer", **props)


def test_a_role_from_elsewhere_can_still_be_granted(stack: cdk.Stack) -> None:
    locks = LockTable(stack, "Locks")
    role = iam.Role.from_role_arn(stack, "Worker", "arn:aws:iam::123456789012:role/worker")
    assert locks.grant_lock(role).principal_statement is not None


def test_the_installed_aws_cdk_lib_is_inside_the_cdk_extras_range() -> None:
    """The range's upper end is what `make test` runs; `make cdk-range` runs the lower bound."""
    import importlib.metadata
    import pathlib
    import tomllib

    from packaging.requirements import Requirement

    root = pathlib.Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (spec,) = [Requirement(s) for s in extra["cdk"] if s.startswith("aws-cdk-lib")]
    installed = importlib.metadata.version("aws-cdk-lib")
    assert spec.specifier, "the cdk extra must give aws-cdk-lib a range, not leave it open"
    assert "==" not in str(spec.specifier), "an exact pin clashes with users' CDK apps"
    assert spec.specifier.contains(installed), (installed, str(spec.specifier))
