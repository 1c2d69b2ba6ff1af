"""CDK constructs for dynalease: the lock table and the Lambda layer.

Needs the ``cdk`` extra (``pip install 'dynalease[cdk]'``). ``import dynalease``
never imports this package, so Lambda cold starts do not pay for aws_cdk.

For example:

    from dynalease.cdk import LockLayer, LockTable

    locks = LockTable(self, "Locks")
    layer = LockLayer(self, "LockLayer")
    locks.configure_function(worker, layer=layer)

The constructs are imported on first use: `dynalease.cdk.build` (the layer
builder) lives here too, and ``layer/build.py`` imports it without aws_cdk.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .layer import LockLayer
    from .table import LockTable

__all__ = ["LockLayer", "LockTable"]

_HOMES = {"LockLayer": ".layer", "LockTable": ".table"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
