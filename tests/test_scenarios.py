"""Lifecycle scenarios: each change to the site file touches exactly the Terraform addresses it must.

Every test synthesizes the site before and after one change (full app.synth(), validations on) and asserts the
exact set of added, removed and changed addresses per stack. "Changed" means changed in what Terraform acts on:
attributes under lifecycle.ignore_changes are left out (terravixens.stackdiff.effective()). A node's VM, its
configuration apply and its reset are `node_<name>_vm` / `node_<name>_apply`: no scenario may touch another node's.
"""
from __future__ import annotations

import copy

import pytest

from terravixens.stackdiff import Changes, diff
from tests import support

P, H, G = "platform-prod", "hypervisors", "gitops-prod"
HEALTH = "data.talos_cluster_health.cluster_health"
TALOSCONFIG = "data.talos_client_configuration.cluster_talosconfig"
NODE_ADDRESSES = "output.node_addresses"
MEMBERSHIP = "terraform_data.cluster_membership"
# Cluster-level lists of nodes, and the outputs read from them: allowed to change when the node set changes.
NODE_LISTS = {HEALTH, TALOSCONFIG, NODE_ADDRESSES, MEMBERSHIP, "output.talosconfig", "output.health_checked"}


def vm(name: str) -> str:
    return f"proxmox_virtual_environment_vm.node_{name}_vm"


def apply(name: str) -> str:
    return f"talos_machine_configuration_apply.node_{name}_apply"


def node(vm_id: int, octet: int, hypervisor: str = "pve2", **extra) -> dict:
    return {
        "hypervisor": hypervisor, "vm_id": vm_id, **extra,
        "networks": {"maintenance_ip": f"10.0.0.{octet}",
                     "vlans": {111: {"address": f"10.11.1.{octet}/24", "gateway": "10.11.1.1"}}},
    }


def cluster(data: dict) -> dict:
    return data["clusters"]["prod"]


def run(before: dict, change) -> dict[str, Changes]:
    after = copy.deepcopy(before)
    change(after)
    return diff(support.synth(support.site_from(before)), support.synth(support.site_from(after)))


def assert_changes(result: dict[str, Changes], expected: dict[str, dict[str, set[str]]]) -> None:
    actual = {stack: {kind: getattr(changes, kind) for kind in ("added", "removed", "changed") if getattr(changes, kind)}
              for stack, changes in result.items()}
    assert actual == expected


@pytest.fixture()
def base():
    return support.example_data()


@pytest.fixture()
def single_control_plane(base):
    for name in ("cp-b", "cp-c"):
        del cluster(base)["control_planes"][name]
    return base


def test_add_worker_adds_only_that_worker(base):
    result = run(base, lambda d: cluster(d)["workers"].update({"wk-c": node(1203, 23)}))
    assert_changes(result, {P: {"added": {vm("wk-c"), apply("wk-c")}, "changed": NODE_LISTS}})


def test_remove_worker_destroys_only_that_worker(base):
    result = run(base, lambda d: cluster(d)["workers"].pop("wk-b"))
    assert_changes(result, {P: {"removed": {vm("wk-b"), apply("wk-b")}, "changed": NODE_LISTS}})


def test_control_planes_one_to_three_never_rebootstraps(single_control_plane):
    def grow(d):
        cluster(d)["control_planes"].update({"cp-b": node(1102, 12), "cp-c": node(1103, 13, "pve1")})

    result = run(single_control_plane, grow)
    assert_changes(result, {P: {"added": {vm("cp-b"), apply("cp-b"), vm("cp-c"), apply("cp-c")}, "changed": NODE_LISTS}})


def test_control_planes_three_to_five(base):
    def grow(d):
        cluster(d)["control_planes"].update({"cp-d": node(1104, 14), "cp-e": node(1105, 15, "pve1")})

    result = run(base, grow)
    assert_changes(result, {P: {"added": {vm("cp-d"), apply("cp-d"), vm("cp-e"), apply("cp-e")}, "changed": NODE_LISTS}})


def test_control_planes_five_to_three_resets_only_the_leaving_two(base):
    cluster(base)["control_planes"].update({"cp-d": node(1104, 14), "cp-e": node(1105, 15, "pve1")})

    def shrink(d):
        for name in ("cp-d", "cp-e"):
            del cluster(d)["control_planes"][name]

    result = run(base, shrink)
    assert_changes(result, {P: {"removed": {vm("cp-d"), apply("cp-d"), vm("cp-e"), apply("cp-e")}, "changed": NODE_LISTS}})


def test_promote_workers_keeps_their_vms(base):
    cluster(base)["workers"]["wk-c"] = node(1203, 23)

    def promote(d):
        for name in ("wk-a", "wk-b"):
            cluster(d)["control_planes"][name] = cluster(d)["workers"].pop(name)

    result = run(base, promote)
    # The applies switch to the control-plane configuration (and carry the VIP); the VMs stay as they are.
    assert_changes(result, {P: {"changed": {apply("wk-a"), apply("wk-b"), *(NODE_LISTS - {NODE_ADDRESSES})}}})


def test_hostname_rename_touches_only_that_node(base):
    result = run(base, lambda d: cluster(d)["workers"]["wk-a"].update(hostname="wk-a-renamed"))
    assert_changes(result, {P: {"changed": {vm("wk-a"), apply("wk-a")}}})


def test_worker_ip_change_reconfigures_in_place(base):
    def move(d):
        cluster(d)["workers"]["wk-a"]["networks"]["vlans"][111]["address"] = "10.11.1.41/24"

    result = run(base, move)
    assert_changes(result, {P: {"changed": {apply("wk-a"), *NODE_LISTS}}})


def test_bootstrap_node_ip_change_never_rebootstraps(base):
    def move(d):
        cluster(d)["control_planes"]["cp-a"]["networks"]["vlans"][111]["address"] = "10.11.1.41/24"

    result = run(base, move)
    # Bootstrap and kubeconfig talk to the node's first-contact (maintenance) address, which did not move.
    assert_changes(result, {P: {"changed": {apply("cp-a"), *NODE_LISTS}}})


def test_talos_version_bump_replaces_no_vm_and_keeps_secrets(base):
    result = run(base, lambda d: cluster(d).update(talos_version="v1.11.6"))
    old = {f"proxmox_download_file.hv_{hv}_image_v1-11-5_ce4c980550dd" for hv in ("pve1", "pve2")}
    new = {f"proxmox_download_file.hv_{hv}_image_v1-11-6_ce4c980550dd" for hv in ("pve1", "pve2")}
    configs = {f"data.talos_machine_configuration.cluster_machine_configuration_{role}" for role in ("controlplane", "worker")}
    nodes = ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")
    assert_changes(result, {
        H: {"added": new, "removed": old},
        # New install image in every node's patch: staged, applied in place; the OS upgrade is a rolling command.
        P: {"changed": {*configs, *(apply(n) for n in nodes)}},
    })


def test_kubernetes_version_bump_reconfigures_every_node_in_place(base):
    """Through the machine configuration data sources, every apply changes (in place, no VM, no secret)."""
    result = run(base, lambda d: cluster(d).update(kubernetes_version="v1.34.3"))
    configs = {f"data.talos_machine_configuration.cluster_machine_configuration_{role}" for role in ("controlplane", "worker")}
    assert_changes(result, {P: {"changed": {*configs, *(apply(n) for n in ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b"))}}})


def test_label_change_touches_only_that_node(base):
    result = run(base, lambda d: cluster(d)["workers"]["wk-b"]["labels"].update({"zone": "b"}))
    assert_changes(result, {P: {"changed": {apply("wk-b")}}})


def test_cilium_pool_change_touches_only_the_pools_release(base):
    result = run(base, lambda d: cluster(d)["cilium"]["pools"].update({"services": ["10.12.0.160/27"]}))
    assert_changes(result, {G: {"changed": {"helm_release.cluster_cilium_l2"}}})


def test_flux_branch_change_touches_only_the_sync_release(base):
    result = run(base, lambda d: cluster(d)["flux"].update(branch="release"))
    assert_changes(result, {G: {"changed": {"helm_release.cluster_flux_sync"}}})


def test_new_vm_id_touches_only_that_node(base):
    """The VM is replaced (bpg: vm_id forces it) and its apply follows through replace_triggered_by."""
    result = run(base, lambda d: cluster(d)["workers"]["wk-b"].update(vm_id=1299))
    assert_changes(result, {P: {"changed": {vm("wk-b")}}})
    after = support.synth(support.site_from(base))
    lifecycle = after[P]["resource"]["talos_machine_configuration_apply"]["node_wk-b_apply"]["lifecycle"]
    assert lifecycle == {"replace_triggered_by": ["proxmox_virtual_environment_vm.node_wk-b_vm.id"]}


def test_new_hypervisor_migrates_that_vm(base):
    result = run(base, lambda d: cluster(d)["workers"]["wk-b"].update(hypervisor="pve1"))
    assert_changes(result, {P: {"changed": {vm("wk-b")}}})  # same image on both hypervisors: the apply stays
    stacks = support.synth(support.site_from(base))
    assert stacks[P]["resource"]["proxmox_virtual_environment_vm"]["node_wk-b_vm"]["migrate"] is True


def test_diff_sees_a_changed_vm(base):
    """The diff itself must be able to fail: a CPU change is a change of that VM."""
    result = run(base, lambda d: cluster(d)["workers"]["wk-a"].update(cpu=12))
    assert_changes(result, {P: {"changed": {vm("wk-a")}}})
