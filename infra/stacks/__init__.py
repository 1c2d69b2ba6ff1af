"""Stacks of the dynalease CDK app (see ``infra/app.py``)."""

from __future__ import annotations

from .example_stack import EXAMPLE_FUNCTIONS, ExampleStack
from .lock_stack import LAYER_PARAMETER_NAME, LockStack
from .nag import check_with_nag

__all__ = [
    "EXAMPLE_FUNCTIONS",
    "LAYER_PARAMETER_NAME",
    "ExampleStack",
    "LockStack",
    "check_with_nag",
]
