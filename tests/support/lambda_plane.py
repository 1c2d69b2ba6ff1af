"""The local Lambda control plane the recovery tests run against.

A stand-in written from AWS's published Runtime API and Extensions API (not
Lambda itself); it lives in ``dynalease_dev.lambda_plane`` so the
benchmark and ``dynalease-dev invoke --lifecycle`` use the same one. See its
docstring for what it implements and how it enforces the function timeout.
"""

from __future__ import annotations

from dynalease_dev.lambda_plane import SHUTDOWN_WINDOW_MS, ControlPlane, Invocation

__all__ = ["SHUTDOWN_WINDOW_MS", "ControlPlane", "Invocation"]
