"""Shared pieces of the infra tests: the synthesized assembly and template walkers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCK_STACK = "DynaleaseLocks"
EXAMPLE_STACK = "DynaleaseExamples"


@dataclass(frozen=True)
class Assembly:
    """A synthesized cloud assembly read back from disk."""

    directory: Path
    manifest: dict[str, Any]
    templates: dict[str, dict[str, Any]]
    seconds: float
    started: float
    """Wall-clock time (time.time()) when the synthesis started."""

    def resources(self, stack: str, type_: str) -> dict[str, dict[str, Any]]:
        """Logical ID -> resource, for every resource of one CloudFormation type."""
        return {
            logical_id: resource
            for logical_id, resource in self.templates[stack]["Resources"].items()
            if resource["Type"] == type_
        }

    def messages(self, stack: str, level: str) -> list[str]:
        """``aws:cdk:error`` / ``aws:cdk:warning`` annotations (cdk-nag findings) of a stack."""
        metadata = self.manifest["artifacts"][stack].get("metadata", {})
        return [
            f"{path}: {entry['data']}"
            for path, entries in metadata.items()
            for entry in entries
            if entry["type"] == f"aws:cdk:{level}"
        ]

    def layer_asset(self) -> Path:
        """The layer zip the LockStack uploads, as staged in the assembly."""
        (layer,) = self.resources(LOCK_STACK, "AWS::Lambda::LayerVersion").values()
        return self.directory / f"asset.{layer['Properties']['Content']['S3Key']}"


def policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of every inline IAM policy in a template."""
    return [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


def strings_in(value: Any) -> Iterator[str]:
    """Every literal string inside a JSON value (intrinsics included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def sources_edited_since(started: float) -> list[str]:
    """dynalease source files modified after ``started`` (someone editing the tree mid-run)."""
    package = ROOT / "src" / "dynalease"
    return sorted(
        str(path.relative_to(package))
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.stat().st_mtime >= started
    )
