"""Shared plumbing of the safety rules: naming, messages, and reading what a construct will synthesize."""
from __future__ import annotations

import re

import jsii
from cdktf import (
    Annotations,
    DefaultTokenResolver,
    IAspect,
    StringConcat,
    TerraformDataSource,
    TerraformElement,
    TerraformResource,
    TerraformStack,
    Tokenization,
)
from constructs import IConstruct

REFERENCE = re.compile(r"\$\{(?:data\.)?([a-z0-9_]+)\.([A-Za-z0-9_-]+)")


@jsii.implements(IAspect)
class Rule:
    """A named synth-time rule. Subclasses set `code`, `name` and `why`, and implement `visit`."""

    code = "TV000"
    name = "Rule"
    why = ""

    def visit(self, node: IConstruct) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def message(self, detail: str) -> str:
        return f"[{self.code} {self.name}] {detail} Why: {self.why}"

    def fail(self, node: IConstruct, detail: str) -> None:
        Annotations.of(node).add_error(self.message(detail))


def logical_id(element: TerraformElement) -> str:
    """The id the element is synthesized under, overrides included (Stack.get_logical_id ignores overrides)."""
    return element.friendly_unique_id


def is_terraform_block(node: IConstruct) -> bool:
    return isinstance(node, (TerraformResource, TerraformDataSource))


def resolved(element: TerraformElement) -> dict:
    """The element's JSON as it will be synthesized, references rendered as ${type.name...}."""
    return Tokenization.resolve(element.to_terraform(), scope=TerraformStack.of(element), preparing=False,
                                resolver=DefaultTokenResolver(StringConcat()))


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def references(value) -> set[tuple[str, str]]:
    """Every (type, logical id) that `value` refers to, data sources included."""
    found: set[tuple[str, str]] = set()
    for text in strings_in(value):
        found.update(REFERENCE.findall(text))
    return found


def enclosing(node: IConstruct, kind: type):
    """The nearest ancestor (or the node itself) of class `kind`, else None."""
    for scope in reversed(node.node.scopes):
        if isinstance(scope, kind):
            return scope
    return None
