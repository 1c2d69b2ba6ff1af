"""LockTable: the DynamoDB table the lock protocol runs on, and its exact grants."""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from ..constants import ENV_TABLE
from ._checks import check_optional_name, check_removal_policy
from .dashboard import LockDashboard
from .layer import LockLayer

__all__ = ["INSPECT_ACTIONS", "LOCK_ACTIONS", "SEMAPHORE_ACTIONS", "TABLE_ENV_VAR", "LockTable"]

#: The environment variable ``configure_function`` sets to the table name.
TABLE_ENV_VAR = ENV_TABLE

#: Every DynamoDB action a lock of any kind sends (protocols 1 and 2, several keys,
#: semaphore permits, the recovery extension's release), and nothing more. A
#: transaction's items are authorized by their own actions (PutItem, UpdateItem,
#: DeleteItem, ConditionCheckItem); ``TransactWriteItems`` is no IAM action.
LOCK_ACTIONS: tuple[str, ...] = (
    "dynamodb:GetItem",  # observe (strong read) and reconcile
    "dynamodb:BatchGetItem",  # observe every row of a multi-key lock or a semaphore at once
    "dynamodb:PutItem",  # acquire and take over
    "dynamodb:UpdateItem",  # renew; with fencing=True also acquire, take over, release
    "dynamodb:DeleteItem",  # release
    "dynamodb:ConditionCheckItem",  # check_in inside TransactWriteItems
)

#: What a semaphore sends: the same as any lock (its permits are read in one ``BatchGetItem``).
SEMAPHORE_ACTIONS: tuple[str, ...] = LOCK_ACTIONS

#: Read-only actions for ``dynalease inspect`` / ``dynalease doctor``: what they send.
INSPECT_ACTIONS: tuple[str, ...] = (
    "dynamodb:DescribeTable",  # doctor: key schema, status, replicas
    "dynamodb:DescribeTimeToLive",  # doctor: TTL must be off
    "dynamodb:GetItem",  # inspect KEY, doctor's strong-read probe
    "dynamodb:Scan",  # inspect: list the lock rows
)

# With a customer managed key, DynamoDB checks the caller's access to the key on
# every item request. Named actions only, so no policy carries a wildcard.
_KEY_LOCK_ACTIONS = ("kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey")
_KEY_INSPECT_ACTIONS = ("kms:Decrypt", "kms:DescribeKey")

_PARTITION_KEY = "key"
#: The TTL attribute of single-flight result items (``dynalease._results.EXPIRES_ATTRIBUTE``):
#: lock rows never carry it, so TTL on it can never delete a lock row.
RESULT_EXPIRY_ATTRIBUTE = "dynalease_expires"
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.\-]{3,255}")


class LockTable(Construct):
    """An on-demand DynamoDB table for dynalease locks.

    Partition key ``key`` (S), no sort key, no TTL and no stream: the lock rows
    are exactly the protocol's rows and expire by lease, never by TTL.

    For example:

        locks = LockTable(self, "Locks")
        locks.configure_function(worker)  # sets DYNALEASE_TABLE and grants the lock actions

    :param table_name: a fixed name; by default CloudFormation generates one.
    :param removal_policy: what happens to the table when it leaves the stack (RETAIN).
    :param point_in_time_recovery: continuous backups (on by default).
    :param deletion_protection: refuse ``DeleteTable`` while set (on by default, so a
        mistaken ``cdk destroy`` or console delete cannot drop held locks; pass
        ``False`` for throwaway stacks).
    :param encryption_key: a customer managed KMS key; by default the AWS owned key.
    :param result_expiry: enable TTL on ``dynalease_expires``, the attribute only
        single-flight result items carry, so DynamoDB deletes stale results
        (docs/single-flight.md); lock rows never carry it. Off by default.
    :param dashboard: add a CloudWatch dashboard and alarms (`LockDashboard`) over
        the middleware's EMF metrics in ``metrics_namespace`` / ``metrics_service`` (your
        Powertools ``Metrics`` namespace and service), alarming at a lost lock, a throttled
        lock request and a p99 wait over ``wait_p99_alarm_ms``.
    :param contributor_insights: CloudWatch Contributor Insights on the table's throttled
        keys (the hot lock keys); billed per event, so throttled keys only.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table_name: str | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        point_in_time_recovery: bool = True,
        deletion_protection: bool = True,
        encryption_key: kms.IKey | None = None,
        result_expiry: bool = False,
        dashboard: bool = False,
        metrics_namespace: str = "dynalease",
        metrics_service: str = "dynalease",
        wait_p99_alarm_ms: float = 5_000.0,
        contributor_insights: bool = False,
    ) -> None:
        check_optional_name(
            table_name,
            prop="table_name",
            pattern=_TABLE_NAME,
            max_length=255,
            rule="a DynamoDB table name has 3-255 characters from letters, digits, '_', '-' "
            "and '.'; or leave it out to let CloudFormation generate one",
        )
        check_removal_policy(removal_policy)
        for name, value in (
            ("point_in_time_recovery", point_in_time_recovery),
            ("deletion_protection", deletion_protection),
            ("result_expiry", result_expiry),
            ("dashboard", dashboard),
            ("contributor_insights", contributor_insights),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if encryption_key is not None and not _is_key(encryption_key):
            raise TypeError(
                "encryption_key must be an aws_kms.IKey (for example kms.Key(...) or "
                f"kms.Key.from_key_arn(...)), got {type(encryption_key).__name__}"
            )
        super().__init__(scope, id)

        self._encryption_key = encryption_key
        self.table: dynamodb.Table = dynamodb.Table(
            self,
            "Table",
            table_name=table_name,
            partition_key=dynamodb.Attribute(
                name=_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=point_in_time_recovery
            ),
            deletion_protection=deletion_protection,
            encryption=(
                dynamodb.TableEncryption.CUSTOMER_MANAGED
                if encryption_key is not None
                else dynamodb.TableEncryption.DEFAULT
            ),
            encryption_key=encryption_key,
            removal_policy=removal_policy,
            time_to_live_attribute=RESULT_EXPIRY_ATTRIBUTE if result_expiry else None,
            contributor_insights_specification=(
                dynamodb.ContributorInsightsSpecification(
                    enabled=True, mode=dynamodb.ContributorInsightsMode.THROTTLED_KEYS
                )
                if contributor_insights
                else None
            ),
        )
        """The underlying ``aws_dynamodb.Table`` (construct ID ``Table``)."""
        self.dashboard: LockDashboard | None = None
        """With ``dashboard=True``: the dashboard and alarms (construct ID ``Dashboard``)."""
        if dashboard:
            self.dashboard = LockDashboard(
                self,
                "Dashboard",
                table=self.table,
                namespace=metrics_namespace,
                service=metrics_service,
                wait_p99_alarm_ms=wait_p99_alarm_ms,
            )

    @property
    def table_name(self) -> str:
        """The table's name (a token until deploy unless ``table_name`` was given)."""
        return self.table.table_name

    @property
    def table_arn(self) -> str:
        """The table's ARN."""
        return self.table.table_arn

    @property
    def encryption_key(self) -> kms.IKey | None:
        """The customer managed key, if the table has one."""
        return self._encryption_key

    def grant_lock(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` take, renew and release locks of every kind: exactly `LOCK_ACTIONS`.

        Every kind: with ``fencing`` and ``keys=[...]``, and semaphores. The statement
        names this table's ARN only (no index ARNs, no wildcards).
        With a customer managed key, it also grants the key use DynamoDB needs
        (``kms:Decrypt``, ``kms:DescribeKey``, ``kms:Encrypt``,
        ``kms:GenerateDataKey``) on that key only.
        """
        return self._grant(grantee, LOCK_ACTIONS, _KEY_LOCK_ACTIONS)

    def grant_semaphore(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` hold locks and semaphore permits: the same as `grant_lock`.

        Kept for the code that calls it: `grant_lock` covers semaphores too, since a
        multi-key lock reads its rows with ``dynamodb:BatchGetItem`` as a semaphore reads
        its permits.
        """
        return self._grant(grantee, SEMAPHORE_ACTIONS, _KEY_LOCK_ACTIONS)

    def grant_inspect(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read lock rows and the table settings (the CLI's inspect/doctor)."""
        return self._grant(grantee, INSPECT_ACTIONS, _KEY_INSPECT_ACTIONS)

    def configure_function(
        self,
        function: lambda_.Function,
        layer: lambda_.ILayerVersion | None = None,
    ) -> iam.Grant:
        """Wire a Lambda function to this table.

        Sets ``DYNALEASE_TABLE`` to the table name (the middleware's default table, and
        the table the recovery extension releases rows in; list other lock tables of the
        function in ``DYNALEASE_RECOVERY_TABLES``), grants `grant_lock` to the
        function's role, and adds ``layer`` (for example a ``LockLayer``) if given. A
        ``LockLayer`` is checked against the function's runtime and architecture, so a
        mismatch fails at synth time, not at the first cold start. Returns the lock grant.
        """
        if not isinstance(function, lambda_.Function):
            raise TypeError(
                "configure_function needs an aws_lambda.Function defined in this app (it sets an "
                "environment variable); for an imported function, call grant_lock(function) and "
                f"set {TABLE_ENV_VAR} where the function is defined. Got {type(function).__name__}"
            )
        if layer is not None:
            _check_layer(function, layer)
            function.add_layers(layer)
        function.add_environment(TABLE_ENV_VAR, self.table_name)
        return self.grant_lock(function)

    def _grant(
        self, grantee: iam.IGrantable, actions: tuple[str, ...], key_actions: tuple[str, ...]
    ) -> iam.Grant:
        if not hasattr(grantee, "grant_principal"):
            raise TypeError(
                "grantee must be an aws_iam.IGrantable (a role, user, or function), "
                f"got {type(grantee).__name__}"
            )
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(actions),
            resource_arns=[self.table.table_arn],
        )
        if self._encryption_key is not None:
            grant = grant.combine(self._encryption_key.grant(grantee, *key_actions))
        return grant


def _is_key(value: object) -> bool:
    return all(hasattr(value, name) for name in ("key_arn", "grant"))


def _check_layer(function: lambda_.Function, layer: object) -> None:
    if not hasattr(layer, "layer_version_arn"):
        raise TypeError(
            f"layer must be an aws_lambda.ILayerVersion such as a LockLayer, got "
            f"{type(layer).__name__}: pass LockLayer(stack, 'LockLayer'), or leave layer out "
            "and add the layer to the function yourself"
        )
    runtime = function.runtime
    if runtime.family != lambda_.RuntimeFamily.PYTHON:
        raise ValueError(
            f"the dynalease layer is for Python functions, but {function.node.path} uses "
            f"{runtime.name}; give it runtime=aws_lambda.Runtime.PYTHON_3_13 (or another "
            "python3.11+ runtime), or leave layer out for this function"
        )
    if isinstance(layer, LockLayer):
        if runtime.name not in layer.compatible_runtime_names:
            supported = ", ".join(layer.compatible_runtime_names)
            raise ValueError(
                f"{function.node.path} uses {runtime.name}, which {layer.node.path} does not "
                f"support (compatible runtimes: {supported}): {_runtime_fix(runtime, layer)}"
            )
        architecture = function.architecture.name
        if architecture not in layer.compatible_architecture_names:
            raise ValueError(
                f"{function.node.path} runs on {architecture}, which {layer.node.path} does not "
                f"support (compatible architectures: "
                f"{', '.join(layer.compatible_architecture_names)}): leave "
                "compatible_architectures out of the LockLayer for both architectures, or give "
                f"the function architecture=aws_lambda.Architecture."
                f"{_ARCHITECTURE_NAMES[layer.compatible_architecture_names[0]]}"
            )


_ARCHITECTURE_NAMES = {"x86_64": "X86_64", "arm64": "ARM_64"}


def _runtime_fix(runtime: lambda_.Runtime, layer: LockLayer) -> str:
    """What to do about a function whose runtime the layer does not serve."""
    version = re.fullmatch(r"python3\.(\d+)", runtime.name)
    if version is None or int(version.group(1)) < 11:
        return (
            "dynalease needs Python 3.11 or newer; give the function "
            "runtime=aws_lambda.Runtime.PYTHON_3_13 (or another python3.11+ runtime)"
        )
    return (
        "leave runtime out of the LockLayer for a layer that serves every Python runtime, "
        f"or give this function a LockLayer(..., runtime=aws_lambda.Runtime.{_constant(runtime)}) "
        "of its own"
    )


def _constant(runtime: lambda_.Runtime) -> str:
    """``python3.12`` -> ``PYTHON_3_12``: the ``aws_lambda.Runtime`` attribute's name."""
    return runtime.name.upper().replace(".", "_").replace("PYTHON", "PYTHON_")
