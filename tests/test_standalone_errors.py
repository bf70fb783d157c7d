"""One small test per invalid `standalone` section: a minimally changed copy of sites/standalone.yaml, the exact field
the user has to edit, and the key parts of the message (bad value, fix). Plus what the valid site resolves to."""

from __future__ import annotations

import copy

import pytest
import yaml

from terravixens.config.loader import SiteError, SiteProblem, parse_site
from terravixens.config.standalone import DEFAULT_PRESETS
from terravixens.standalone.topology import placement
from tests import spec_support, support


def lab() -> dict:
    return yaml.safe_load(spec_support.SITE.read_text())


def nodes(data: dict) -> dict:
    return data["standalone"]["nodes"]


def problems_of(data: dict) -> list[SiteProblem]:
    with pytest.raises(SiteError) as caught:
        parse_site(data, "site.yaml")
    return caught.value.problems


def only_problem(data: dict) -> SiteProblem:
    problems = problems_of(data)
    assert len(problems) == 1, f"expected exactly one problem, got: {problems}"
    return problems[0]


def test_the_standalone_example_is_valid():
    site = parse_site(lab(), "site.yaml")
    assert sorted(site.standalone.nodes) == ["dns1", "jump1", "nest1", "tools"]


def test_a_site_without_standalone_nodes_is_unchanged(example_site):
    assert example_site.standalone.nodes == {} and example_site.standalone.specs_dir == "specs"


# ---------------------------------------------------------------------------------------------------- types
def test_k3s_is_reserved():
    data = lab()
    nodes(data)["tools"]["type"] = "k3s"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.type"
    assert "type 'k3s' is reserved and not supported yet" in problem.message


def test_an_unknown_type():
    data = lab()
    nodes(data)["tools"]["type"] = "lxc"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.type" and "'lxc'" in problem.message


def test_a_ct_with_an_image():
    data = lab()
    nodes(data)["dns1"]["image"] = "local:import/debian-12-genericcloud-amd64.qcow2"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.dns1.image"
    assert "a ct boots from a template, not an image" in problem.message and "'template:" in problem.message


def test_a_ct_without_a_template():
    data = lab()
    del nodes(data)["dns1"]["template"]
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.dns1.template" and "a ct needs 'template'" in problem.message


def test_a_vm_without_an_image():
    data = lab()
    del nodes(data)["tools"]["image"]
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.image" and "a vm needs 'image'" in problem.message


def test_a_vm_with_a_template():
    data = lab()
    nodes(data)["tools"]["template"] = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
    del nodes(data)["tools"]["image"]
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.template"
    assert "a vm boots from an image, not a template" in problem.message


def test_unprivileged_on_a_vm():
    data = lab()
    nodes(data)["tools"]["unprivileged"] = True
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.unprivileged" and "containers only" in problem.message


def test_bridges_on_a_vm():
    data = lab()
    nodes(data)["tools"]["bridges"] = {"vmbr9": {}}
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.bridges" and "only a pve node has them" in problem.message


@pytest.mark.parametrize(
    "field,value",
    [
        ("image", "debian-12.qcow2"),
        ("image", "local:vztmpl/x.tar.zst"),
        ("image", "local:import/../../etc/passwd"),
        ("template", "local:iso/x.iso"),
    ],
)
def test_volume_ids_are_checked(field, value):
    data = lab()
    node = nodes(data)["dns1" if field == "template" else "tools"]
    node[field] = value
    problem = only_problem(data)
    assert problem.field == f"standalone.nodes.{'dns1' if field == 'template' else 'tools'}.{field}"
    assert "is not a Proxmox volume id" in problem.message and "STORAGE:" in problem.message


# ---------------------------------------------------------------------------------------------------- parents
def test_an_unknown_parent():
    data = lab()
    nodes(data)["tools"]["parent"] = "pve9"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.parent"
    assert "unknown parent 'pve9': use a hypervisor or a standalone pve node (pve1, nest1)" in problem.message


def test_a_parent_that_is_not_a_pve():
    data = lab()
    nodes(data)["jump1"]["parent"] = "tools"
    nodes(data)["jump1"]["bridge"] = "vmbr1"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.jump1.parent"
    assert "parent 'tools' is a vm, which cannot host guests" in problem.message


def test_a_parent_cycle_is_reported_once():
    data = lab()
    nodes(data)["nest2"] = {
        **copy.deepcopy(nodes(data)["nest1"]),
        "parent": "nest1",
        "vm_id": 103,
        "bridge": "vmbr0",
        "networks": {"vlans": {111: {"address": "10.11.1.70/24"}}},
    }
    nodes(data)["nest1"]["parent"] = "nest2"
    problems = problems_of(data)
    cycle = [p for p in problems if "cycle" in p.message]
    assert len(cycle) == 1 and cycle[0].field == "standalone.nodes.nest1.parent"
    assert "parent cycle nest1 -> nest2 -> nest1: every chain of parents must end at a hypervisor" in cycle[0].message


def test_a_node_that_is_its_own_parent():
    data = lab()
    nodes(data)["nest1"]["parent"] = "nest1"
    problems = [p for p in problems_of(data) if "cycle" in p.message]
    assert [p.message.split(":")[0] for p in problems] == ["parent cycle nest1 -> nest1"]


def test_a_node_named_like_a_hypervisor():
    data = lab()
    nodes(data)["pve1"] = nodes(data).pop("tools")
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.pve1" and "also names a hypervisor" in problem.message


# ---------------------------------------------------------------------------------------------------- presets
def test_an_unknown_preset():
    data = lab()
    nodes(data)["tools"]["preset"] = "vm-huge"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.preset"
    assert "unknown preset 'vm-huge': use one of vm-large, vm-medium, vm-small, vm-xlarge, vm-xsmall" in problem.message


def test_a_new_preset_must_be_complete():
    data = lab()
    data["standalone"]["presets"]["db"] = {"cores": 4}
    problem = only_problem(data)
    assert problem.field == "standalone.presets.db" and "lacks memory_mib, disk_gib" in problem.message


def test_a_preset_value_out_of_range():
    data = lab()
    data["standalone"]["presets"]["vm-small"] = {"cores": 0}
    problem = only_problem(data)
    assert problem.field == "standalone.presets.vm-small.cores" and "(got 0)" in problem.message


def test_presets_resolve_shipped_then_site_then_node():
    placed = placement(parse_site(lab(), "site.yaml"))
    assert (placed["nest1"].cores, placed["nest1"].memory_mib, placed["nest1"].disk_gib) == (4, 12288, 100)
    assert (placed["jump1"].cores, placed["jump1"].memory_mib, placed["jump1"].disk_gib) == (1, 2048, 20)
    assert DEFAULT_PRESETS["vm-large"].memory_mib == 8192  # the site's override did not touch the shipped one


# ---------------------------------------------------------------------------------------------------- duplicates
def test_a_vm_id_shared_with_a_cluster_node():
    data = support.example_data()
    data["standalone"] = lab()["standalone"]
    nodes(data)["tools"]["vm_id"] = 1101
    nodes(data)["nest1"]["bridge"] = nodes(data)["tools"]["bridge"] = "vmbr1"
    nodes(data)["nest1"]["networks"]["vlans"][111]["address"] = "10.11.1.160/24"
    for name, address in (("tools", "10.11.1.162/24"), ("dns1", "10.11.1.153/24"), ("jump1", "10.11.1.161/24")):
        nodes(data)[name]["networks"]["vlans"][111]["address"] = address
    del nodes(data)["tools"]["networks"]["vlans"][120]
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.vm_id"
    assert problem.message == "VM id 1101 is already used by clusters.prod.control_planes.cp-a: give each VM its own id"


def test_a_vm_id_shared_between_standalone_nodes_of_one_proxmox_cluster():
    data = lab()
    nodes(data)["jump1"]["vm_id"] = 101
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.jump1.vm_id"
    assert problem.message == (
        "VM id 101 is already used by standalone.nodes.dns1 on the same nested Proxmox VE "
        "(standalone.nodes.nest1): give each VM its own id"
    )


def test_the_same_vm_id_on_different_proxmox_clusters_is_fine():
    data = lab()
    nodes(data)["jump1"]["vm_id"] = 3002  # tools has 3002 on pve1; jump1 lives on nest1, its own Proxmox cluster
    assert parse_site(data, "site.yaml").standalone.nodes["jump1"].vm_id == 3002


def test_an_address_shared_with_another_node():
    data = lab()
    nodes(data)["jump1"]["networks"]["vlans"][111]["address"] = "10.11.1.53/24"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.jump1.networks.vlans.111.address"
    assert "address 10.11.1.53 is already used by standalone.nodes.dns1.networks.vlans.111.address" in problem.message


def test_an_address_shared_with_a_cluster_vip():
    data = support.example_data()
    data["standalone"] = {
        "specs_dir": "specs",
        "spec_server": lab()["standalone"]["spec_server"],
        "nodes": {
            "tools": {
                **lab()["standalone"]["nodes"]["tools"],
                "networks": {"vlans": {111: {"address": "10.11.1.10/24"}}},
            }
        },
    }
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks.vlans.111.address"
    assert "already used by clusters.prod.endpoint_vip" in problem.message


def test_an_address_inside_a_load_balancer_pool():
    data = support.example_data()
    data["standalone"] = {
        "spec_server": lab()["standalone"]["spec_server"],
        "nodes": {
            "tools": {
                **lab()["standalone"]["nodes"]["tools"],
                "networks": {"vlans": {120: {"address": "10.12.0.200/24"}}},
            }
        },
    }
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks.vlans.120.address"
    assert "inside LoadBalancer pool 10.12.0.192/27 of clusters.prod.cilium.pools.services" in problem.message


# ---------------------------------------------------------------------------------------------------- networks
def test_a_node_without_an_address():
    data = lab()
    nodes(data)["tools"]["networks"] = {}
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks" and "the node has no address" in problem.message


def test_a_bridge_missing_on_the_hypervisor():
    data = lab()
    nodes(data)["tools"]["bridge"] = "vmbr7"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.bridge"
    assert (
        "bridge 'vmbr7' is not declared on parent 'pve1': declare it under hypervisors.pve1.bridges" in problem.message
    )


def test_a_bridge_missing_on_a_nested_host():
    data = lab()
    nodes(data)["dns1"]["bridge"] = "vmbr1"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.dns1.bridge"
    assert "declare it under standalone.nodes.nest1.bridges or use one of vmbr0" in problem.message


def test_a_vlan_not_allowed_on_the_bridge():
    data = lab()
    nodes(data)["dns1"]["networks"]["vlans"][120] = {"address": "10.12.0.53/24"}
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.dns1.networks.vlans.120"
    assert "VLAN 120 is not allowed on bridge 'vmbr0' of 'nest1'" in problem.message


def test_an_address_without_a_prefix():
    data = lab()
    nodes(data)["tools"]["networks"]["vlans"][111]["address"] = "10.11.1.62"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks.vlans.111.address"
    assert "has no prefix length" in problem.message


def test_a_gateway_outside_the_interfaces_subnet():
    # The gateway rule walks standalone nodes like cluster nodes (one walk: config/site_rules/walk.machines).
    data = lab()
    nodes(data)["dns1"]["networks"]["vlans"][111]["gateway"] = "10.12.0.1"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.dns1.networks.vlans.111.gateway"
    assert problem.message.startswith("gateway 10.12.0.1 is outside the interface's subnet 10.11.1.0/24")


def test_a_gateway_that_is_the_nodes_own_address():
    data = lab()
    nodes(data)["tools"]["networks"]["vlans"][111]["gateway"] = "10.11.1.62"
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks.vlans.111.gateway"
    assert "is the node's own address" in problem.message


def test_an_untagged_gateway_is_checked_too():
    data = lab()
    nodes(data)["tools"]["networks"]["untagged"] = {"address": "192.168.50.62/24", "gateway": "192.168.60.1"}
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks.untagged.gateway"


def test_shared_rules_say_the_same_for_both_kinds_of_node():
    """VM ids, addresses, bridges and VLANs: one rule each for cluster and standalone nodes (walk.machines), so one
    wording; only the path and the host kind differ."""
    from terravixens.config.site_rules import references, standalone, uniqueness

    data = support.example_data()
    data["standalone"] = lab()["standalone"]
    data["hypervisors"]["pve1"]["bridges"]["vmbr1"]["vlans"] = [111, 120]
    nodes(data)["tools"]["vm_id"] = 1101
    nodes(data)["tools"]["bridge"] = "vmbr7"
    prod = data["clusters"]["prod"]
    prod["workers"]["wk-b"]["vm_id"] = 1101
    problems = problems_of(data)
    vm_ids = sorted(p.message for p in problems if p.field.endswith("vm_id"))
    assert vm_ids == ["VM id 1101 is already used by clusters.prod.control_planes.cp-a: give each VM its own id"] * 2
    bridge = [p for p in problems if p.field == "standalone.nodes.tools.bridge"]
    assert bridge[0].message.startswith(
        "bridge 'vmbr7' is not declared on parent 'pve1': declare it under hypervisors.pve1.bridges"
    )
    # The copies are gone: the standalone module has no rule of its own for what the shared rules check.
    for name in ("unique_vm_ids", "unique_addresses", "clear_of_pools", "bridges_on_parent", "reachable"):
        assert not hasattr(standalone, name)
    assert hasattr(uniqueness, "unique_vm_ids") and hasattr(references, "bridges_exist")


# ---------------------------------------------------------------------------------------------------- section
def test_an_unknown_key_in_a_node():
    data = lab()
    nodes(data)["tools"]["memory"] = 4096
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.memory" and "unknown key (value 4096)" in problem.message


@pytest.mark.parametrize("specs_dir", ["/etc/specs", "~/specs", "../specs", "specs/../../x"])
def test_specs_dir_stays_next_to_the_site(specs_dir):
    data = lab()
    data["standalone"]["specs_dir"] = specs_dir
    problem = only_problem(data)
    assert problem.field == "standalone.specs_dir" and "leaves the site's folder" in problem.message


def test_a_spec_server_url_with_a_path():
    data = lab()
    data["standalone"]["spec_server"]["url"] = "https://specs.lab.internal/spec"
    problem = only_problem(data)
    assert problem.field == "standalone.spec_server.url" and "write https://HOST[:PORT]" in problem.message


def test_a_bad_node_name():
    data = lab()
    nodes(data)["Tools_1"] = nodes(data).pop("tools")
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.Tools_1.[key]" and "is not a DNS-safe name" in problem.message


# ---------------------------------------------------------------------------------------------------- placement
def test_placement_puts_parents_first_with_their_chain_and_tier():
    placed = placement(parse_site(lab(), "site.yaml"))
    assert list(placed) == ["nest1", "tools", "dns1", "jump1"]
    assert [(p.chain, p.tier) for p in placed.values()] == [
        (("pve1",), 1),
        (("pve1",), 1),
        (("pve1", "nest1"), 2),
        (("pve1", "nest1"), 2),
    ]
    assert placed["nest1"].api_endpoint == "https://10.11.1.60:8006/" and placed["tools"].api_endpoint is None
    assert [(n.vlan, n.address, n.gateway) for n in placed["tools"].nics] == [
        (111, "10.11.1.62/24", "10.11.1.1"),
        (120, "10.12.0.62/24", None),
    ]
    assert placed["dns1"].unprivileged is True and placed["tools"].unprivileged is None


# -------------------------------------------------------------------------------------------------- coercion (ADR 0032)
def test_vlan_keys_of_a_standalone_node_that_become_one():
    data = lab()
    nodes(data)["tools"]["networks"]["vlans"]["+120"] = {"address": "10.12.0.63/24"}
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.tools.networks.vlans.+120"
    assert problem.message.startswith("'+120' and 120 are both VLAN 120 once read")


def test_a_vlan_listed_twice_on_a_nested_hosts_bridge():
    data = lab()
    nodes(data)["nest1"]["bridges"]["vmbr0"]["vlans"] = [111, 111.0]
    problem = only_problem(data)
    assert problem.field == "standalone.nodes.nest1.bridges.vmbr0.vlans.1"
    assert problem.message.startswith("VLAN 111 is listed twice (items 0 and 1)")


def test_an_octal_vm_id_of_a_standalone_node(tmp_path):
    text = spec_support.SITE.read_text().replace("      vm_id: 3001\n", "      vm_id: 03001\n")
    site = tmp_path / "site.yaml"
    site.write_text(text)
    from terravixens.config.loader import load_site

    with pytest.raises(SiteError) as caught:
        load_site(site)
    [problem] = caught.value.problems
    assert problem.field == "standalone.nodes.nest1.vm_id"
    assert problem.message.startswith("written 03001, which is read as 1537 (YAML 1.1 reads a leading 0 as octal)")
