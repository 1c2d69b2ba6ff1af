"""LockLayer: dynalease (and optionally Powertools) as a Lambda layer, built without Docker."""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ._bytecode import interpreter_env_var
from ._checks import check_optional_name, check_removal_policy
from .build import LayerBuild, build_layer, running_python

__all__ = [
    "DEFAULT_ARCHITECTURES",
    "DEFAULT_RUNTIMES",
    "SOURCE_ONLY_WARNING",
    "LockLayer",
    "source_only_warning",
    "synth_runtime",
]

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
#: runtimes a default ``LockLayer`` serves, and those ``runtime=`` may name.
DEFAULT_RUNTIMES: tuple[lambda_.Runtime, ...] = _default_runtimes()

#: Both Lambda architectures; the layer is pure Python.
DEFAULT_ARCHITECTURES: tuple[lambda_.Architecture, ...] = (
    lambda_.Architecture.X86_64,
    lambda_.Architecture.ARM_64,
)

#: The ID of the synth warning for a runtime the layer carries no bytecode for.
SOURCE_ONLY_WARNING = "@dynalease/cdk:layerWithoutBytecode"


class LockLayer(lambda_.LayerVersion):
    """A Lambda layer for every Python runtime: dynalease, its dependencies and their bytecode.

    The ``python/`` content is built at synth time from the environment running
    the synth, without Docker and without downloading anything; boto3,
    botocore and the other packages the Lambda Python runtime ships are left
    out. Lambda's ``/opt`` is read-only, so a module without bytecode is compiled
    on every cold start: every module comes with the bytecode of each runtime's
    version side by side (``__pycache__/x.cpython-312.pyc``, ``x.cpython-313.pyc``,
    ...), compiled by an interpreter of that version found on the machine running
    the synth (on ``PATH``, under pyenv, or named by ``DYNALEASE_PYTHON_3_N``;
    docs/cdk.md). A version without an interpreter gets the source only (its
    functions work, and compile the modules at each cold start) and a synth
    warning naming what to install.

    For example:

        layer = LockLayer(self, "LockLayer")  # python3.11 and newer
        fn = lambda_.Function(..., runtime=lambda_.Runtime.PYTHON_3_13, layers=[layer])

        # The smallest layer: one runtime, whose interpreter the synth must find.
        slim = LockLayer(self, "Slim", runtime=lambda_.Runtime.PYTHON_3_13)

    :param include_powertools: also ship AWS Lambda Powertools (the ``lambda`` extra).
    :param include_recovery_extension: also ship the recovery extension
        (``extensions/dynalease-recovery``, docs/lambda.md): after a timeout or crash
        it deletes the dead runtime's lock rows at once instead of leaving them for a
        lease. On by default: it never delays an invocation and sends nothing unless a
        runtime died holding a lock.
    :param runtime: build the layer for this one Python runtime only (python3.11 or
        newer): about a third of the default layer's size, and the synth fails unless
        it finds an interpreter of that version. By default the layer serves every
        runtime in `DEFAULT_RUNTIMES`.
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
        runtimes = DEFAULT_RUNTIMES if runtime is None else (_check_runtime(runtime),)
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
            python=[each.name.removeprefix("python") for each in runtimes],
            allow_source_only=runtime is None,
        )
        names = ", ".join(each.name for each in runtimes)
        super().__init__(
            scope,
            id,
            code=lambda_.Code.from_asset(str(build.zip_path)),
            compatible_runtimes=list(runtimes),
            compatible_architectures=list(architectures),
            description=f"dynalease locks for {names}: {build.describe()}"[:256],
            license="Apache-2.0",
            removal_policy=removal_policy,
        )
        if build.source_only_pythons:
            cdk.Annotations.of(self).add_warning_v2(
                SOURCE_ONLY_WARNING, source_only_warning(build.source_only_pythons)
            )
        self._build = build
        self._runtimes = runtimes
        self._single = runtime is not None
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
        """The built zip: path, sha256, sizes, distributions, the versions with bytecode."""
        return self._build

    @property
    def runtimes(self) -> tuple[lambda_.Runtime, ...]:
        """The Python runtimes the layer serves (its ``CompatibleRuntimes``), oldest first."""
        return self._runtimes

    @property
    def runtime(self) -> lambda_.Runtime:
        """The one runtime of a layer built with ``runtime=``: give it to the functions using it.

        A default layer serves several runtimes, so this raises ``ValueError``: choose
        the functions' runtime yourself (any of `runtimes`).
        """
        if not self._single:
            raise ValueError(
                f"{self.node.path} serves every Python runtime "
                f"({', '.join(self.compatible_runtime_names)}), so it has no one runtime: give "
                "each function the runtime it needs (e.g. aws_lambda.Runtime.PYTHON_3_13), or "
                "build the layer with runtime= to have layer.runtime"
            )
        return self._runtimes[0]

    @property
    def compatible_runtime_names(self) -> tuple[str, ...]:
        """Names of the compatible runtimes, e.g. ``("python3.11", "python3.12", ...)``."""
        return tuple(each.name for each in self._runtimes)

    @property
    def compatible_architecture_names(self) -> tuple[str, ...]:
        """Names of the compatible architectures, e.g. ``("x86_64", "arm64")``."""
        return self._architecture_names


def source_only_warning(versions: Sequence[str]) -> str:
    """The synth warning for runtimes whose bytecode the layer lacks, naming what to install."""
    runtimes = ", ".join(f"python{version}" for version in versions)
    installs = " and ".join(
        f"Python {version} (e.g. pyenv install {version}, or set "
        f"{interpreter_env_var(version)} to its interpreter)"
        for version in versions
    )
    return (
        f"the layer has no bytecode for {runtimes}: no interpreter of that version was found "
        f"on the machine running the synth. Functions on {runtimes} work, but compile "
        "dynalease's modules from source at every cold start (Lambda's /opt is read-only). To "
        f"ship the bytecode, install {installs} and synthesize again; or give the LockLayer "
        "runtime= for the one runtime your functions use."
    )


def synth_runtime() -> lambda_.Runtime:
    """The Lambda runtime of the Python running the synth, e.g. ``Runtime.PYTHON_3_11``."""
    name = f"python{running_python()}"
    for known in DEFAULT_RUNTIMES:
        if known.name == name:
            return known
    raise ValueError(
        f"the synth runs on Python {running_python()}, which is not a Lambda runtime "
        "dynalease supports; pass runtime=aws_lambda.Runtime.PYTHON_3_13 (or another "
        "python3.11+ runtime)"
    )


def _check_runtime(runtime: lambda_.Runtime) -> lambda_.Runtime:
    if not isinstance(runtime, lambda_.Runtime):
        raise TypeError(
            f"runtime is {runtime!r}, not an aws_lambda.Runtime: pass e.g. "
            "aws_lambda.Runtime.PYTHON_3_13, or leave runtime out for every Python runtime"
        )
    version = _python_version(runtime)
    if version is None or version < _MIN_PYTHON:
        raise ValueError(
            f"dynalease needs Python 3.11 or newer; {runtime.name} cannot use the layer: pass "
            "runtime=aws_lambda.Runtime.PYTHON_3_13 (or another python3.11+ runtime), or leave "
            "runtime out for every Python runtime"
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
