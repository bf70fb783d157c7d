"""A plan, per layer and per node: which addresses are created, updated, replaced or deleted, and for updates the
attributes that change (names only: values can be secrets)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from terravixens.guard.plan import Change, Plan
from terravixens.logical_ids import CLUSTER_PREFIX, HYPERVISOR_PREFIX, owner_of, standalone_owner_of

SYMBOLS = {"create": "+", "delete": "-", "update": "~", "replace": "-/+", "forget": "forget", "read": "<="}


def verb(change: Change) -> str:
    if change.replaced:
        return "replace"
    for action in ("create", "delete", "update", "forget", "read"):
        if action in change.actions:
            return action
    return "no-op"


def owner(name: str) -> str:
    """'node cp-a', 'standalone dns1', 'hypervisor pve1', 'cluster' or 'other', from the logical id (ADR 0006,
    ADR 0025)."""
    node = owner_of(name)
    if node is not None:
        return f"node {node}"
    standalone = standalone_owner_of(name)
    if standalone is not None:
        return f"standalone {standalone}"
    if name.startswith(HYPERVISOR_PREFIX):
        return f"hypervisor {name[len(HYPERVISOR_PREFIX) :].split('_', 1)[0]}"
    if name.startswith(CLUSTER_PREFIX):
        return "cluster"
    return "other"


def changed_attributes(change: Change) -> list[str]:
    keys = set(change.before) | set(change.after) | set(change.after_unknown)
    return sorted(
        key for key in keys if change.after_unknown.get(key) or change.before.get(key) != change.after.get(key)
    )


def grouped(changes: Iterable[Change]) -> dict[str, list[Change]]:
    groups: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        if verb(change) not in ("no-op", "read"):
            groups[owner(change.name)].append(change)
    return dict(sorted(groups.items(), key=lambda item: (item[0] in ("cluster", "other"), item[0])))


def lines(plan: Plan, indent: str = "  ") -> list[str]:
    """Human lines, one group per owner, e.g. `node cp-a: ~ proxmox_virtual_environment_vm.node_cp-a_vm (cpu)`."""
    out = []
    for group, changes in grouped(plan.changes).items():
        out.append(f"{indent}{group}:")
        for change in sorted(changes, key=lambda c: c.address):
            detail = ""
            if verb(change) == "update":
                detail = f" ({', '.join(changed_attributes(change)[:8]) or 'computed values'})"
            out.append(f"{indent}  {SYMBOLS[verb(change)]} {change.address}{detail}")
    return out


def counts(plan: Plan) -> str:
    found: defaultdict[str, int] = defaultdict(int)
    for change in plan.changes:
        found[verb(change)] += 1
    parts = [f"{found[key]} to {key}" for key in ("create", "update", "replace", "delete", "forget") if found[key]]
    return ", ".join(parts) or "no changes"
