"""Lifecycle scenarios: each change to the site file touches exactly the Terraform addresses it must.

Every test synthesizes the site before and after one change (full app.synth(), validations on) and asserts the
exact set of added, removed and changed addresses per stack. "Changed" means changed in what Terraform acts on:
attributes under lifecycle.ignore_changes are left out (terravixens.stackdiff.effective()). A node's VM, its
configuration apply and its reset are `node_<name>_vm` / `node_<name>_apply`: no scenario may touch another node's.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from terravixens.stackdiff import Changes, diff
from tests import support
from tests.scenario_support import assert_changes, run
from tests.site_builders import cluster, node

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
        cluster(d)["control_planes"].update({"cp-b": node(1102, 12), "cp-c": node(1103, 13, "pve3")})

    result = run(single_control_plane, grow)
    # cp-c is pve3's first node: the host gets its Talos image (L0), nothing else there or on the other hosts changes
    assert_changes(
        result,
        {
            "hypervisors": {"added": {"proxmox_download_file.hv_pve3_image_v1-11-5_ce4c980550dd"}},
            P: {"added": {vm("cp-b"), apply("cp-b"), vm("cp-c"), apply("cp-c")}, "changed": NODE_LISTS},
        },
    )


def test_control_planes_three_to_five(base):
    def grow(d):
        cluster(d)["control_planes"].update({"cp-d": node(1104, 14), "cp-e": node(1105, 15, "pve1")})

    result = run(base, grow)
    assert_changes(
        result, {P: {"added": {vm("cp-d"), apply("cp-d"), vm("cp-e"), apply("cp-e")}, "changed": NODE_LISTS}}
    )


def test_control_planes_five_to_three_resets_only_the_leaving_two(base):
    cluster(base)["control_planes"].update({"cp-d": node(1104, 14), "cp-e": node(1105, 15, "pve1")})

    def shrink(d):
        for name in ("cp-d", "cp-e"):
            del cluster(d)["control_planes"][name]

    result = run(base, shrink)
    assert_changes(
        result, {P: {"removed": {vm("cp-d"), apply("cp-d"), vm("cp-e"), apply("cp-e")}, "changed": NODE_LISTS}}
    )


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
    old = {f"proxmox_download_file.hv_{hv}_image_v1-11-5_ce4c980550dd" for hv in ("pve1", "pve2", "pve3")}
    new = {f"proxmox_download_file.hv_{hv}_image_v1-11-6_ce4c980550dd" for hv in ("pve1", "pve2", "pve3")}
    nodes = ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")
    assert_changes(
        result,
        {
            H: {"added": new, "removed": old},
            # New install image in every node's patch: staged, applied in place; the OS upgrade is a rolling command.
            # The configurations' contract (v1.11) did not move, so the data sources stay as they are (ADR 0023).
            P: {"changed": {apply(n) for n in nodes}},
        },
    )


def test_kubernetes_version_bump_reconfigures_every_node_in_place(base):
    """Through the machine configuration data sources, every apply changes (in place, no VM, no secret)."""
    result = run(base, lambda d: cluster(d).update(kubernetes_version="v1.34.3"))
    configs = {
        f"data.talos_machine_configuration.cluster_machine_configuration_{role}" for role in ("controlplane", "worker")
    }
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


# ---------------------------------------------------------------------------------------------------------- Talos path
# The supported path from 1.11 (ADR 0023): the contract pinned at v1.11, talos_version one minor at a time
# (1.11.6 -> 1.12.7 -> 1.13.0, `terravixens upgrade` after each), then the contract moved deliberately. Every step
# must keep each node's identity: its hostname (in machine.network or the HostnameConfig document), its VM and the
# cluster's secrets; a Talos step only downloads images and re-applies each node in place.
NODES = ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")
SECRETS = "talos_machine_secrets.cluster_secrets"
CONFIGS = {
    f"data.talos_machine_configuration.cluster_machine_configuration_{role}" for role in ("controlplane", "worker")
}


def images(version: str) -> set[str]:
    return {
        f"proxmox_download_file.hv_{hv}_image_{version.replace('.', '-')}_ce4c980550dd"
        for hv in ("pve1", "pve2", "pve3")
    }


def on_talos(data: dict, version: str, contract: str | None = "v1.11") -> dict:
    changed = copy.deepcopy(data)
    cluster(changed)["talos_version"] = version
    if contract is None:
        cluster(changed).pop("config_contract", None)
    else:
        cluster(changed)["config_contract"] = contract
    return changed


def rendered_hostname(patch: str) -> str:
    """The hostname a node's patch gives it, whichever contract wrote it; a generated (auto) one fails here."""
    documents = list(yaml.safe_load_all(patch))
    [machine] = [d for d in documents if "machine" in d]
    configs = [d for d in documents if d.get("kind") == "HostnameConfig"]
    if configs:
        [config] = configs
        assert config["auto"] == "off" and "hostname" not in machine["machine"]["network"]
        return config["hostname"]
    return machine["machine"]["network"]["hostname"]


def identity(stacks: dict[str, dict]) -> dict:
    """What makes each node the same machine to Proxmox, Talos and Kubernetes, and the cluster the same cluster."""
    resources = stacks[P]["resource"]
    vms, applies = resources["proxmox_virtual_environment_vm"], resources["talos_machine_configuration_apply"]
    return {
        "nodes": {
            name: {
                "hostname": rendered_hostname(applies[f"node_{name}_apply"]["config_patches"][0]),
                **{key: vms[f"node_{name}_vm"][key] for key in ("name", "vm_id", "node_name", "network_device")},
            }
            for name in NODES
        },
        "secrets": resources["talos_machine_secrets"]["cluster_secrets"],
    }


def installers(stacks: dict[str, dict]) -> dict[str, str]:
    applies = stacks[P]["resource"]["talos_machine_configuration_apply"]
    return {
        name: yaml.safe_load_all(applies[f"node_{name}_apply"]["config_patches"][0])
        .__next__()["machine"]["install"]["image"]
        .rsplit(":", 1)[1]
        for name in NODES
    }


def step(before: dict, after: dict) -> tuple[dict[str, Changes], dict, dict]:
    old, new = support.synth(support.site_from(before)), support.synth(support.site_from(after))
    return diff(old, new), old, new


def assert_identity_kept(old: dict, new: dict) -> None:
    assert identity(old) == identity(new)
    assert {name: identity(new)["nodes"][name]["hostname"] for name in NODES} == {name: name for name in NODES}


def assert_only_installers_changed(old: dict, new: dict) -> None:
    """Each apply differs in its patch only, and the patch in the installer's tag only."""
    before, after = (s[P]["resource"]["talos_machine_configuration_apply"] for s in (old, new))
    for name in NODES:
        apply_before, apply_after = before[f"node_{name}_apply"], after[f"node_{name}_apply"]
        assert {k: v for k, v in apply_before.items() if k != "config_patches"} == {
            k: v for k, v in apply_after.items() if k != "config_patches"
        }
        tag_before, tag_after = installers(old)[name], installers(new)[name]
        assert (
            apply_before["config_patches"][0].replace(f":{tag_before}\n", f":{tag_after}\n")
            == apply_after["config_patches"][0]
        )


@pytest.fixture()
def on_1_11_6(base):
    """An existing cluster on 1.11.6 that pinned its contract (what docs/commands.md asks before a minor bump)."""
    return on_talos(base, "v1.11.6")


def test_pinning_the_contract_of_a_1_11_cluster_changes_nothing(base):
    before = on_talos(base, "v1.11.6", contract=None)
    result, old, new = step(before, on_talos(base, "v1.11.6"))
    assert_changes(result, {})
    assert old[P]["data"] == new[P]["data"]


def test_talos_1_11_to_1_12_keeps_every_node(on_1_11_6):
    result, old, new = step(on_1_11_6, on_talos(on_1_11_6, "v1.12.7"))
    assert_changes(
        result,
        {H: {"added": images("v1.12.7"), "removed": images("v1.11.6")}, P: {"changed": {apply(n) for n in NODES}}},
    )
    assert_identity_kept(old, new)
    assert_only_installers_changed(old, new)
    assert set(installers(new).values()) == {"v1.12.7"}


def test_talos_1_12_to_1_13_keeps_every_node(on_1_11_6):
    on_1_12 = on_talos(on_1_11_6, "v1.12.7")
    result, old, new = step(on_1_12, on_talos(on_1_12, "v1.13.0"))
    assert_changes(
        result,
        {H: {"added": images("v1.13.0"), "removed": images("v1.12.7")}, P: {"changed": {apply(n) for n in NODES}}},
    )
    assert_identity_kept(old, new)
    assert_only_installers_changed(old, new)


@pytest.mark.parametrize(
    ("talos_version", "moves"),
    [("v1.12.7", ("v1.11", "v1.12")), ("v1.13.0", ("v1.12", "v1.13")), ("v1.13.0", ("v1.11", "v1.13"))],
)
def test_moving_the_contract_regenerates_configurations_and_keeps_every_node(on_1_11_6, talos_version, moves):
    """A deliberate step of its own: the data sources generate under the new contract and every node gets its
    hostname in a static HostnameConfig instead of machine.network; no image, VM or secret moves."""
    old_contract, new_contract = moves
    result, old, new = step(
        on_talos(on_1_11_6, talos_version, old_contract), on_talos(on_1_11_6, talos_version, new_contract)
    )
    assert_changes(result, {P: {"changed": {*CONFIGS, *(apply(n) for n in NODES)}}})
    assert_identity_kept(old, new)
    assert {
        s[P]["data"]["talos_machine_configuration"]["cluster_machine_configuration_worker"]["talos_version"]
        for s in (old, new)
    } == {old_contract, new_contract}
    assert installers(old) == installers(new) == dict.fromkeys(NODES, talos_version)


def test_a_minor_bump_without_a_pinned_contract_moves_it_too_and_keeps_every_node(base):
    """The default contract follows talos_version: the same deploy also regenerates the configurations (after
    `terravixens upgrade`, as docs/commands.md orders it; a 1.11 node would refuse a HostnameConfig document)."""
    before = on_talos(base, "v1.11.6", contract=None)
    result, old, new = step(before, on_talos(before, "v1.12.7", contract=None))
    assert_changes(
        result,
        {
            H: {"added": images("v1.12.7"), "removed": images("v1.11.6")},
            P: {"changed": {*CONFIGS, *(apply(n) for n in NODES)}},
        },
    )
    assert_identity_kept(old, new)


def test_kubernetes_to_the_newest_minor_of_talos_1_13(on_1_11_6):
    """Done with the path: Kubernetes 1.36 (1.13's newest) reconfigures every node in place, nothing else."""
    on_1_13 = on_talos(on_1_11_6, "v1.13.0", contract="v1.13")
    later = copy.deepcopy(on_1_13)
    cluster(later)["kubernetes_version"] = "v1.36.0"
    result, old, new = step(on_1_13, later)
    assert_changes(result, {P: {"changed": {*CONFIGS, *(apply(n) for n in NODES)}}})
    assert_identity_kept(old, new)


# ---------------------------------------------------------------------------------------------------------- MACs
def test_a_static_mac_touches_only_that_vm(base):
    """Setting and changing a MAC: the NIC of that VM, in place (bpg updates network devices without a new VM;
    tests/integration/test_fakepve.py has Terraform say "update"). Its Talos configuration does not name the MAC."""
    with_mac = copy.deepcopy(base)
    cluster(with_mac)["workers"]["wk-a"]["mac_address"] = "02:00:0a:0b:01:15"
    assert_changes(run(base, lambda d: d.update(with_mac)), {P: {"changed": {vm("wk-a")}}})
    result = run(with_mac, lambda d: cluster(d)["workers"]["wk-a"].update(mac_address="02:00:0A:0B:01:16"))
    assert_changes(result, {P: {"changed": {vm("wk-a")}}})
    stacks = support.synth(support.site_from(with_mac))
    [device] = stacks[P]["resource"]["proxmox_virtual_environment_vm"]["node_wk-a_vm"]["network_device"]
    assert device["mac_address"] == "02:00:0A:0B:01:15"
    [other] = stacks[P]["resource"]["proxmox_virtual_environment_vm"]["node_wk-b_vm"]["network_device"]
    assert other["mac_address"] is None  # Proxmox chooses, and keeps, the MAC of a node without one


def test_the_same_mac_spelled_differently_changes_nothing(base):
    cluster(base)["workers"]["wk-a"]["mac_address"] = "02:00:0A:0B:01:15"
    assert_changes(run(base, lambda d: cluster(d)["workers"]["wk-a"].update(mac_address="02-00-0a-0b-01-15")), {})
