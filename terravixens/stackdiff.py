"""Structural diff of synthesized stacks (cdk.tf.json), as Terraform would act on them: per stack, the addresses
added, removed and changed, and for a changed address the attribute paths that differ.

"Changed" means changed in what Terraform acts on: attributes under lifecycle.ignore_changes never count, and a
change flows along references out of data sources and terraform_data (their results are re-read or
re-computed), as a plan would show it. Used by `terravixens review` and by the scenario tests. Pure (no cdktf).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from terravixens.expressions import addresses_in


def addresses(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Terraform address -> body (metadata removed) for every resource, data source and output of a stack."""
    found: dict[str, dict[str, Any]] = {}
    for kind, prefix in (("resource", ""), ("data", "data.")):
        for rtype, items in stack.get(kind, {}).items():
            for name, body in items.items():
                found[f"{prefix}{rtype}.{name}"] = {k: v for k, v in body.items() if k != "//"}
    for name, body in stack.get("output", {}).items():
        found[f"output.{name}"] = body
    return found


def effective(body: dict[str, Any]) -> dict[str, Any]:
    """What Terraform acts on: attributes listed in lifecycle.ignore_changes never cause a change."""
    ignored = body.get("lifecycle", {}).get("ignore_changes", [])
    if ignored == "all":
        return {"lifecycle": body["lifecycle"]}
    result = copy.deepcopy(body)
    for path in ignored:
        _drop(result, path)
    return result


def _drop(body: Any, path: str) -> None:
    parts = path.replace("[", ".").replace("]", "").split(".")
    target = body
    for part in parts[:-1]:
        if isinstance(target, list):
            target = target[int(part)] if int(part) < len(target) else None
        elif isinstance(target, dict):
            target = target.get(part)
        if target is None:
            return
    if isinstance(target, dict):
        target.pop(parts[-1], None)
    elif isinstance(target, list) and int(parts[-1]) < len(target):
        target.pop(int(parts[-1]))


def changed_paths(before: object, after: object, prefix: str = "", limit: int = 12) -> list[str]:
    """Dotted paths of the leaves that differ (`disk[0].size`, `input.workers`), at most `limit`."""
    found: list[str] = []

    def walk(old: object, new: object, path: str) -> None:
        if len(found) >= limit or old == new:
            return
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new)):
                walk(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            for index, (a, b) in enumerate(zip(old, new, strict=True)):
                walk(a, b, f"{path}[{index}]")
        else:
            found.append(path or "(whole)")

    walk(before, after, prefix)
    return found


@dataclass
class Changes:
    added: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    attributes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def touched(self) -> set[str]:
        return self.added | self.removed | self.changed

    def __bool__(self) -> bool:
        return bool(self.touched)


def diff_stack(before: dict[str, Any], after: dict[str, Any]) -> Changes:
    """Added, removed and changed addresses. A change also flows along references out of data sources and
    terraform_data (their results are re-read or re-computed), as Terraform's plan would show it: a new Kubernetes
    version changes the machine configuration data sources, and through them every node's apply."""
    old, new = addresses(before), addresses(after)
    changed = {a for a in set(old) & set(new) if effective(old[a]) != effective(new[a])}
    attributes = {a: changed_paths(effective(old[a]), effective(new[a])) for a in changed}
    flowing = {a for a in changed if a.startswith(("data.", "terraform_data."))}
    while flowing:
        reached = {a for a in set(old) & set(new) if a not in changed and addresses_in(effective(new[a])) & flowing}
        for address in reached:
            attributes[address] = [f"(reads {', '.join(sorted(addresses_in(effective(new[address])) & flowing))})"]
        changed |= reached
        flowing = {a for a in reached if a.startswith(("data.", "terraform_data.", "output."))}
    return Changes(added=set(new) - set(old), removed=set(old) - set(new), changed=changed, attributes=attributes)


def diff(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, Changes]:
    """Per stack, only the stacks that changed (a stack that appears or disappears counts as all-added/removed)."""
    result = {}
    for name in sorted(set(before) | set(after)):
        changes = diff_stack(before.get(name, {}), after.get(name, {}))
        if changes:
            result[name] = changes
    return result
