"""Prop checks the constructs share, so misuse fails at construction with one kind of message."""

from __future__ import annotations

import re

import aws_cdk as cdk


def check_removal_policy(value: object) -> None:
    if not isinstance(value, cdk.RemovalPolicy):
        raise TypeError(
            f"removal_policy must be an aws_cdk.RemovalPolicy (e.g. RemovalPolicy.RETAIN), "
            f"got {value!r}"
        )


def check_optional_name(
    value: object, *, prop: str, pattern: re.Pattern[str], max_length: int, rule: str
) -> None:
    """``None``, a token resolved at deploy time, or a literal matching ``pattern``."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{prop} must be a str or None, got {type(value).__name__}")
    if cdk.Token.is_unresolved(value):
        return
    if len(value) > max_length or not pattern.fullmatch(value):
        raise ValueError(f"{prop} {value!r} is not valid: {rule}")
