"""The plan guard: each check refuses its case and lets the allowed ones through, on fixture plans in the shape
`terraform show -json` prints — hand-made for the Talos side (tests/fixtures/plans/hand_made.py), captured from real
plans against the fake Proxmox VE for the Proxmox side (real-*.json) — and anything that is not a plan is an input
error (exit 2), never an "ok"."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path

import pytest
import yaml

from terravixens import catalogue
from terravixens.guard import (
    ALL_CHECKS,
    Fate,
    GuardContext,
    NotAPlan,
    RebootChecks,
    Usage,
    check_plan,
    node_view,
    ok_line,
    refusals,
)
from terravixens.guard.context import site_roles, site_usage
from terravixens.guard.plan import read_plan
from terravixens.layers import layer_named
from terravixens.rules import reset_scoped_to_node, storage_prevent_destroy
from tests import support
from tests.fixtures.plans import hand_made, real_shapes

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "tests" / "fixtures" / "plans"
THREE = {"cp-a": "controlplane", "cp-b": "controlplane", "cp-c": "controlplane", "wk-a": "worker", "wk-b": "worker"}
FIVE = {**{f"cp-{x}": "controlplane" for x in "abcde"}, "wk-a": "worker"}


def fixture(name: str) -> dict:
    return json.loads((PLANS / name).read_text())


def log(name: str) -> RebootChecks:
    return RebootChecks.from_log(json.loads(line) for line in (PLANS / name).read_text().splitlines())


def codes(violations) -> list[str]:
    return sorted(v.code for v in violations)


# ---------------------------------------------------------------------------------------------------- catalogue
def test_each_check_is_named_and_explained_once():
    assert [check.code for check in ALL_CHECKS] == [f"PG{n:03d}" for n in range(1, 11)]
    assert len({check.name for check in ALL_CHECKS}) == len(ALL_CHECKS)
    for check in ALL_CHECKS:
        assert re.fullmatch(r"[A-Z][A-Za-z]+", check.name) and len(check.why) > 60, check.code
        assert type(check).__module__.startswith("terravixens.guard.checks."), check.code
    assert len({type(check).__module__ for check in ALL_CHECKS}) == len(ALL_CHECKS)  # one module per check


def test_rules_and_guard_read_one_catalogue():
    assert reset_scoped_to_node.RESET_CAPABLE is catalogue.RESET_CAPABLE
    assert storage_prevent_destroy.PROTECTED_TYPES is catalogue.PROTECTED
    source = (ROOT / "terravixens" / "guard").rglob("*.py")
    assert not any(re.search(r'"proxmox_[a-z_]+"', path.read_text()) for path in source)  # no copied type names


def test_hand_made_fixtures_are_what_their_generator_builds():
    for name, text in hand_made.current().items():
        assert (PLANS / name).read_text() == text, f"{name}: run python -m tests.fixtures.plans.hand_made"


# ---------------------------------------------------------------------------------------------------- the table
# Every plan shape the guard judges, through the per-node view: the fixture (real-*: planned by the real Terraform
# CLI against the fake Proxmox VE, tests/fixtures/plans/real_shapes.py; real-standin-*: the same with terraform_data
# stand-ins for the talos applies, retyped; hand-*: hand-made Talos plans, hand_made.py), optionally changed by a
# mutation that makes a shape Terraform 1.11 cannot write here, the context it is judged in, the checks that must
# refuse it ([] = allowed) and what must happen to named nodes.
SITE = GuardContext(roles=THREE)
NO_SITE = GuardContext()
TEARDOWN = GuardContext(roles=THREE, teardown=True)
K, N, L, R, M = Fate.KEPT, Fate.NEW, Fate.LEAVING, Fate.REPLACED, Fate.MACHINE_LOST


def without(*nodes: str, roles: dict | None = None, **extra) -> GuardContext:
    """The site once `nodes` are taken out of it."""
    return GuardContext(roles={n: r for n, r in (roles or THREE).items() if n not in nodes}, **extra)


def platform_state_usage() -> Usage:
    from terravixens.guard import deployed_usage

    return deployed_usage({"platform-prod": fixture("real-platform-state.json")})


@dataclass(frozen=True)
class Case:
    fixture: str
    context: GuardContext
    refused: tuple[str, ...]
    fates: dict = dc_field(default_factory=dict)
    mutate: Callable[[dict], None] | None = None
    says: str = ""  # a fragment the first refusal (or the ok line) must hold

    def plan(self) -> dict:
        data = fixture(self.fixture)
        if self.mutate:
            self.mutate(data)
        return data


def change_of(data: dict, address: str) -> dict:
    return next(c for c in data["resource_changes"] if c["address"] == address)


def set_actions(address: str, actions: list[str], **fields) -> Callable[[dict], None]:
    def run(data: dict) -> None:
        change = change_of(data, address)
        change["change"]["actions"] = actions
        change.update(fields)

    return run


def retype_create(address: str, new_type: str) -> Callable[[dict], None]:
    def run(data: dict) -> None:
        change = change_of(data, address)
        change["address"] = change["address"].replace(change["type"], new_type, 1)
        change["type"] = new_type

    return run


def _bootstrap_change(data: dict, actions: list[str]) -> None:
    """The bootstrap record's change given `actions`, its value after the change the one before it."""
    body = change_of(data, "talos_machine_bootstrap.cluster_bootstrap")["change"]
    body.update(actions=actions, after=copy.deepcopy(body["before"]))


def rename_everywhere(old: str, new: str, drop_record: bool = True) -> Callable[[dict], None]:
    """`old` renamed to `new` (type and name) in the changes and in the prior state — a machine no logical id names,
    or a standalone guest — and the membership record dropped (no name to match it by)."""

    def run(data: dict) -> None:
        kind, name = new.split(".")
        for change in data["resource_changes"]:
            if change["address"] == old:
                change.update(address=new, type=kind, name=name)
        resources = data["prior_state"]["values"]["root_module"]["resources"]
        for resource in resources:
            if resource["address"] == old:
                resource.update(address=new, type=kind, name=name)
                resource["values"]["name"] = name
        if drop_record:
            data["prior_state"]["values"]["root_module"]["resources"] = [
                r for r in resources if r["name"] != "cluster_membership"
            ]
            data["resource_changes"] = [c for c in data["resource_changes"] if c["name"] != "cluster_membership"]

    return run


VM_B, VM_C = "proxmox_virtual_environment_vm.node_wk-b_vm", "proxmox_virtual_environment_vm.node_cp-c_vm"
APPLY_A = "talos_machine_configuration_apply.node_wk-a_apply"
TABLE: dict[str, Case] = {
    # ------------------------------------------------------------------ refused: a node the site keeps loses a machine
    "VM deleted outright": Case(
        "real-vm-deleted-outright.json",
        SITE,
        ("PG001",),
        {"wk-b": M, "wk-a": K},
        says="node 'wk-b' stays in the site but would be left without a machine",
    ),
    "VM deleted outright, no site (the plan's record keeps it)": Case(
        "real-vm-deleted-outright.json", NO_SITE, ("PG001",), {"wk-b": M}
    ),
    "VM moved to a module without moved": Case(
        "real-vm-moved-to-module-without-moved.json", SITE, ("PG001",), {"wk-b": R}, says="add `moved { from = " + VM_B
    ),
    "VM renamed without moved (no logical id: known by identity)": Case(
        "real-vm-renamed-without-moved.json",
        SITE,
        ("PG001",),
        {"wk-b": R},
        says="proxmox_virtual_environment_vm.wkb_machine would create it again",
    ),
    "VM under bpg's other type name": Case(
        "real-vm-type-renamed.json",
        SITE,
        ("PG001",),
        {"wk-b": R},
        says="keep the resource type proxmox_virtual_environment_vm",
    ),
    "VM for_each key changed (split entries)": Case("real-vm-for-each-key-changed.json", SITE, ("PG001",), {"wk-b": R}),
    "VM forgotten (removed, destroy = false)": Case(
        "real-vm-forgotten.json", SITE, ("PG001",), {"wk-b": M}, says="drop the `removed` block"
    ),
    "VM forgotten and created again elsewhere": Case(
        "real-vm-forgotten-and-recreated.json",
        SITE,
        ("PG001",),
        {"wk-b": R},
        says="the old one is forgotten, left running",
    ),
    "VM tainted": Case("real-vm-tainted.json", SITE, ("PG001",), {"wk-b": R}, says="`terraform untaint " + VM_B),
    "VM replaced on request": Case(
        "real-vm-replace-requested.json", SITE, ("PG001",), {"wk-b": R}, says="plan without `-replace=" + VM_B
    ),
    "VM replaced, create before destroy": Case(
        "real-vm-replaced-create-before-destroy.json", SITE, ("PG001",), {"wk-b": R}, says="(forced by vm_id)"
    ),
    "VM replaced by replace_triggered_by": Case(
        "real-vm-replace-triggered.json", SITE, ("PG001",), {"wk-b": R}, says="replace_triggered_by"
    ),
    "VM replaced, vm_id changed": Case("real-platform-vm-replaced.json", SITE, ("PG001",), {"wk-b": R}),
    "VM replaced, old one left running (create, forget)": Case(
        "real-vm-replaced-create-before-destroy.json",
        SITE,
        ("PG001",),
        {"wk-b": R},
        mutate=set_actions(VM_B, ["create", "forget"]),
        says="the old one is left running",
    ),
    "two control-plane VMs deleted (no applies in state)": Case(
        "real-two-control-plane-vms-deleted.json", SITE, ("PG001", "PG001"), {"cp-b": M, "cp-c": M, "cp-a": K}
    ),
    "VM deleted by a targeted destroy, judged as a deploy": Case(
        "real-vm-deleted-by-targeted-destroy.json", SITE, ("PG001",), {"wk-b": M}
    ),
    "plan -destroy judged as a deploy": Case("real-platform-destroyed.json", SITE, ("PG001",) * 5, {"cp-a": M}),
    "worker left the record, but the site keeps it": Case("real-worker-leaves.json", SITE, ("PG001",), {"wk-b": M}),
    "another layer's VM (by identity) deleted": Case(
        "real-vm-deleted-outright.json",
        GuardContext(usage=platform_state_usage()),
        ("PG001",),
        {"wk-b": M},
        mutate=rename_everywhere(VM_B, "proxmox_virtual_environment_vm.jumphost"),
        says="node 'wk-b' of platform-prod (deployed) stays in the site",
    ),
    "VM no node owns, replaced": Case(
        "real-vm-tainted.json",
        GuardContext(),
        ("PG001",),
        {},
        mutate=rename_everywhere(VM_B, "proxmox_virtual_environment_vm.spare"),
        says="no node of the site or of the state owns it",
    ),
    "standalone guest replaced": Case(
        "real-vm-tainted.json",
        GuardContext(),
        ("PG001",),
        {"dns1": R},
        mutate=rename_everywhere(VM_B, "proxmox_virtual_environment_container.sa_dns1_ct"),
        says="node 'dns1' stays in the site but would be destroyed and re-created",
    ),
    # ------------------------------------------------------------------ refused: the apply (stand-ins)
    "apply deleted while the site keeps the node": Case(
        "real-standin-apply-deleted.json", SITE, ("PG001",), {"wk-a": M}, says="would be reset (wiped)"
    ),
    "apply replaced": Case("real-standin-apply-replaced.json", SITE, ("PG001",), {"wk-a": R}, says="would be wiped"),
    "apply renamed without moved (known by its node address)": Case(
        "real-standin-apply-renamed-without-moved.json", SITE, ("PG001",), {"wk-a": R}
    ),
    "apply moved to talos_machine without moved": Case(
        "real-standin-apply-renamed-without-moved.json",
        SITE,
        ("PG001",),
        {"wk-a": R},
        mutate=retype_create("talos_machine_configuration_apply.wka_configuration", "talos_machine"),
        says="keep the resource type talos_machine_configuration_apply",
    ),
    "apply forgotten": Case("real-standin-apply-forgotten.json", SITE, ("PG001",), {"wk-a": M}),
    "workers reset by a targeted destroy, judged as a deploy": Case(
        "real-standin-workers-reset-by-targeted-destroy.json", SITE, ("PG001", "PG001"), {"wk-a": M, "wk-b": M}
    ),
    # ------------------------------------------------------------------ refused: control planes (stand-ins)
    "two control-plane VMs deleted, applies stay": Case(
        "real-standin-two-control-plane-vms-deleted.json",
        SITE,
        ("PG001", "PG001", "PG002"),
        {"cp-b": M, "cp-c": M},
        says="node 'cp-b' stays in the site",
    ),
    "every control-plane VM deleted, applies stay": Case(
        "real-standin-every-control-plane-vm-deleted.json",
        SITE,
        ("PG001",) * 3 + ("PG002", "PG003"),
        {"cp-a": M, "cp-b": M, "cp-c": M, "wk-a": K},
    ),
    "one control-plane VM deleted, apply stays": Case(
        "real-standin-control-plane-vm-deleted.json", SITE, ("PG001",), {"cp-c": M}
    ),
    "two control planes leave the site": Case(
        "real-standin-two-control-planes-leave.json", without("cp-b", "cp-c"), ("PG002",), {"cp-b": L, "cp-c": L}
    ),
    "two control planes leave, no site (the plan's record)": Case(
        "real-standin-two-control-planes-leave.json", NO_SITE, ("PG002",), {"cp-b": L, "cp-c": L}
    ),
    "platform destroyed while its cluster runs": Case(
        "real-standin-platform-destroyed.json", TEARDOWN, ("PG002", "PG003"), {"cp-a": L, "wk-b": L}
    ),
    "hand: two control planes leave": Case(
        "hand-pg002-two-control-planes-leave.json",
        without("cp-d", "cp-e", roles=FIVE),
        ("PG002",),
        {"cp-d": L, "cp-e": L},
    ),
    "hand: a leaving node of unknown role counts as a control plane": Case(
        "hand-pg002-role-unknown-counts-as-control-plane.json",
        without("cp-e", roles=FIVE),
        ("PG002",),
        {"cp-e": L, "wk-z": L},
        says="(role of cp-e, wk-z unknown",
    ),
    "hand: every control plane leaves": Case(
        "hand-pg003-every-control-plane-leaves.json",
        GuardContext(roles={"cp-b": "controlplane", "wk-a": "worker"}),
        ("PG003",),
        {"cp-a": L, "cp-b": N},
    ),
    # ------------------------------------------------------------------ refused: the other checks
    "hand: secrets destroyed": Case("hand-pg004-secrets-destroyed.json", SITE, ("PG004",)),
    "hand: secrets replaced": Case("hand-pg004-secrets-replaced.json", SITE, ("PG004",)),
    "hand: second bootstrap": Case("hand-pg004-second-bootstrap.json", SITE, ("PG004",)),
    "hand: new secrets under running nodes": Case("hand-pg005-new-secrets-under-running-nodes.json", SITE, ("PG005",)),
    "hand: secrets forgotten": Case("hand-pg005-secrets-forgotten.json", SITE, ("PG005",)),
    "hand: bootstrap in a running cluster": Case("hand-pg006-bootstrap-in-running-cluster.json", SITE, ("PG006",)),
    "hand: bootstrap forgotten": Case("hand-pg006-bootstrap-forgotten.json", SITE, ("PG006",)),
    "hand: bootstrap replaced while its nodes run": Case(
        "hand-pg006-bootstrap-forgotten.json",
        SITE,
        ("PG004",),  # a second bootstrap (PG004), not a bootstrap record lost (PG006)
        mutate=lambda plan: _bootstrap_change(plan, ["delete", "create"]),
        says="would bootstrap etcd again on a cluster that was bootstrapped",
    ),
    "hand: planned reboot": Case("hand-pg007-planned-reboot.json", SITE, ("PG007",), {"wk-a": K}),
    "hand: auto after a change, no log": Case("hand-pg007-auto-after-a-change.json", SITE, ("PG007",)),
    "hand: reboot check not run": Case("hand-pg007-reboot-check-not-run.json", SITE, ("PG007",)),
    "bridge in use": Case(
        "real-hypervisors-bridge-in-use.json", GuardContext(usage=platform_state_usage()), ("PG008",)
    ),
    "L0 torn down under running VMs": Case(
        "real-hypervisors-destroy-while-vms-run.json",
        GuardContext(usage=platform_state_usage(), teardown=True),
        ("PG008",) * 5,
    ),
    "hand: bucket destroyed": Case("hand-pg009-bucket-destroyed.json", GuardContext(), ("PG009",)),
    "hand: storage destroyed, its users not known": Case(
        "hand-pg010-storage-destroyed.json", GuardContext(), ("PG010",), says="was not told who uses it"
    ),
    "hand: storage destroyed while a deployed VM has a disk on it": Case(
        "hand-pg010-storage-destroyed.json",
        GuardContext(usage=Usage(storages={"backups": {"VM wk-a in platform-prod (deployed)"}})),
        ("PG010",),
        says="where VM wk-a in platform-prod (deployed) has a disk",
    ),
    "hand: storage replaced while a site node names it": Case(
        "hand-pg010-storage-destroyed.json",
        GuardContext(usage=Usage(storages={"backups": {"node wk-a of cluster prod (site file)"}})),
        ("PG010",),
        mutate=lambda plan: plan["resource_changes"][0]["change"].update(
            actions=["delete", "create"], after={"id": "backups", "nodes": ["pve1"]}
        ),
        says="would replace storage 'backups'",
    ),
    # ------------------------------------------------------------------ allowed
    "VM moved to a module with moved": Case(
        "real-vm-moved-to-module-with-moved.json", SITE, (), {"wk-b": K}, says="5 kept (1 changed in place: wk-b)"
    ),
    "VM renamed with moved": Case("real-vm-renamed-with-moved.json", SITE, (), {"wk-b": K}),
    "count added (implicit move)": Case("real-vm-count-added.json", SITE, (), {"wk-b": K}),
    "VM updated in place": Case("real-vm-updated-in-place.json", SITE, (), {"cp-b": K}),
    "VM imported back into the state": Case("real-vm-imported.json", SITE, (), {"wk-b": K}),
    "hand: unused storage removed": Case(
        "hand-pg010-storage-destroyed.json",
        GuardContext(usage=Usage(storages={"tank": {"node wk-a of cluster prod (site file)"}})),
        (),
    ),
    "deposed object cleaned up": Case("real-vm-deposed-object-deleted.json", SITE, (), {"wk-b": K}),
    "data source read at apply": Case("real-data-source-read-at-apply.json", SITE, (), {"wk-b": K}),
    "worker leaves the site": Case(
        "real-worker-leaves.json",
        without("wk-b"),
        (),
        {"wk-b": L},
        says="4 kept, 1 leaving (wk-b); none replaced, no machine lost",
    ),
    "worker leaves, no site (the plan's record)": Case("real-worker-leaves.json", NO_SITE, (), {"wk-b": L}),
    "node joins": Case(
        "real-node-joins.json",
        GuardContext(roles={**THREE, "wk-c": "worker"}),
        (),
        {"wk-c": N},
        says="5 kept, 1 new (wk-c)",
    ),
    "membership address changed": Case("real-membership-address-changed.json", SITE, (), {"wk-a": K}),
    "VM deleted by a targeted destroy (teardown)": Case(
        "real-vm-deleted-by-targeted-destroy.json", TEARDOWN, (), {"wk-b": L}
    ),
    "platform VMs destroyed, no cluster running (teardown)": Case(
        "real-platform-destroyed.json", TEARDOWN, (), {"cp-a": L}
    ),
    "one control plane leaves": Case("real-standin-control-plane-leaves.json", without("cp-c"), (), {"cp-c": L}),
    "workers leave together": Case(
        "real-standin-workers-leave.json", without("wk-a", "wk-b"), (), {"wk-a": L, "wk-b": L}
    ),
    "apply renamed with moved": Case("real-standin-apply-renamed-with-moved.json", SITE, (), {"wk-a": K}),
    "workers reset by decommission (teardown)": Case(
        "real-standin-workers-reset-by-targeted-destroy.json", TEARDOWN, (), {"wk-a": L, "wk-b": L, "cp-a": K}
    ),
    "standalone guest removed": Case(
        "real-vm-deleted-outright.json",
        GuardContext(),
        (),
        {"dns1": L},
        mutate=rename_everywhere(VM_B, "proxmox_virtual_environment_container.sa_dns1_ct"),
    ),
    "first platform deploy": Case("real-platform-create.json", SITE, (), {"cp-a": N}),
    "first hypervisors deploy": Case("real-hypervisors-create.json", SITE, (), says="no node in this plan"),
    "hand: first cluster": Case(
        "hand-ok-first-cluster.json", GuardContext(roles={"cp-a": "controlplane"}), (), {"cp-a": N}
    ),
    "hand: one control plane leaves": Case(
        "hand-ok-one-control-plane-leaves.json", without("cp-e", roles=FIVE), (), {"cp-e": L}
    ),
    "hand: workers leave together": Case(
        "hand-ok-workers-leave-together.json", without("wk-a", "wk-b"), (), {"wk-a": L, "wk-b": L}
    ),
    "hand: staged change": Case("hand-ok-staged-change.json", SITE, (), {"cp-b": K}),
    "hand: bootstrap record updated in place while its nodes run": Case(
        "hand-pg006-bootstrap-forgotten.json",
        SITE,
        (),
        {"cp-a": K, "wk-b": K},
        mutate=lambda plan: _bootstrap_change(plan, ["update"]),
    ),
    "hand: on_destroy only": Case("hand-ok-on-destroy-only.json", SITE, ()),
    "hand: last control plane reset by decommission (PG003 waived)": Case(
        "hand-ok-decommission-last-control-plane.json",
        GuardContext(roles={"cp-a": "controlplane"}, teardown=True, waived=frozenset({"PG003"})),
        (),
        {"cp-a": L},
    ),
}


def refused_codes(case: Case) -> list[str]:
    return codes(refusals(check_plan(case.plan(), case.context)))


@pytest.mark.parametrize("name", sorted(TABLE))
def test_plan_shape(name):
    case = TABLE[name]
    violations = refusals(check_plan(case.plan(), case.context))
    assert codes(violations) == sorted(case.refused), [str(v) for v in violations]
    view = node_view(read_plan(case.plan()), case.context)
    assert {node: view.nodes[node].fate for node in case.fates} == case.fates, view.summary()
    if case.says:
        assert case.says in (str(violations[0]) if violations else ok_line(case.plan(), case.context))


def test_the_table_covers_every_check_every_fate_and_every_refusal_reason():
    refused = {code for case in TABLE.values() for code in case.refused}
    assert refused == {check.code for check in ALL_CHECKS}
    assert {fate for case in TABLE.values() for fate in case.fates.values()} == set(Fate)
    allowed = [case for case in TABLE.values() if not case.refused]
    assert len(TABLE) + len(NOT_PLANS) + len(NEVER_WRITTEN) >= 40 and len(allowed) >= 15
    real = [case for case in TABLE.values() if case.fixture.startswith("real-")]
    assert len(real) >= 40  # planned by the real CLI (a few with a stand-in retyped or one field changed)


def test_messages_name_the_node_what_happens_and_the_fix():
    [moved] = refusals(check_plan(fixture("real-vm-moved-to-module-without-moved.json"), SITE))
    assert moved.message == (
        "proxmox_virtual_environment_vm.node_wk-b_vm would be deleted and "
        "module.nodes.proxmox_virtual_environment_vm.node_wk-b_vm would create it again: node 'wk-b' stays in the "
        "site but would be destroyed and re-created. Its VM pve2/1202 moves from "
        "proxmox_virtual_environment_vm.node_wk-b_vm to module.nodes.proxmox_virtual_environment_vm.node_wk-b_vm "
        "(its address changed without a `moved` block): add `moved { from = "
        "proxmox_virtual_environment_vm.node_wk-b_vm  to = module.nodes.proxmox_virtual_environment_vm.node_wk-b_vm }` "
        "so that Terraform moves it in state."
    )
    vm = refusals(check_plan(fixture("real-standin-two-control-plane-vms-deleted.json"), SITE))[0]
    assert vm.message == (
        "proxmox_virtual_environment_vm.node_cp-b_vm would be deleted: node 'cp-b' stays in the site but would be "
        "left without a machine. Its VM pve2/1102 is deleted and nothing creates it again: keep "
        "proxmox_virtual_environment_vm.node_cp-b_vm in the configuration (a `moved` block if its address must "
        "change), or take the node out of the site to remove it."
    )


def test_pg002_says_deploy_takes_them_out_one_per_apply_never_a_raw_target():
    for name, context in (
        ("hand-pg002-two-control-planes-leave.json", without("cp-d", "cp-e", roles=FIVE)),
        ("real-standin-two-control-plane-vms-deleted.json", SITE),
    ):
        [violation] = [v for v in check_plan(fixture(name), context) if v.code == "PG002"]
        assert "-target" not in violation.message and "terraform apply" not in violation.message
        assert violation.message.endswith(
            "`terravixens deploy` of this layer takes control planes out one per "
            "apply; or remove one control plane from the site per deploy."
        )
    plan = fixture("real-standin-two-control-plane-vms-deleted.json")
    [vms] = [v for v in check_plan(plan, SITE) if v.code == "PG002"]
    assert vms.message.startswith(
        "2 control planes would leave etcd in one apply: cp-b (VM pve2/1102 deleted at "
        "proxmox_virtual_environment_vm.node_cp-b_vm), cp-c (VM pve1/1103 deleted at "
        "proxmox_virtual_environment_vm.node_cp-c_vm)."
    )


def test_pg002_roles_come_from_the_membership_record_not_from_configuration_text():
    """A recorded role wins over the site: promoted in the site file, still a worker in today's cluster."""
    plan = fixture("hand-ok-workers-leave-together.json")
    assert (
        check_plan(plan, GuardContext(roles={"cp-a": "controlplane", "cp-b": "controlplane", "cp-c": "controlplane"}))
        == []
    )
    view = node_view(read_plan(plan), GuardContext(roles={"wk-a": "controlplane"}))
    assert view.nodes["wk-a"].role == "worker" and not view.nodes["wk-a"].counts_as_control_plane


def test_without_a_membership_record_the_site_says_which_members_are_control_planes():
    from terravixens.guard.checks.roles import control_planes_today, leaving_control_planes

    plan = read_plan(fixture("hand-pg002-role-unknown-counts-as-control-plane.json"))  # cp-e and wk-z leave
    site = GuardContext(roles={**FIVE, "wk-z": "worker"})
    assert [n.name for n in leaving_control_planes(plan, site)] == ["cp-e"]
    assert [n.name for n in control_planes_today(plan, site)] == ["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"]
    # No site: a running member whose role nobody knows counts as a control plane leaving, not as one today.
    assert [n.name for n in leaving_control_planes(plan, GuardContext())] == ["cp-e", "wk-z"]
    assert control_planes_today(plan, GuardContext()) == []  # known control planes only
    # The checks read the same context. Torn down on request, with cp-e a control plane and wk-z a worker: one
    # control plane leaves (no PG002), the only one today (PG003). Without a site: two of unknown role (PG002).
    data = fixture("hand-pg002-role-unknown-counts-as-control-plane.json")
    teardown = GuardContext(roles={"cp-e": "controlplane", "wk-z": "worker"}, teardown=True)
    assert codes(check_plan(copy.deepcopy(data), teardown)) == ["PG003"]
    assert codes(check_plan(copy.deepcopy(data), GuardContext())) == ["PG002"]


def test_a_control_plane_is_a_member_only_with_its_apply():
    """VMs without applies (the fakepve projection, or after decommission reset the nodes) are machines, not etcd
    members: deleting them is judged by PG001 alone."""
    plain = node_view(read_plan(fixture("real-two-control-plane-vms-deleted.json")), SITE)
    standin = node_view(read_plan(fixture("real-standin-two-control-plane-vms-deleted.json")), SITE)
    assert not plain.nodes["cp-b"].member and plain.control_planes_leaving() == []
    assert standin.nodes["cp-b"].member and [n.name for n in standin.control_planes_leaving()] == ["cp-b", "cp-c"]


def test_the_ok_line_is_what_the_view_says():
    plan, context = fixture("real-worker-leaves.json"), without("wk-b")
    assert ok_line(plan, context) == (
        "5 nodes: 4 kept, 1 leaving (wk-b); none replaced, no machine lost; PG001-PG010 pass"
    )
    assert ok_line(fixture("hand-ok-staged-change.json"), SITE) == (
        "5 nodes: 5 kept (1 changed in place: cp-b); none replaced, no machine lost; PG001-PG010 pass"
    )


def test_the_ok_line_and_the_checks_read_the_context_given_and_a_plan_already_read():
    from terravixens.guard import check_plan_file

    leaves = fixture("real-worker-leaves.json")
    # The site keeps wk-b: its machine would be lost. Without a site, a node whose VM goes is leaving.
    lost = "5 nodes: 4 kept; none replaced, 1 with a machine lost (wk-b); PG001-PG010 pass"
    assert ok_line(leaves, SITE) == lost and ok_line(read_plan(copy.deepcopy(leaves)), SITE) == lost
    assert ok_line(leaves) == "5 nodes: 4 kept, 1 leaving (wk-b); none replaced, no machine lost; PG001-PG010 pass"
    assert codes(check_plan(read_plan(copy.deepcopy(leaves)), SITE)) == codes(check_plan(leaves, SITE)) == ["PG001"]
    assert codes(check_plan_file(PLANS / "real-worker-leaves.json", context=SITE)) == ["PG001"]
    assert codes(check_plan_file(PLANS / "real-worker-leaves.json")) == []


def test_decommission_waives_exactly_what_it_names():
    last = fixture("hand-ok-decommission-last-control-plane.json")
    teardown = GuardContext(roles={"cp-a": "controlplane"}, teardown=True)
    assert codes(refusals(check_plan(last, teardown))) == ["PG003"]
    waived = check_plan(last, GuardContext(roles={"cp-a": "controlplane"}, teardown=True, waived=frozenset({"PG003"})))
    assert [v.waived for v in waived] == [True] and refusals(waived) == []
    # Not a teardown: the site keeps cp-a, so resetting it is a node losing its apply, which no waiver of PG003 lifts.
    assert codes(
        refusals(check_plan(last, GuardContext(roles={"cp-a": "controlplane"}, waived=frozenset({"PG003"}))))
    ) == ["PG001"]
    secrets = fixture("hand-ok-decommission-secrets-last.json")
    assert codes(check_plan(secrets)) == ["PG004"]
    assert refusals(check_plan(secrets, GuardContext(waived=frozenset({"PG004"})))) == []
    # A waiver of PG004 does not waive PG005: secrets cannot go while nodes run on them.
    forgotten = check_plan(fixture("hand-pg005-secrets-forgotten.json"), GuardContext(waived=frozenset({"PG004"})))
    assert codes(refusals(forgotten)) == ["PG005"]


def test_pg004_secrets_message():
    [violation] = check_plan(fixture("hand-pg004-secrets-destroyed.json"), GuardContext(roles=THREE))
    assert str(violation) == (
        "[PG004 ClusterIdentityKept] talos_machine_secrets.cluster_secrets would be destroyed: "
        "the cluster's certificates and keys would be lost. Restore the cluster in the site "
        "file."
    )


def test_pg005_and_pg006_messages_point_at_the_backup():
    [secrets] = check_plan(fixture("hand-pg005-new-secrets-under-running-nodes.json"), GuardContext(roles=THREE))
    assert "would be created while 5 node applies run on today's secrets" in secrets.message
    assert "terravixens restore" in secrets.message
    [bootstrap] = check_plan(fixture("hand-pg006-bootstrap-in-running-cluster.json"), GuardContext(roles=THREE))
    assert bootstrap.message.startswith(
        "talos_machine_bootstrap.cluster_bootstrap would bootstrap a cluster whose "
        "nodes already run (5 applies in state)"
    )


def test_pg007_auto_needs_the_plan_log_to_tell_no_reboot_from_unreachable():
    plan = fixture("hand-pg007-auto-after-a-change.json")
    [no_log] = check_plan(plan, GuardContext(roles=THREE))
    assert "the plan's log was not given" in no_log.message
    [unreachable] = check_plan(
        plan, GuardContext(roles=THREE, reboot_checks=log("hand-pg007-node-unreachable.log.jsonl"))
    )
    assert "could not be asked whether the change needs a reboot" in unreachable.message
    assert unreachable.message.endswith("or allow it with --allow-reboot cp-b.")
    assert check_plan(plan, GuardContext(roles=THREE, reboot_checks=log("hand-pg007-node-answered.log.jsonl"))) == []
    assert check_plan(plan, GuardContext(roles=THREE, allow_reboot=frozenset({"cp-b"}))) == []


def test_pg007_word_by_word_and_the_log_names_the_apply_or_its_node():
    plan = fixture("hand-pg007-auto-after-a-change.json")
    cp_b = "talos_machine_configuration_apply.node_cp-b_apply"
    [no_log] = check_plan(copy.deepcopy(plan), SITE)
    assert no_log.message == (
        f"{cp_b} changes node 'cp-b''s configuration with resolved_apply_mode 'auto', and the plan's log was not "
        "given, so the guard cannot tell 'no reboot needed' from 'node unreachable, may reboot': run `terravixens "
        "deploy` (it reads the log), pass --plan-log (`terraform plan -json` output), or allow it with "
        "--allow-reboot cp-b."
    )
    by_address = RebootChecks(frozenset({cp_b}))
    by_node = RebootChecks(frozenset(), ("Node 127.11.1.12: connection refused",))
    other_node = RebootChecks(frozenset({"talos_machine_configuration_apply.node_cp-a_apply"}), ("Node 127.0.0.9: x",))
    for checks in (by_address, by_node):
        [unreachable] = check_plan(copy.deepcopy(plan), GuardContext(roles=THREE, reboot_checks=checks))
        assert unreachable.message.startswith(f"{cp_b}: node 'cp-b' could not be asked whether the change needs")
    assert check_plan(copy.deepcopy(plan), GuardContext(roles=THREE, reboot_checks=other_node)) == []


def test_pg007_judges_every_apply_after_one_it_passes_over():
    plan = fixture("hand-pg007-auto-after-a-change.json")
    [change] = plan["resource_changes"]
    for first in ("no-op", "same configuration"):
        data = copy.deepcopy(plan)
        before = copy.deepcopy(change)
        before["address"] = before["address"].replace("cp-b", "cp-a")
        before["name"] = before["name"].replace("cp-b", "cp-a")
        if first == "no-op":
            before["change"]["actions"] = ["no-op"]
        else:  # staged, updated, yet its configuration is what it was: nothing to reboot for
            before["change"]["after"] = copy.deepcopy(before["change"]["before"]) | {
                "apply_mode": "staged_if_needing_reboot",
                "resolved_apply_mode": "auto",
            }
        data["resource_changes"].insert(0, before)
        assert [v.message.split(" ")[0] for v in check_plan(data, SITE)] == [change["address"]], first


def test_pg007_a_configuration_unknown_until_apply_is_a_change():
    plan = fixture("hand-pg007-auto-after-a-change.json")  # one apply, cp-b's
    for key in ("machine_configuration", "machine_configuration_input", "config_patches"):
        data = copy.deepcopy(plan)
        body = data["resource_changes"][0]["change"]
        body["after"] = copy.deepcopy(body["before"]) | {"apply_mode": "staged_if_needing_reboot"}
        body["after"]["resolved_apply_mode"] = "auto"
        assert check_plan(copy.deepcopy(data), SITE) == [], key  # nothing changes: nothing to judge
        body["before"].pop(key, None), body["after"].pop(key, None)
        body["after_unknown"] = {key: True}  # known only at apply: it may change
        assert codes(check_plan(data, SITE)) == ["PG007"], key


def test_pg007_planned_reboot_is_refused_even_with_a_clean_log():
    result = check_plan(
        fixture("hand-pg007-planned-reboot.json"),
        GuardContext(roles=THREE, reboot_checks=log("hand-pg007-node-answered.log.jsonl")),
    )
    assert [str(v) for v in result] == [
        (
            "[PG007 NoSilentReboot] talos_machine_configuration_apply.node_wk-a_apply is planned to reboot node 'wk-a' "
            "(resolved_apply_mode 'reboot'): re-plan when the node answers, or allow it with --allow-reboot wk-a."
        )
    ]


@pytest.mark.integration
def test_the_real_shapes_are_what_terraform_plans_today(terraform_binary, tmp_path):
    """Every real-* shape planned again by the real CLI: the guard judges the fresh plan as it judges the committed
    one (same refusals, same fates), so the fixtures are Terraform's output, not a memory of it."""
    fresh = real_shapes.planned(terraform_binary, tmp_path)
    judged = 0
    for name, case in TABLE.items():
        stem = case.fixture.removesuffix(".json")
        if stem not in fresh or case.mutate:
            continue
        data = copy.deepcopy(fresh[stem])
        assert codes(refusals(check_plan(data, case.context))) == sorted(case.refused), name
        view = node_view(read_plan(data), case.context)
        assert {node: view.nodes[node].fate for node in case.fates} == case.fates, name
        judged += 1
    assert set(fresh) == set(real_shapes.SHAPES) and judged >= 40


# ---------------------------------------------------------------------------------------------------- PG008
def l0_plan(kind: str, before: dict, actions=("delete",)) -> dict:
    return {
        "format_version": "1.2",
        "planned_values": {},
        "resource_changes": [
            {
                "address": f"{kind}.hv_pve1_x",
                "type": kind,
                "name": "hv_pve1_x",
                "mode": "managed",
                "change": {"actions": list(actions), "before": before, "after": None},
            }
        ],
    }


def test_pg008_bridge_used_by_a_deployed_vm():
    usage = Usage()
    usage.add_bridge("pve1", "vmbr1", "VM cp-a in platform-prod (deployed)")
    [violation] = check_plan(
        l0_plan("proxmox_network_linux_bridge", {"node_name": "pve1", "name": "vmbr1"}), GuardContext(usage=usage)
    )
    assert violation.message.startswith(
        "proxmox_network_linux_bridge.hv_pve1_x would delete bridge 'vmbr1' on "
        "'pve1', used by VM cp-a in platform-prod (deployed)"
    )
    assert (
        check_plan(
            l0_plan("proxmox_network_linux_bridge", {"node_name": "pve2", "name": "vmbr1"}), GuardContext(usage=usage)
        )
        == []
    )


def test_pg008_image_a_site_node_boots_from(example_site):
    usage = site_usage(example_site)
    wanted = {
        "node_name": "pve1",
        "datastore_id": "local",
        "file_name": "talos-ce4c980550dd-v1.11.5-nocloud-amd64.qcow2",
    }
    [violation] = check_plan(l0_plan("proxmox_download_file", wanted), GuardContext(usage=usage))
    assert "which node cp-a of cluster prod (site file)" in violation.message
    old = dict(wanted, file_name="talos-ce4c980550dd-v1.11.4-nocloud-amd64.qcow2")  # an upgrade drops the old image
    assert check_plan(l0_plan("proxmox_download_file", old), GuardContext(usage=usage)) == []
    replaced = l0_plan("proxmox_download_file", wanted, ("delete", "create"))  # re-downloaded in place
    assert check_plan(replaced, GuardContext(usage=usage)) == []


def test_pg008_without_usage_knowledge_is_skipped_not_guessed():
    assert check_plan(l0_plan("proxmox_virtual_environment_user", {"user_id": "terravixens@pve"})) == []


def test_pg008_says_replaced_or_deleted_and_names_what_and_where_word_by_word():
    usage = Usage(api_user={"VM cp-a in platform-prod (deployed)", "VM cp-b in platform-prod (deployed)"})
    usage.add_bridge("pve1", "vmbr1", "VM cp-a in platform-prod (deployed)")
    usage.add_image("pve1", "local", "talos.qcow2", "node cp-a of cluster prod (site file)")
    context = GuardContext(usage=usage)

    def message(kind: str, before: dict, actions=("delete",)) -> str:
        [violation] = check_plan(l0_plan(kind, before, actions), context)
        return violation.message

    bridge = {"node_name": "pve1", "name": "vmbr1"}
    tail = "used by VM cp-a in platform-prod (deployed): move those VMs off it and deploy their platform layer first"
    for actions, verb in (
        (("delete",), "delete"),
        (("delete", "create"), "replace"),
        (("create", "delete"), "replace"),
    ):
        assert message("proxmox_network_linux_bridge", bridge, actions) == (
            f"proxmox_network_linux_bridge.hv_pve1_x would {verb} bridge 'vmbr1' on 'pve1', {tail}, then remove the "
            "bridge."
        )
    image = {"node_name": "pve1", "datastore_id": "local", "file_name": "talos.qcow2"}
    assert message("proxmox_download_file", image) == (
        "proxmox_download_file.hv_pve1_x would delete image 'talos.qcow2' on 'pve1', which node cp-a of cluster prod "
        "(site file) boots from: keep the Talos version in use on that hypervisor, or move the nodes first."
    )
    user = {"user_id": "terravixens@pve"}
    for actions, verb in ((("delete",), "deleted"), (("delete", "create"), "replaced")):
        assert message("proxmox_virtual_environment_user", user, actions) == (
            f"proxmox_virtual_environment_user.hv_pve1_x would be {verb} while the platform layers manage 2 VMs "
            "(VM cp-a in platform-prod (deployed), VM cp-b in platform-prod (deployed)): their Proxmox credentials "
            "would stop working. Decommission or destroy the platform layers first."
        )


def test_pg010_judges_every_storage_change_and_says_has_or_have():
    def storage(name: str, actions: tuple[str, ...]) -> dict:
        address = f"proxmox_storage_nfs.hv_pve1_storage_{name}"
        body = {"actions": list(actions), "before": {"id": name}, "after": None if actions == ("delete",) else {}}
        name = address.split(".")[1]
        return {"address": address, "mode": "managed", "type": "proxmox_storage_nfs", "name": name, "change": body}

    # An update first (nothing to judge), then two deletions: each is judged, not only the first.
    changes = [storage("fast", ("update",)), storage("backups", ("delete",)), storage("bulk", ("delete",))]
    data = {"format_version": "1.2", "planned_values": {}, "resource_changes": changes}
    unknown = check_plan(copy.deepcopy(data), GuardContext())
    assert [v.message.split(" would ")[0] for v in unknown] == [
        "proxmox_storage_nfs.hv_pve1_storage_backups",
        "proxmox_storage_nfs.hv_pve1_storage_bulk",
    ]
    usage = Usage(storages={"backups": {"VM wk-a in platform-prod (deployed)"}, "bulk": {"VM b", "VM a"}})
    one, two = (v.message for v in check_plan(copy.deepcopy(data), GuardContext(usage=usage)))
    assert one == (
        "proxmox_storage_nfs.hv_pve1_storage_backups would delete storage 'backups', where VM wk-a in platform-prod "
        "(deployed) has a disk: move those disks (or the nodes) to another storage and deploy their layer first, then "
        "remove the storage."
    )
    assert two.startswith(
        "proxmox_storage_nfs.hv_pve1_storage_bulk would delete storage 'bulk', where VM a, VM b have "
    )


# ---------------------------------------------------------------------------------------------------- not plans
GIVE = "give the output of `terraform show -json PLANFILE` (a saved plan from `terraform plan -out PLANFILE`)"
ACTIONS_AMONG = "a plan lists each change's actions among create, delete, forget, no-op, read, update"
ACTIONS_ARE = "a plan's actions are among create, delete, forget, no-op, read, update"


def change(actions: object = ("create",), **fields) -> dict:
    """One resource change `a.b` with these actions (`change=` replaces the change object)."""
    body = fields.pop("change", {"actions": list(actions) if isinstance(actions, tuple) else actions, "after": {}})
    return {"address": "a.b", "mode": "managed", "type": "a", "name": "b", "change": body, **fields}


def plan_of(*changes: dict, **top) -> dict:
    return {"format_version": "1.2", "planned_values": {}, "resource_changes": list(changes), **top}


# What is not a plan, and what read_plan says of it, word by word (the first problem of each).
NOT_PLANS = {
    "empty object": ({}, f"(top level): has no format_version: this is not Terraform's JSON output (empty); {GIVE}"),
    "some other JSON": (
        dict.fromkeys("gfedcba", 1),
        f"(top level): has no format_version: this is not Terraform's JSON output (keys: a, b, c, d, e, f); {GIVE}",
    ),
    "state JSON": (
        {"format_version": "1.0", "terraform_version": "1.11.4", "values": {"root_module": {}}},
        "(top level): is a state (`terraform show -json` without a plan file prints the state), not a plan: " + GIVE,
    ),
    "empty state": (
        {"format_version": "1.0", "terraform_version": "1.11.4"},
        "(top level): is a state (`terraform show -json` without a plan file prints the state), not a plan: " + GIVE,
    ),
    "JSON without planned_values": (
        {"format_version": "1.0", "terraform_version": "1.11.4", "resource_changes": []},
        f"(top level): is JSON without planned_values, not a plan: {GIVE}",
    ),
    "a list": ([], f"(top level): is a list of 0 items, not a JSON object: {GIVE}"),
    "errored plan": (
        {"format_version": "1.2", "planned_values": {}, "errored": True},
        (
            "errored: is true: Terraform stopped while planning, so this plan is incomplete; fix the errors "
            "`terraform plan` printed and plan again"
        ),
    ),
    "bad actions": (
        plan_of(change(("explode",))),
        f"resource_changes[0] ('a.b').change.actions: holds 'explode': {ACTIONS_ARE}",
    ),
    "an action shown to 40 characters": (
        plan_of(change(("x" * 50,))),
        (f"resource_changes[0] ('a.b').change.actions: holds '{'x' * 38}…: {ACTIONS_ARE}"),
    ),
    "actions not a list": (
        plan_of(change("create")),
        f"resource_changes[0] ('a.b').change.actions: is 'create': {ACTIONS_AMONG}",
    ),
    "no actions": (
        plan_of(change(())),
        f"resource_changes[0] ('a.b').change.actions: is a list of 0 items: {ACTIONS_AMONG}",
    ),
    "a change not an object": (
        plan_of(change(change=["create"])),
        f"resource_changes[0] ('a.b').change.actions: is None: {ACTIONS_AMONG}",
    ),
    "format 2": (
        {"format_version": "2.0", "planned_values": {}},
        (
            "format_version: is '2.0': this guard reads Terraform's JSON format 1.x (its major version changes only "
            f"with changes a reader must not guess at); {GIVE} from a Terraform that writes 1.x"
        ),
    ),
    "format shown to 20 characters": (
        {"format_version": "2" + ".0" * 15, "planned_values": {}},
        (
            "format_version: is '2.0.0.0.0.0.0.0.0.…: this guard reads Terraform's JSON format 1.x (its major version "
            f"changes only with changes a reader must not guess at); {GIVE} from a Terraform that writes 1.x"
        ),
    ),
    "resource_changes not a list": (
        {"format_version": "1.2", "planned_values": {}, "resource_changes": {"a.b": {"actions": ["delete"]}}},
        f"resource_changes: is a mapping of 1 key, not a list: {GIVE}",
    ),
    "resource_changes a string": (
        plan_of() | {"resource_changes": "a.b"},
        f"resource_changes: is 'a.b', not a list: {GIVE}",
    ),
    "change without address": (
        {"format_version": "1.2", "planned_values": {}, "resource_changes": [{"type": "a"}]},
        f"resource_changes[0]: has no address, name: {GIVE}",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_PLANS))
def test_not_a_plan_is_an_input_error(case):
    data, problem = NOT_PLANS[case]
    with pytest.raises(NotAPlan) as caught:
        read_plan(data, "plan.json")
    assert str(caught.value) == f"plan.json: 1 problem in the plan\n  - {problem}"


def _edit(at: str, **fields) -> Callable[[dict], None]:
    """Fields of the change at `at` set (`change__x` sets change.x; None deletes the field)."""

    def run(data: dict) -> None:
        item = change_of(data, at)
        for key, value in fields.items():
            target, key = (item["change"], key[len("change__") :]) if key.startswith("change__") else (item, key)
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value

    return run


def _duplicate(address: str) -> Callable[[dict], None]:
    def run(data: dict) -> None:
        data["resource_changes"].append(copy.deepcopy(change_of(data, address)))

    return run


def _prior(address: str, **fields) -> Callable[[dict], None]:
    def run(data: dict) -> None:
        resource = next(r for r in data["prior_state"]["values"]["root_module"]["resources"] if r["address"] == address)
        resource.update(fields)

    return run


MEMBERSHIP = "terraform_data.cluster_membership"
UPDATED = "real-vm-updated-in-place.json"  # cp-b's VM updated, the rest no-op
DELETED = "real-vm-deleted-outright.json"  # wk-b's VM deleted
VM_CP_B = "proxmox_virtual_environment_vm.node_cp-b_vm"
# Shapes Terraform never writes (internal/command/jsonplan: the actions list, modes, addresses): each an input error
# (exit 2) naming the change and the reason, never judged, never an "ok"; the problem word by word.
NEVER = "Terraform never writes this: the plan was edited or built by hand; plan again and pass the output"
AT_CP_B, AT_WK_B = f"resource_changes[1] ({VM_CP_B!r})", f"resource_changes[4] ({VM_B!r})"
WRITES_ONE_OF = (
    "Terraform writes one of ['create'], ['create', 'delete'], ['create', 'forget'], ['delete'], ['delete', 'create'], "
    "['forget'], ['no-op'], ['read'], ['update']"
)
NEVER_WRITTEN = {
    "unknown mode": (
        UPDATED,
        _edit(VM_CP_B, mode="resource"),
        f"{AT_CP_B}.mode: is 'resource': a resource change is 'managed' or 'data'",
    ),
    "no mode": (
        UPDATED,
        _edit(VM_CP_B, mode=None),
        f"{AT_CP_B}.mode: is None: a resource change is 'managed' or 'data'",
    ),
    "data source deleted": (
        UPDATED,
        _edit(VM_CP_B, mode="data", address="data." + VM_CP_B, change__actions=["delete"], change__after=None),
        (
            f"resource_changes[1] ('data.{VM_CP_B}'): a data source (data.{VM_CP_B}) with actions "
            "['delete']: Terraform only reads data sources (['read'] or ['no-op'])"
        ),
    ),
    "data source created": (
        UPDATED,
        _edit(VM_CP_B, mode="data", address="data." + VM_CP_B, change__actions=["create"], change__before=None),
        (
            f"resource_changes[1] ('data.{VM_CP_B}'): a data source (data.{VM_CP_B}) with actions "
            "['create']: Terraform only reads data sources (['read'] or ['no-op'])"
        ),
    ),
    "data source updated": (
        UPDATED,
        _edit(VM_CP_B, mode="data", address="data." + VM_CP_B),
        (
            f"resource_changes[1] ('data.{VM_CP_B}'): a data source (data.{VM_CP_B}) with actions "
            "['update']: Terraform only reads data sources (['read'] or ['no-op'])"
        ),
    ),
    "managed resource read": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["read"]),
        f"{AT_CP_B}: a managed resource ({VM_CP_B}) with actions ['read']: only data sources are read",
    ),
    "update then delete": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["update", "delete"]),
        f"{AT_CP_B}.change.actions: is ['update', 'delete']: {WRITES_ONE_OF}",
    ),
    "delete twice": (
        DELETED,
        _edit(VM_B, change__actions=["delete", "delete"]),
        f"{AT_WK_B}.change.actions: is ['delete', 'delete']: {WRITES_ONE_OF}",
    ),
    "forget then create": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["forget", "create"]),
        f"{AT_CP_B}.change.actions: is ['forget', 'create']: {WRITES_ONE_OF}",
    ),
    "create then update": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["create", "update"]),
        f"{AT_CP_B}.change.actions: is ['create', 'update']: {WRITES_ONE_OF}",
    ),
    "no-op and delete": (
        DELETED,
        _edit(VM_B, change__actions=["no-op", "delete"]),
        f"{AT_WK_B}.change.actions: is ['no-op', 'delete']: {WRITES_ONE_OF}",
    ),
    "three actions": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["delete", "create", "delete"]),
        f"{AT_CP_B}.change.actions: is ['delete', 'create', 'delete']: {WRITES_ONE_OF}",
    ),
    "type not its address's": (
        UPDATED,
        _edit(VM_CP_B, type="proxmox_virtual_environment_container"),
        (
            f"{AT_CP_B}: address '{VM_CP_B}' does not match its type, name, index and module "
            "('proxmox_virtual_environment_container.node_cp-b_vm')"
        ),
    ),
    "name not its address's": (
        UPDATED,
        _edit(VM_CP_B, name="node_cp-c_vm"),
        (
            f"{AT_CP_B}: address '{VM_CP_B}' does not match its type, name, index and module "
            "('proxmox_virtual_environment_vm.node_cp-c_vm')"
        ),
    ),
    "module_address not its address's": (
        UPDATED,
        _edit(VM_CP_B, module_address="module.nodes"),
        f"{AT_CP_B}: address '{VM_CP_B}' does not match its type, name, index and module ('module.nodes.{VM_CP_B}')",
    ),
    "module address missing": (
        UPDATED,
        _edit(VM_CP_B, address="module.nodes." + VM_CP_B),
        (
            f"resource_changes[1] ('module.nodes.{VM_CP_B}'): address 'module.nodes.{VM_CP_B}' does not "
            f"match its type, name, index and module ('{VM_CP_B}')"
        ),
    ),
    "module_address not a module": (
        UPDATED,
        _edit(VM_CP_B, module_address="nodes"),
        f"{AT_CP_B}: module_address 'nodes' is not a module address (module.NAME...)",
    ),
    "index not in the address": (
        UPDATED,
        _edit(VM_CP_B, index=0),
        f"{AT_CP_B}: address '{VM_CP_B}' does not match its type, name, index and module ('{VM_CP_B}[0]')",
    ),
    "index of another kind": (
        UPDATED,
        _edit(VM_CP_B, index=[0]),
        f"{AT_CP_B}: index a list of 1 item is neither a number nor a string",
    ),
    "replace_paths on an update": (
        UPDATED,
        _edit(VM_CP_B, change__replace_paths=[["vm_id"]]),
        (
            f"{AT_CP_B}: replace_paths on actions ['update']: Terraform names the attributes that force "
            "a replacement only on a replacement"
        ),
    ),
    "replace_paths on a delete": (
        DELETED,
        _edit(VM_B, change__replace_paths=[["vm_id"]]),
        (
            f"{AT_WK_B}: replace_paths on actions ['delete']: Terraform names the attributes that force "
            "a replacement only on a replacement"
        ),
    ),
    "deposed object created": (
        UPDATED,
        _edit(VM_CP_B, deposed="0a1b2c3d", change__actions=["create"], change__before=None),
        (
            f"{AT_CP_B}: deposed object '0a1b2c3d' with actions ['create']: a deposed object (left over "
            "from a failed replacement) is only ever deleted or forgotten"
        ),
    ),
    "deposed object updated": (
        UPDATED,
        _edit(VM_CP_B, deposed="0a1b2c3d"),
        (
            f"{AT_CP_B}: deposed object '0a1b2c3d' with actions ['update']: a deposed object (left over "
            "from a failed replacement) is only ever deleted or forgotten"
        ),
    ),
    "tainted reason on an update": (
        UPDATED,
        _edit(VM_CP_B, action_reason="replace_because_tainted"),
        f"{AT_CP_B}: action_reason 'replace_because_tainted' on actions ['update']",
    ),
    "delete reason on a create": (
        UPDATED,
        _edit(
            VM_CP_B, action_reason="delete_because_no_resource_config", change__actions=["create"], change__before=None
        ),
        f"{AT_CP_B}: action_reason 'delete_because_no_resource_config' on actions ['create']",
    ),
    "create with a before": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["create"]),
        f"{AT_CP_B}: a create with a value before it: a created object has no 'before'",
    ),
    "delete with an after": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["delete"]),
        f"{AT_CP_B}: a delete with a value after it: a deleted or forgotten object has no 'after'",
    ),
    "forget with an after": (
        UPDATED,
        _edit(VM_CP_B, change__actions=["forget"]),
        f"{AT_CP_B}: a forget with a value after it: a deleted or forgotten object has no 'after'",
    ),
    "update without a before": (
        UPDATED,
        _edit(VM_CP_B, change__before=None),
        f"{AT_CP_B}: actions ['update'] without the object's value before the change",
    ),
    "two changes for one object (split entries)": (
        DELETED,
        _duplicate(VM_B),
        (
            f"resource_changes[6]: is a second change for '{VM_B}' (the first is resource_changes[4]): "
            "Terraform writes one change per object"
        ),
    ),
    "moved from an address that has its own change": (
        UPDATED,
        _edit(VM_CP_B, previous_address="proxmox_virtual_environment_vm.node_cp-c_vm"),
        (
            "resource_changes[1]: was moved from 'proxmox_virtual_environment_vm.node_cp-c_vm', which "
            "has its own change (resource_changes[2]): a moved object leaves nothing at its old address"
        ),
    ),
    "replace_paths not a list": (
        UPDATED,
        _edit(VM_CP_B, change__replace_paths="vm_id"),
        f"{AT_CP_B}: replace_paths is 'vm_id', not a list of attribute paths",
    ),
    "deposed key past 20 characters": (
        UPDATED,
        _edit(VM_CP_B, deposed="0123456789abcdefghijklmn"),
        (
            f"{AT_CP_B}: deposed object '0123456789abcdefgh… with actions ['update']: a deposed object "
            "(left over from a failed replacement) is only ever deleted or forgotten"
        ),
    ),
    "action_reason not a keyword": (
        UPDATED,
        _edit(VM_CP_B, action_reason=5),
        f"{AT_CP_B}: action_reason is 5, not a keyword",
    ),
    "update without an after": (
        UPDATED,
        _edit(VM_CP_B, change__after=None),
        f"{AT_CP_B}: an update without the object's value after the change",
    ),
    "previous_address not text, shown to 40 characters": (
        UPDATED,
        _edit(VM_CP_B, previous_address=10**45),
        f"{AT_CP_B}: previous_address is 100000000000000000000000000000000000000…, not an address",
    ),
    "previous_address empty": (
        UPDATED,
        _edit(VM_CP_B, previous_address=""),
        f"{AT_CP_B}: previous_address is '', not an address",
    ),
    "importing not an object": (
        UPDATED,
        _edit(VM_CP_B, change__importing="yes"),
        f"{AT_CP_B}: importing is 'yes', not an object",
    ),
    "module_address shown to 60 characters": (
        UPDATED,
        _edit(VM_CP_B, module_address="nodes" * 14),
        (
            f"{AT_CP_B}: module_address 'nodesnodesnodesnodesnodesnodesnodesnodesnodesnodesnodesnod… is "
            "not a module address (module.NAME...)"
        ),
    ),
    "index neither a number nor a string": (
        UPDATED,
        _edit(VM_CP_B, index=1.5),
        f"{AT_CP_B}: index 1.5 is neither a number nor a string",
    ),
    "mode shown to 40 characters": (
        UPDATED,
        _edit(VM_CP_B, mode="m" * 50),
        f"{AT_CP_B}.mode: is 'mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm…: a resource change is 'managed' or 'data'",
    ),
    "prior state mode shown to 40 characters": (
        UPDATED,
        _prior(VM_CP_B, mode="m" * 50),
        (
            "prior_state.values.root_module.resources[1].mode: is "
            "'mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm…: a state's resources are 'managed' or 'data'"
        ),
    ),
    "prior state resource of unknown mode": (
        UPDATED,
        _prior(VM_CP_B, mode="resource"),
        (
            "prior_state.values.root_module.resources[1].mode: is 'resource': a state's resources are "
            "'managed' or 'data'"
        ),
    ),
    "no change, yet planned values drop every object of the prior state": (
        UPDATED,
        lambda data: (data.pop("resource_changes"), data["planned_values"]["root_module"].update(resources=[])),
        (
            "resource_changes: is empty, while planned_values drop all 6 objects the prior state holds "
            "(e.g. 'proxmox_virtual_environment_vm.node_cp-a_vm'): every one would go and no change says so"
        ),
    ),
    "empty changes, planned values in a child module only": (
        DELETED,
        lambda data: (
            data.update(resource_changes=[]),
            data["planned_values"].update(
                root_module={"child_modules": [{"address": "module.x", "resources": [{"address": "module.x.a.b"}]}]}
            ),
        ),
        (
            "resource_changes: is empty, while planned_values drop all 6 objects the prior state holds "
            "(e.g. 'proxmox_virtual_environment_vm.node_cp-a_vm'): every one would go and no change says so"
        ),
    ),
    "prior state resource not at its address": (
        UPDATED,
        _prior(VM_CP_B, type="proxmox_vm"),
        (
            f"prior_state.values.root_module.resources[1]: address '{VM_CP_B}' does not match its type, "
            "name, index and module ('proxmox_vm.node_cp-b_vm')"
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(NEVER_WRITTEN))
def test_a_shape_terraform_never_writes_is_an_input_error(case):
    base, mutate, message = NEVER_WRITTEN[case]
    data = fixture(base)
    read_plan(copy.deepcopy(data))  # the real plan itself reads
    mutate(data)
    with pytest.raises(NotAPlan) as caught:
        check_plan(data)
    assert str(caught.value) == f"<plan>: 1 problem in the plan\n  - {message}. {NEVER}"


def test_cli_exit_2_names_the_change_and_the_reason(tmp_path):
    data = fixture(DELETED)
    change_of(data, VM_B)["change"]["actions"] = ["update", "delete"]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    result = cli(str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        f"resource_changes[4] ('{VM_B}').change.actions: is ['update', 'delete']: Terraform writes one of "
        in result.stderr
    )


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "plan-guard", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_exit_codes_refused_ok_and_input_errors(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps(NOT_PLANS["state JSON"][0]))
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"format_version": "1.2", "planned_values": {}, "resource_changes": [}')
    refused = cli(str(PLANS / "hand-pg002-two-control-planes-leave.json"))
    accepted = cli(str(PLANS / "hand-ok-staged-change.json"))
    not_a_plan, malformed, missing = cli(str(state)), cli(str(garbage)), cli(str(tmp_path / "missing.json"))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.splitlines()[-1].endswith("hand-pg002-two-control-planes-leave.json: refused, 1 problem")
    assert "why PG002 OneControlPlaneLeavesPerApply: each leaving control plane is reset gracefully" in refused.stderr
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.endswith(
        "hand-ok-staged-change.json: ok — 5 nodes: 5 kept (1 changed in place: cp-b); "
        "none replaced, no machine lost; PG001-PG010 pass\n"
    )
    for result in (not_a_plan, malformed, missing):
        assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is a state (`terraform show -json` without a plan file" in not_a_plan.stderr
    assert "is not valid JSON" in malformed.stderr
    assert "cannot be read (No such file or directory)" in missing.stderr


def test_cli_ok_line_from_the_per_node_view_and_the_site_file(tmp_path):
    data = support.example_data()
    data["clusters"]["prod"]["workers"].pop("wk-b")
    site = tmp_path / "site-without-wk-b.yaml"
    site.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = str(PLANS / "real-worker-leaves.json")
    leaving = cli(plan, "--site", str(site), "--layer", "platform-prod")
    assert leaving.returncode == 0, leaving.stderr
    assert leaving.stdout == (
        f"{plan}: ok — 5 nodes: 4 kept, 1 leaving (wk-b); none replaced, no machine lost; PG001-PG010 pass\n"
    )
    kept = cli(plan)  # the example site still lists wk-b: its VM would be lost
    assert kept.returncode == 1 and "node 'wk-b' stays in the site but would be left without a machine" in kept.stderr
    torn = cli(str(PLANS / "real-standin-workers-reset-by-targeted-destroy.json"), "--teardown")
    assert torn.returncode == 0 and "3 kept, 2 leaving (wk-a, wk-b)" in torn.stdout, torn.stderr


def test_cli_a_layer_the_site_has_not_is_bad_input():
    """--layer names the layer whose roles judge the plan: a typo would judge it with no roles at all."""
    result = cli(str(PLANS / "real-worker-leaves.json"), "--layer", "platform-prd")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == (
        "terravixens plan-guard: --layer: no layer 'platform-prd' in site 'homelab': its layers are hypervisors, "
        "platform-prod, gitops-prod\n"
    )


def test_cli_roles_from_the_site_file_and_allow_reboot(tmp_path):
    plan = str(PLANS / "hand-pg007-auto-after-a-change.json")
    assert cli(plan).returncode == 1
    assert cli(plan, "--allow-reboot", "cp-b").returncode == 0
    assert cli(plan, "--plan-log", str(PLANS / "hand-pg007-node-answered.log.jsonl")).returncode == 0
    assert cli(plan, "--plan-log", str(PLANS / "hand-pg007-node-unreachable.log.jsonl")).returncode == 1


def test_site_roles(example_site):
    """From the layer's facts (GuardFacts.roles, its cluster): the platform and gitops layers have roles."""
    assert site_roles(example_site, layer_named(example_site, "platform-prod")) == THREE
    assert site_roles(example_site, layer_named(example_site, "gitops-prod")) == THREE
    assert site_roles(example_site, layer_named(example_site, "hypervisors")) == {}
    assert site_roles(example_site) == THREE


def test_site_roles_refuses_a_name_with_two_roles():
    data = support.example_data()
    data["clusters"]["lab"] = json.loads(json.dumps(data["clusters"]["prod"]))
    lab = data["clusters"]["lab"]
    lab["endpoint_vip"] = "10.21.1.10"
    lab["control_planes"] = {"wk-a": lab["workers"].pop("wk-a")}
    lab["control_planes"]["wk-a"].update(
        vm_id=2101, hostname="lab-wk-a", networks={"vlans": {111: {"address": "10.21.1.21/24"}}}
    )
    lab["workers"] = {}
    lab.pop("cilium"), lab.pop("flux")
    from terravixens.guard.context import AmbiguousRoles

    with pytest.raises(AmbiguousRoles, match="node 'wk-a' is a controlplane in one cluster and a worker in another"):
        site_roles(support.site_from(data))
    site = support.site_from(data)
    assert site_roles(site, layer_named(site, "platform-lab")) == {"wk-a": "controlplane"}


# ---------------------------------------------------------------------------------------------------- real plans
def deployed(name: str = "real-platform-state.json") -> Usage:
    from terravixens.guard import deployed_usage

    return deployed_usage({"platform-prod": fixture(name)})


def test_real_first_deploys_pass(example_site):
    assert check_plan(fixture("real-hypervisors-create.json"), GuardContext(usage=site_usage(example_site))) == []
    assert check_plan(fixture("real-platform-create.json"), GuardContext(roles=THREE)) == []


def test_real_replacement_is_refused():
    [violation] = check_plan(fixture("real-platform-vm-replaced.json"), GuardContext(roles=THREE))
    assert str(violation).startswith(
        "[PG001 StayingNodeKept] proxmox_virtual_environment_vm.node_wk-b_vm would be "
        "replaced: node 'wk-b' stays in the site but would be destroyed and re-created."
    )


def test_real_bridge_removal_under_deployed_vms_is_refused():
    [violation] = check_plan(fixture("real-hypervisors-bridge-in-use.json"), GuardContext(usage=deployed()))
    assert violation.message == (
        "proxmox_network_linux_bridge.hv_pve2_bridge_vmbr1 would delete bridge 'vmbr1' on 'pve2', used by VM cp-b in "
        "platform-prod (deployed), VM wk-b in platform-prod (deployed): move those VMs off it and deploy their "
        "platform layer first, then remove the bridge."
    )


def test_real_l0_teardown_waits_for_the_platform_layers():
    plan = fixture("real-hypervisors-destroy-while-vms-run.json")
    refused = check_plan(plan, GuardContext(usage=deployed()))
    assert codes(refused) == ["PG008"] * 5
    assert sorted(v.message.split(" ", 1)[0] for v in refused) == [
        "proxmox_network_linux_bridge.hv_pve1_bridge_vmbr1",
        "proxmox_network_linux_bridge.hv_pve2_bridge_vmbr1",
        "proxmox_user_token.hv_pve1_token",
        "proxmox_virtual_environment_role.hv_pve1_role",
        "proxmox_virtual_environment_user.hv_pve1_user",
    ]
    assert check_plan(plan, GuardContext(usage=Usage())) == []  # once the platform layers are gone


def test_real_state_json_is_not_a_plan():
    with pytest.raises(NotAPlan, match="is a state"):
        read_plan(fixture("real-state-not-a-plan.json"))


def test_cli_storage_deletion_with_the_site_but_no_deployed_state_is_refused():
    """Issue 26, item 6 (low): `plan-guard` with the site but without the deployed states passed a plan deleting a
    storage no site node names (`ok … PG001-PG010 pass`, exit 0, b4ffe4b), though a deployed VM may have its disk
    there. Unknown usage refuses, naming the fix; with the deployed states given, the same plan passes."""
    plan = str(PLANS / "hand-pg010-storage-destroyed.json")
    refused = cli(plan)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        "[PG010 StorageKeptWhileUsed] proxmox_storage_nfs.hv_pve1_storage_backups would delete storage 'backups': no "
        "node of the site file has a disk on it, but the guard was not told what the deployed VMs and containers use "
        "(no --deployed-state): give each platform layer's and the standalone layer's `terraform state pull` with "
        "--deployed-state"
    ) in refused.stderr
    passed = cli(plan, "--deployed-state", str(PLANS / "real-platform-state.json"))
    assert passed.returncode == 0 and passed.stdout.endswith("PG001-PG010 pass\n")


def test_cli_teardown_judged_on_deployed_states():
    plan = str(PLANS / "real-hypervisors-destroy-while-vms-run.json")
    refused = cli(plan, "--teardown", "--deployed-state", str(PLANS / "real-platform-state.json"))
    assert refused.returncode == 1 and refused.stderr.count("[PG008 HypervisorKeepsWhatNodesUse]") == 5
    assert cli(plan, "--teardown").returncode == 0
    # Not a teardown: the example site's nodes still want their bridges and images.
    assert cli(plan).returncode == 1


SECRET_SHAPES = [
    re.compile(p)
    for p in (
        r"-----BEGIN",
        r"AGE-SECRET-KEY",
        r"LS0tLS1CRUdJTi",
        r"[\w.-]+@[\w.-]+![\w.-]+[=:][0-9a-f]{8}-",
        r"\"/(tmp|root|home|work|var)/",
        r"127\.\d+\.\d+\.\d+:(?!8006\b)\d{2,5}",
    )
]


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.json")) + sorted(PLANS.glob("*.jsonl")), ids=lambda p: p.name)
def test_fixtures_hold_no_secret_and_no_local_path(path):
    text = path.read_text()
    for shape in SECRET_SHAPES:
        assert not shape.search(text), f"{path.name}: {shape.pattern}"


def test_a_plan_file_is_read_bounded_and_strict_and_every_problem_names_the_file_and_the_plan(tmp_path):
    """load_plan_file (plan-guard, deploy's saved plans): the Plan read_plan makes of the file's JSON; a file over the
    limit, text that is no JSON, and JSON that is no plan are each an InputError of "the plan" naming the file."""
    from terravixens.guard.plan import load_plan_file
    from terravixens.inputs import InputError

    data = fixture("real-worker-leaves.json")
    path = tmp_path / "worker.plan.json"
    path.write_text(json.dumps(data))
    loaded = load_plan_file(path)
    assert [c.address for c in loaded.changes] == [c.address for c in read_plan(data, path).changes]
    assert loaded.changes and loaded == read_plan(data, path)

    def refused(text: str, limit: int | None = None) -> InputError:
        bad = tmp_path / "bad.plan.json"
        bad.write_text(text)
        with pytest.raises(InputError) as caught:
            load_plan_file(bad) if limit is None else load_plan_file(bad, limit=limit)
        assert caught.value.what == "plan" and str(caught.value).startswith(f"{bad}: ")
        assert "in the plan" in str(caught.value).splitlines()[0]
        return caught.value

    refused(json.dumps(data), limit=100)  # over the limit
    refused("{not json")  # no JSON
    assert isinstance(refused("[]"), NotAPlan)  # JSON, not an object
    assert isinstance(refused(json.dumps({"resource_changes": 5})), NotAPlan)  # an object, not a plan
