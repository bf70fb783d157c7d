"""What a synthesized block refers to: the resources and data sources named inside its Terraform expressions.

Pure functions over JSON-like values (no cdktf): the safety rules use them on the stack they judge
(terravixens.rules), `terravixens review` on two synthesized stacks (terravixens.stackdiff).

cdktf renders a reference as `${type.id.attr}`, but one nested in a function call or an operator has no `${` of its
own (`${lower(type.id.attr)}`, `${a ? type.id.x : ""}`): traversals are found anywhere inside each expression.
"""

from __future__ import annotations

import re
from functools import lru_cache

# A traversal inside an expression: `type.id` or `data.type.id` not preceded by a name character or a dot.
ADDRESS = re.compile(r"(?<![\w.-])((?:data\.)?[a-z][a-z0-9_]*\.[A-Za-z0-9_-]+)")
# An output of another stack read through the remote state cdktf adds for a cross-stack reference.
REMOTE_OUTPUT = re.compile(r"(?<![\w.-])data\.terraform_remote_state\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)")
# Terraform's other namespaces (var.node_tokens is a variable, not a resource of node "tokens").
NOT_RESOURCES = frozenset({"var", "local", "module", "each", "count", "path", "terraform", "self"})


def strings_in(value: object) -> list[str]:
    """Every string value inside a JSON-like value (map keys left out)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def expressions(text: str) -> list[str]:
    """The text inside each `${…}` of a string (braces counted; `$${` is an escape, not an expression)."""
    found, index = [], 0
    while (start := text.find("${", index)) != -1:
        if start > 0 and text[start - 1] == "$":
            index = start + 2
            continue
        depth, end = 1, start + 2
        while end < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        found.append(text[start + 2 : end - 1 if depth == 0 else end])
        index = end
    return found


@lru_cache(maxsize=1 << 16)
def _addresses_of(text: str) -> frozenset[str]:
    """The addresses one string refers to. A stack repeats the same references in every node's blocks: each distinct
    string is parsed once (bounded: a long-running process synthesizing many sites keeps the most recent)."""
    return frozenset(
        address
        for expression in expressions(text)
        for address in ADDRESS.findall(expression)
        if address.split(".", 1)[0] not in NOT_RESOURCES
    )


def addresses_in(value: object) -> set[str]:
    """Every address (`type.id`, `data.type.id`) of a resource or data source that `value` refers to, wherever in
    an expression."""
    found: set[str] = set()
    for text in strings_in(value):
        if "${" in text:
            found.update(_addresses_of(text))
    return found


def _type_and_id(address: str) -> tuple[str, str]:
    kind, logical_id = address.split(".")[-2:]  # ADDRESS matches `type.id` at least
    return kind, logical_id


def references(value: object) -> set[tuple[str, str]]:
    """Every (type, logical id) of a resource or data source that `value` refers to, data sources included."""
    return {_type_and_id(address) for address in addresses_in(value)}


def remote_outputs(value: object) -> set[tuple[str, str]]:
    """Every (remote state, output) that `value` reads, wherever in an expression."""
    found: set[tuple[str, str]] = set()
    for text in strings_in(value):
        if "${" in text and "terraform_remote_state" in text:
            for expression in expressions(text):
                found.update(REMOTE_OUTPUT.findall(expression))
    return found
