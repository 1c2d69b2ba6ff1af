"""cdk-nag for the app: AwsSolutions checks on every stack, and the few written-out exceptions.

Every suppression names the rule, the exact construct it applies to, and why
the finding does not apply to that construct. Nothing is suppressed stack-wide.
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, NagPackSuppression, NagSuppressions
from constructs import IConstruct

__all__ = ["check_with_nag", "suppress"]


def check_with_nag(scope: IConstruct) -> None:
    """Run the AwsSolutions rule pack on everything under ``scope`` at synth time.

    Findings become construct annotations (errors and warnings) on the offending
    resources; the infra tests assert there are no unsuppressed errors.
    """
    cdk.Aspects.of(scope).add(AwsSolutionsChecks(verbose=True))


def suppress(construct: IConstruct, rule: str, reason: str) -> None:
    """Suppress one AwsSolutions rule on ``construct`` (and its children), with a reason."""
    if len(reason.strip()) < 20:
        raise ValueError(f"suppressing {rule} on {construct.node.path} needs a real reason")
    NagSuppressions.add_resource_suppressions(
        construct, [NagPackSuppression(id=rule, reason=reason)], apply_to_children=True
    )
