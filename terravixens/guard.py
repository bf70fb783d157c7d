"""Plan guard: what synth cannot know, because it needs the previous state, checked on `terraform show -json`.

Synth-time rules (terravixens.rules) make every change *per node*; a plan also knows what exists today. The
guard refuses a plan that would:

- PG001 replace an existing node's VM or configuration apply (a replacement wipes a node that stays);
- PG002 let more than one control plane leave etcd in one apply (each leaving control plane is reset gracefully
  and leaves etcd; one at a time keeps the remaining members' quorum predictable). Apply the first leave alone
  with `-target`, then the rest;
- PG003 leave no control plane of today's cluster (new control planes cannot join a cluster whose members all
  left: that is a new cluster, and the data in etcd is gone);
- PG004 destroy or replace the cluster's machine secrets, or bootstrap a cluster again.

A control plane is recognised by the machine type in the configuration its apply carries in the state.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from terravixens.inputs import InputError, Problem, load_json, read_text
from terravixens.logical_ids import owner_of
from terravixens.roles import Role

APPLY = "talos_machine_configuration_apply"
VMS = {"proxmox_virtual_environment_vm", "proxmox_virtual_environment_vm2", "proxmox_vm", "proxmox_cloned_vm",
       "proxmox_virtual_environment_cloned_vm"}


@dataclass(frozen=True)
class Violation:
    code: str
    message: str

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def _machine_type(values: dict | None) -> str | None:
    if not values:
        return None
    for key in ("machine_configuration", "machine_configuration_input"):
        text = values.get(key)
        if isinstance(text, str) and text.strip():
            try:
                document = next(iter(yaml.safe_load_all(text)), None)
            except yaml.YAMLError:
                continue
            if isinstance(document, dict):
                return (document.get("machine") or {}).get("type")
    return None


def _prior_resources(plan: dict) -> list[dict]:
    found, modules = [], [plan.get("prior_state", {}).get("values", {}).get("root_module", {})]
    while modules:
        module = modules.pop()
        found += module.get("resources", [])
        modules += module.get("child_modules", [])
    return found


def check_plan(plan: dict) -> list[Violation]:
    violations: list[Violation] = []
    changes = [c for c in plan.get("resource_changes", []) if c.get("mode", "managed") == "managed"]
    prior_control_planes = {r["address"] for r in _prior_resources(plan)
                            if r.get("type") == APPLY and _machine_type(r.get("values")) == Role.CONTROLPLANE}
    prior_bootstraps = {r["address"] for r in _prior_resources(plan) if r.get("type") == "talos_machine_bootstrap"}

    leaving = []
    for change in changes:
        actions, kind, address = change["change"]["actions"], change["type"], change["address"]
        replaced = "delete" in actions and "create" in actions
        if replaced and (kind in VMS or kind == APPLY):
            node = owner_of(change.get("name", "")) or address
            violations.append(Violation("PG001", (
                f"{address} would be replaced: node {node!r} stays in the site but would be "
                f"{'wiped' if kind == APPLY else 'destroyed and re-created'}. Find the attribute that forces it "
                f"(terraform plan shows '# forces replacement') and revert it.")))
        if kind == APPLY and "delete" in actions and address in prior_control_planes:
            leaving.append(address)
        if kind == "talos_machine_secrets" and "delete" in actions:
            violations.append(Violation("PG004", (
                f"{address} would be destroyed: the cluster's certificates and keys would be lost. "
                f"Restore the cluster in the site file.")))
        if kind == "talos_machine_bootstrap" and "create" in actions and (prior_bootstraps or replaced):
            violations.append(Violation("PG004", (
                f"{address} would bootstrap etcd again on a cluster that was bootstrapped: keep the bootstrap "
                f"resource's address and its ignore_changes = all.")))

    if len(leaving) > 1:
        violations.append(Violation("PG002", (
            f"{len(leaving)} control planes would leave etcd in one apply ({', '.join(sorted(leaving))}): apply "
            f"one first with `terraform apply -target={sorted(leaving)[0]}`, then plan again.")))
    staying = prior_control_planes - set(leaving)
    if prior_control_planes and not staying:
        violations.append(Violation("PG003", (
            f"no control plane of the current cluster would remain ({', '.join(sorted(prior_control_planes))} all "
            f"leave): new control planes cannot join a cluster whose members all left. Keep at least one.")))
    return violations


PLAN_LIMIT = 512 * 1024 * 1024


def load_plan(path: str | Path, limit: int = PLAN_LIMIT) -> dict:
    """A plan file (or '-' for stdin), read strictly and bounded; InputError when it cannot be used."""
    text = read_text(path, limit=limit, what="plan")
    plan = load_json(text, path, what="plan")
    if not isinstance(plan, dict):
        raise InputError(path, [Problem("(top level)", "is not a JSON object: give the output of "
                                                       "`terraform show -json PLANFILE`")], "plan")
    return plan


def check_plan_file(path: str | Path, limit: int = PLAN_LIMIT) -> list[Violation]:
    return check_plan(load_plan(path, limit))
