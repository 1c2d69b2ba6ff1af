"""The request id of the Lambda invocation a guard is made in: its rows' holder names it.

A module of its own, a context variable and nothing else, because the middleware sets it
on its cold path (``_lambda/invocation.py``) while the holder map (``holder.py``) loads
only with the engine.
"""

from __future__ import annotations

import contextvars

__all__ = ["INVOCATION"]

#: Set by the middleware with the invocation's deadline; read when a guard is made.
INVOCATION: contextvars.ContextVar[str] = contextvars.ContextVar("dynalease_invocation")
