"""LockLayer: dynalease (and optionally Powertools) as a Lambda layer, built without Docker."""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ._checks import check_optional_name, check_removal_policy
from .build import LayerBuild, build_layer, running_python

__all__ = ["DEFAULT_ARCHITECTURES", "DEFAULT_RUNTIMES", "LockLayer", "synth_runtime"]

_MIN_PYTHON = (3, 11)
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


#: python3.11 up to the newest Python runtime the installed aws-cdk-lib knows: the
#: runtimes a ``LockLayer`` can be built for (one per layer).
DEFAULT_RUNTIMES: tuple[lambda_.Runtime, ...] = _default_runtimes()

#: Both Lambda architectures; the layer is pure Python.
DEFAULT_ARCHITECTURES: tuple[lambda_.Architecture, ...] = (
    lambda_.Architecture.X86_64,
    lambda_.Architecture.ARM_64,
)


class LockLayer(lambda_.LayerVersion):
    """A Lambda layer for one Python runtime: dynalease, its dependencies and their bytecode.

    The ``python/`` content is built at synth time from the environment running
    the synth, without Docker and without downloading anything; boto3,
    botocore and the other packages the Lambda Python runtime ships are left
    out. Every module comes with the bytecode an interpreter of ``runtime``'s
    version compiles (Lambda's ``/opt`` is read-only, so a layer without it is
    compiled on every cold start), so the synth needs that interpreter (found on
    ``PATH``, under pyenv, or named by ``DYNALEASE_PYTHON_3_N``; docs/cdk.md), and
    the layer's ``compatible_runtimes`` is exactly ``runtime``. The same builder
    writes ``layer/dist/dynalease-layer-python3.N.zip``.

    Example::

        layer = LockLayer(self, "LockLayer", runtime=lambda_.Runtime.PYTHON_3_13)
        fn = lambda_.Function(..., runtime=layer.runtime, layers=[layer])

    :param include_powertools: also ship AWS Lambda Powertools (the ``lambda`` extra).
    :param include_recovery_extension: also ship the recovery extension
        (``extensions/dynalease-recovery``, docs/lambda.md): after a timeout or crash
        it deletes the dead runtime's lock rows at once instead of leaving them for a
        lease. On by default: it never delays an invocation and sends nothing unless a
        runtime died holding a lock.
    :param runtime: the functions' Python runtime, python3.11 or newer (default:
        the version of the Python running the synth). One layer per runtime; a
        function on another Python version needs a ``LockLayer`` of its own.
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
        runtime: lambda_.Runtime | None = None,
        compatible_architectures: Sequence[lambda_.Architecture] = DEFAULT_ARCHITECTURES,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        parameter_name: str | None = None,
    ) -> None:
        chosen = _check_runtime(runtime)
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
            python=chosen.name.removeprefix("python"),
        )
        super().__init__(
            scope,
            id,
            code=lambda_.Code.from_asset(str(build.zip_path)),
            compatible_runtimes=[chosen],
            compatible_architectures=list(architectures),
            description=f"dynalease locks for {chosen.name}: {build.describe()}"[:256],
            license="Apache-2.0",
            removal_policy=removal_policy,
        )
        self._build = build
        self._runtime = chosen
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
    def runtime(self) -> lambda_.Runtime:
        """The one Python runtime the layer is built for: give it to the functions using it."""
        return self._runtime

    @property
    def compatible_runtime_names(self) -> tuple[str, ...]:
        """Names of the compatible runtimes: the one runtime, e.g. ``("python3.13",)``."""
        return (self._runtime.name,)

    @property
    def compatible_architecture_names(self) -> tuple[str, ...]:
        """Names of the compatible architectures, e.g. ``("x86_64", "arm64")``."""
        return self._architecture_names


def synth_runtime() -> lambda_.Runtime:
    """The Lambda runtime of the Python running the synth: ``LockLayer``'s default ``runtime``."""
    name = f"python{running_python()}"
    for known in DEFAULT_RUNTIMES:
        if known.name == name:
            return known
    raise ValueError(
        f"the synth runs on Python {running_python()}, which is not a Lambda runtime "
        "dynalease supports; pass runtime=aws_lambda.Runtime.PYTHON_3_13 (or another "
        "python3.11+ runtime)"
    )


def _check_runtime(runtime: lambda_.Runtime | None) -> lambda_.Runtime:
    if runtime is None:
        return synth_runtime()
    if not isinstance(runtime, lambda_.Runtime):
        raise TypeError(f"runtime is {runtime!r}, not an aws_lambda.Runtime")
    version = _python_version(runtime)
    if version is None or version < _MIN_PYTHON:
        raise ValueError(
            f"dynalease needs Python 3.11 or newer; {runtime.name} cannot use the layer"
        )
    return runtime


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
