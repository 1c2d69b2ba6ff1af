"""CDK constructs for dynalease: the lock table and the Lambda layer.

Needs the ``cdk`` extra (``pip install 'dynalease[cdk]'``). ``import dynalease``
never imports this package, so Lambda cold starts do not pay for aws_cdk.

Example::

    from dynalease.cdk import LockLayer, LockTable

    locks = LockTable(self, "Locks")
    layer = LockLayer(self, "LockLayer")
    locks.configure_function(worker, layer=layer)
"""

from __future__ import annotations

from .layer import LockLayer
from .table import LockTable

__all__ = ["LockLayer", "LockTable"]
