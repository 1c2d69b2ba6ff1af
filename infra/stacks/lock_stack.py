"""LockStack: the shared lock table and the Lambda layer, deployed once per account and Region."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from dynalease.cdk import LockLayer, LockTable
from dynalease.cdk.layer import synth_runtime

#: The SSM parameter holding the current layer version ARN.
LAYER_PARAMETER_NAME = "/dynalease/layer-arn"


class LockStack(cdk.Stack):
    """The lock table, the layer and the SSM parameter naming the layer version.

    Outputs ``TableName`` and ``LayerVersionArn``. Both resources are retained when
    the stack is deleted: lock rows may still be held, and functions elsewhere may
    still reference the layer version.
    """

    def __init__(self, scope: Construct, id: str, **kwargs: Any) -> None:
        super().__init__(scope, id, description="dynalease lock table and Lambda layer", **kwargs)
        self.locks = LockTable(self, "Locks")
        # The examples run on the synth's Python, so the smallest layer serves them (and
        # layer/build.py writes the same zip); LockLayer's default serves every runtime.
        self.layer = LockLayer(
            self, "Layer", runtime=synth_runtime(), parameter_name=LAYER_PARAMETER_NAME
        )
        cdk.CfnOutput(
            self, "TableName", value=self.locks.table_name, description="dynalease lock table"
        )
        cdk.CfnOutput(
            self,
            "LayerVersionArn",
            value=self.layer.layer_version_arn,
            description="dynalease Lambda layer version",
        )
        cdk.CfnOutput(
            self,
            "LayerParameterName",
            value=LAYER_PARAMETER_NAME,
            description="SSM parameter holding the current layer version ARN",
        )
