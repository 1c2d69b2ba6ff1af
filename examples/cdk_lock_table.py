import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_

from dynalease.cdk import LockTable

app = cdk.App()
stack = cdk.Stack(app, "Orders")
# Partition key `key` (S), on demand, no TTL, retained when the stack goes.
locks = LockTable(stack, "Locks")
worker = lambda_.Function(
    stack,
    "Worker",
    runtime=lambda_.Runtime.PYTHON_3_13,
    handler="index.handler",
    code=lambda_.Code.from_inline("def handler(event, context):\n    pass\n"),
)
# DYNALEASE_TABLE, and the lock actions on this table only.
locks.configure_function(worker)
app.synth()
