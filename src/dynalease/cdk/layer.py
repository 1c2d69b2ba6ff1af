"""LockLayer: dynalease (and optionally Powertools) as a Lambda layer, built without Docker."""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ._checks import check_optional_name, check_removal_policy
from .build import LayerBuild, build_layer

__all__ = ["DEFAULT_ARCHITECTURES", "DEFAULT_RUNTIMES", "LockLayer"]

_MIN_PYTHON = (3, 11)
_MAX_RUNTIMES = 15  # Lambda's limit on CompatibleRuntimes
_PARAMETER_NAME = re.compile(r"^(/[a-zA-Z0-9_.\-]+)+$|^[a-zA-Z0-9_.\-]+$")


def _python_version(runtime: lambda_.Runtime) -> tuple[int, int] | None:
    match = re.fullmatch(r"python(\d+)\.(\d+)", runtime.name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _default_runtimes() -> tuple[lambda_.Runtime, ...]:
    found = [
        (version, runtime)
        for runtime in lambda_.Runtime.ALL
        if (version := _python_version(runtime)) is not None and version >= _MIN_PYTHON
    ]
    return tuple(runtime for _, runtime in sorted(found, key=lambda pair: pair[0]))


#: python3.11 up to the newest Python runtime the installed aws-cdk-lib knows.
DEFAULT_RUNTIMES: tuple[lambda_.Runtime, ...] = _default_runtimes()

#: Both Lambda architectures; the layer is pure Python.
DEFAULT_ARCHITECTURES: tuple[lambda_.Architecture, ...] = (
    lambda_.Architecture.X86_64,
    lambda_.Architecture.ARM_64,
)


class LockLayer(lambda_.LayerVersion):
    """A Lambda layer holding the installed dynalease and its runtime dependencies.

    The ``python/`` content is built at synth time from the environment running
    the synth, without Docker and without downloading anything; boto3,
    botocore and the other packages the Lambda Python runtime ships are left
    out. The same builder writes ``layer/dist/dynalease-layer.zip``.

    Example::

        layer = LockLayer(self, "LockLayer", parameter_name="/dynalease/layer-arn")
        fn = lambda_.Function(..., layers=[layer])

    :param include_powertools: also ship AWS Lambda Powertools (the ``lambda`` extra).
    :param include_recovery_extension: also ship the recovery extension
        (``extensions/dynalease-recovery``, docs/lambda.md): after a timeout or crash
        it deletes the dead runtime's lock rows at once instead of leaving them for a
        lease. On by default: it never delays an invocation and sends nothing unless a
        runtime died holding a lock.
    :param compatible_runtimes: Python runtimes, python3.11 or newer.
    :param compatible_architectures: x86_64 and/or arm64.
    :param removal_policy: keep (RETAIN, default) or delete old layer versions.
    :param parameter_name: if given, an SSM StringParameter with this name holds the
        layer version ARN (construct ID ``Parameter``), so other stacks can find the
        current layer without a CloudFormation export pinning it.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        include_powertools: bool = True,
        include_recovery_extension: bool = True,
        compatible_runtimes: Sequence[lambda_.Runtime] = DEFAULT_RUNTIMES,
        compatible_architectures: Sequence[lambda_.Architecture] = DEFAULT_ARCHITECTURES,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        parameter_name: str | None = None,
    ) -> None:
        runtimes = _check_runtimes(compatible_runtimes)
        architectures = _check_architectures(compatible_architectures)
        check_removal_policy(removal_policy)
        check_optional_name(
            parameter_name,
            prop="parameter_name",
            pattern=_PARAMETER_NAME,
            max_length=1011,
            rule="an SSM parameter name uses letters, digits and '_.-', in '/'-separated "
            "levels starting with '/' (e.g. '/dynalease/layer-arn')",
        )
        build = build_layer(
            include_powertools=include_powertools,
            include_recovery=include_recovery_extension,
            python_versions=[runtime.name.removeprefix("python") for runtime in runtimes],
        )
        super().__init__(
            scope,
            id,
            code=lambda_.Code.from_asset(str(build.zip_path)),
            compatible_runtimes=list(runtimes),
            compatible_architectures=list(architectures),
            description=f"dynalease locks: {build.describe()}"[:256],
            license="Apache-2.0",
            removal_policy=removal_policy,
        )
        self._build = build
        self._runtime_names = tuple(runtime.name for runtime in runtimes)
        self._architecture_names = tuple(architecture.name for architecture in architectures)
        self.parameter: ssm.StringParameter | None = None
        """The SSM parameter holding the layer ARN, if ``parameter_name`` was given."""
        if parameter_name is not None:
            self.parameter = ssm.StringParameter(
                self,
                "Parameter",
                parameter_name=parameter_name,
                string_value=self.layer_version_arn,
                description="ARN of the current dynalease Lambda layer version",
            )

    @property
    def build(self) -> LayerBuild:
        """The built zip: path, sha256, zipped and unzipped sizes, distributions."""
        return self._build

    @property
    def compatible_runtime_names(self) -> tuple[str, ...]:
        """Names of the compatible runtimes, e.g. ``("python3.11", ...)``."""
        return self._runtime_names

    @property
    def compatible_architecture_names(self) -> tuple[str, ...]:
        """Names of the compatible architectures, e.g. ``("x86_64", "arm64")``."""
        return self._architecture_names


def _check_runtimes(runtimes: Sequence[lambda_.Runtime]) -> tuple[lambda_.Runtime, ...]:
    if isinstance(runtimes, str) or not isinstance(runtimes, Sequence) or not runtimes:
        raise ValueError("compatible_runtimes must be a non-empty sequence of aws_lambda.Runtime")
    unique: dict[str, lambda_.Runtime] = {}
    for runtime in runtimes:
        if not isinstance(runtime, lambda_.Runtime):
            raise TypeError(f"compatible_runtimes holds {runtime!r}, not an aws_lambda.Runtime")
        version = _python_version(runtime)
        if version is None or version < _MIN_PYTHON:
            raise ValueError(
                f"dynalease needs Python 3.11 or newer; {runtime.name} cannot use the layer"
            )
        unique.setdefault(runtime.name, runtime)
    if len(unique) > _MAX_RUNTIMES:
        raise ValueError(f"a layer takes at most {_MAX_RUNTIMES} compatible runtimes")
    return tuple(unique.values())


def _check_architectures(
    architectures: Sequence[lambda_.Architecture],
) -> tuple[lambda_.Architecture, ...]:
    if isinstance(architectures, str) or not isinstance(architectures, Sequence):
        raise ValueError("compatible_architectures must be a sequence of aws_lambda.Architecture")
    known = {architecture.name for architecture in DEFAULT_ARCHITECTURES}
    unique: dict[str, lambda_.Architecture] = {}
    for architecture in architectures:
        if not isinstance(architecture, lambda_.Architecture) or architecture.name not in known:
            raise ValueError(
                f"compatible_architectures holds {architecture!r}; use "
                "aws_lambda.Architecture.X86_64 and/or ARM_64"
            )
        unique.setdefault(architecture.name, architecture)
    if not unique:
        raise ValueError("compatible_architectures must name at least one architecture")
    return tuple(unique.values())
