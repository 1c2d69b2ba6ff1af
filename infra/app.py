"""The dynalease CDK app: ``python infra/app.py`` synthesizes both stacks to ``cdk.out``.

No CDK CLI is needed to synthesize; ``cdk deploy`` (run from ``infra/``, which
reads ``cdk.json``) deploys the same app. Stacks:

- ``DynaleaseLocks``: the lock table, the Lambda layer and an SSM parameter
  holding the layer ARN, with outputs for the table name and layer ARN.
- ``DynaleaseExamples``: the example handlers from ``examples/lambda`` behind
  SQS (standard and FIFO), EventBridge and API Gateway (REST and HTTP), plus
  one function invoked directly.

cdk-nag's AwsSolutions checks run on both stacks during synthesis; see
``stacks/nag.py`` for every suppression and its reason.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# Node 20 runs jsii here; its deprecation banners would drown the synth output.
# Set before aws_cdk is imported, because the import starts the jsii runtime.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk

INFRA_DIR = Path(__file__).resolve().parent
REPO_ROOT = INFRA_DIR.parent
if str(INFRA_DIR) not in sys.path:
    sys.path.insert(0, str(INFRA_DIR))

from stacks import LAYER_PARAMETER_NAME, ExampleStack, LockStack, check_with_nag  # noqa: E402


def build_app(outdir: str | os.PathLike[str] | None = None) -> cdk.App:
    """Build the app with both stacks and the cdk-nag checks; call ``synth()`` on it.

    ``outdir`` defaults to ``$CDK_OUTDIR`` (set by the CDK CLI), else ``cdk.out``
    at the repository root.
    """
    target = outdir or os.environ.get("CDK_OUTDIR") or REPO_ROOT / "cdk.out"
    # The same feature flags whether the CDK CLI (which reads cdk.json) runs the app or not.
    context = json.loads((INFRA_DIR / "cdk.json").read_text())["context"]
    app = cdk.App(outdir=str(target), context=context)
    env = cdk.Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
    )
    locks = LockStack(app, "DynaleaseLocks", env=env)
    examples = ExampleStack(
        app,
        "DynaleaseExamples",
        locks=locks.locks,
        layer_parameter_name=LAYER_PARAMETER_NAME,
        env=env,
    )
    # The SSM parameter is read at deploy time, so order the deployments explicitly.
    examples.add_stack_dependency(locks, "reads the layer ARN from SSM at deploy time")
    check_with_nag(app)
    return app


def main() -> None:
    started = time.perf_counter()
    assembly = build_app().synth()
    elapsed = time.perf_counter() - started
    names = ", ".join(stack.stack_name for stack in assembly.stacks)
    print(f"synthesized {names} to {assembly.directory} in {elapsed:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
