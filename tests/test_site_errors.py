"""One small test per site-file error: a minimally changed copy of the example, the exact field, the bad value and the
fix.

Each test mutates a deep copy of sites/example.yaml (via tests.support.example_data()) and checks what
terravixens.config.loader.parse_site reports: the field path the user has to edit, and the key parts of the message.
"""

from __future__ import annotations

import copy

import pytest

from terravixens.config.loader import SiteError, SiteProblem, load_site, parse_site
from terravixens.inputs import shown
from tests import support


# ---------------------------------------------------------------------------------------------------------- helpers
def example() -> dict:
    return copy.deepcopy(support.example_data())


def problems_of(data: dict) -> list[SiteProblem]:
    with pytest.raises(SiteError) as caught:
        parse_site(data, "site.yaml")
    assert caught.value.path == "site.yaml"
    return caught.value.problems


def only_problem(data: dict) -> SiteProblem:
    problems = problems_of(data)
    assert len(problems) == 1, f"expected exactly one problem, got: {problems}"
    return problems[0]


def prod(data: dict) -> dict:
    return data["clusters"]["prod"]


def worker_a(data: dict) -> dict:
    return prod(data)["workers"]["wk-a"]


def second_cluster(data: dict, *, endpoint_vip: str, cp_address: str, vm_id: int = 2101) -> dict:
    """Adds a minimal valid 'staging' cluster with one control plane; returns it for further changes."""
    staging = {
        "endpoint_vip": endpoint_vip,
        "talos_version": "v1.11.5",
        "kubernetes_version": "v1.34.2",
        "bridge": "vmbr1",
        "control_planes": {
            "st-cp": {"hypervisor": "pve1", "vm_id": vm_id, "networks": {"vlans": {111: {"address": cp_address}}}},
        },
    }
    data["clusters"]["staging"] = staging
    return staging


def test_the_example_itself_is_valid():
    site = parse_site(example(), "site.yaml")
    assert sorted(site.clusters["prod"].nodes()) == ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]


def test_a_second_valid_cluster_is_accepted():
    # Guards the cross-cluster tests below: the helper cluster alone is valid, so their only problem is the one made.
    data = example()
    second_cluster(data, endpoint_vip="10.11.2.10", cp_address="10.11.2.11/24")
    assert sorted(parse_site(data, "site.yaml").clusters) == ["prod", "staging"]


# ---------------------------------------------------------------------------------------------------------- quorum
@pytest.mark.parametrize("keep", [["cp-a", "cp-b"], ["cp-a", "cp-b", "cp-c", "cp-d"]], ids=["2", "4"])
def test_even_control_plane_count(keep):
    data = example()
    planes = prod(data)["control_planes"]
    if "cp-d" in keep:
        planes["cp-d"] = {
            **copy.deepcopy(planes["cp-c"]),
            "vm_id": 1104,
            "networks": {"maintenance_ip": "10.0.0.54", "vlans": {111: {"address": "10.11.1.14/24"}}},
        }
    for name in list(planes):
        if name not in keep:
            del planes[name]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.control_planes"
    assert f"{len(keep)} control planes ({', '.join(keep)})" in problem.message
    assert "use 1, 3, 5 or 7" in problem.message
    assert "etcd needs a majority" in problem.message
    assert "even count adds no fault tolerance" in problem.message


def test_zero_control_planes():
    data = example()
    prod(data)["control_planes"] = {}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.control_planes"
    assert "0 control planes (none)" in problem.message
    assert "use 1, 3, 5 or 7" in problem.message


# ---------------------------------------------------------------------------------------------------------- uniqueness
def test_duplicate_vm_id_names_the_other_owner():
    data = example()
    worker_a(data)["vm_id"] = 1101
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.vm_id"
    assert "VM id 1101 is already used by clusters.prod.control_planes.cp-a" in problem.message
    assert "give each VM its own id" in problem.message


def test_duplicate_vm_id_across_clusters():
    data = example()
    second_cluster(data, endpoint_vip="10.11.2.10", cp_address="10.11.2.11/24", vm_id=1201)
    problem = only_problem(data)
    assert problem.field == "clusters.staging.control_planes.st-cp.vm_id"
    assert "VM id 1201 is already used by clusters.prod.workers.wk-a" in problem.message


def test_duplicate_address_between_nodes():
    data = example()
    worker_a(data)["networks"]["vlans"][111]["address"] = "10.11.1.11/24"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.111.address"
    assert (
        "address 10.11.1.11 is already used by clusters.prod.control_planes.cp-a.networks.vlans.111.address"
        in problem.message
    )
    assert "give each address to one node" in problem.message


def test_duplicate_maintenance_ip_between_nodes():
    data = example()
    worker_a(data)["networks"]["maintenance_ip"] = "10.0.0.51"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.maintenance_ip"
    assert (
        "address 10.0.0.51 is already used by clusters.prod.control_planes.cp-a.networks.maintenance_ip"
        in problem.message
    )


def test_duplicate_address_across_clusters():
    data = example()
    second_cluster(data, endpoint_vip="10.11.1.100", cp_address="10.11.1.11/24")
    problem = only_problem(data)
    assert problem.field == "clusters.staging.control_planes.st-cp.networks.vlans.111.address"
    assert (
        "address 10.11.1.11 is already used by clusters.prod.control_planes.cp-a.networks.vlans.111.address"
        in problem.message
    )


def test_node_address_equal_to_the_endpoint_vip():
    data = example()
    worker_a(data)["networks"]["vlans"][111]["address"] = "10.11.1.10/24"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.111.address"
    assert "address 10.11.1.10 is already used by clusters.prod.endpoint_vip" in problem.message


# ---------------------------------------------------------------------------------------------------------- names
@pytest.mark.parametrize(("bad", "suggestion"), [("CP-D", "cp-d"), ("cp_d", "cp-d")], ids=["uppercase", "underscore"])
def test_node_name_not_dns_safe(bad, suggestion):
    data = example()
    prod(data)["control_planes"][bad] = prod(data)["control_planes"].pop("cp-c")
    problem = only_problem(data)
    # pydantic reports a bad dict key at KEY.[key]: the path still names the offending key.
    assert problem.field == f"clusters.prod.control_planes.{bad}.[key]"
    assert f"{bad!r} is not a DNS-safe name" in problem.message
    assert "lowercase letters, digits and '-'" in problem.message
    assert f"(e.g. {suggestion!r})" in problem.message


def test_worker_name_not_dns_safe():
    data = example()
    prod(data)["workers"]["Wk_C"] = prod(data)["workers"].pop("wk-b")
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.Wk_C.[key]"
    assert "'Wk_C' is not a DNS-safe name" in problem.message
    assert "(e.g. 'wk-c')" in problem.message


def test_site_name_not_dns_safe():
    data = example()
    data["site"] = "Home_Lab"
    problem = only_problem(data)
    assert problem.field == "site"
    assert "'Home_Lab' is not a DNS-safe name" in problem.message
    assert "(e.g. 'home-lab')" in problem.message


def test_node_both_control_plane_and_worker():
    data = example()
    prod(data)["workers"]["cp-a"] = copy.deepcopy(prod(data)["control_planes"]["cp-a"])
    problem = only_problem(data)
    assert problem.field == "clusters.prod"
    assert "node 'cp-a' is both a control plane and a worker" in problem.message
    assert "keep it in one map" in problem.message


def test_bootstrap_node_not_a_control_plane():
    data = example()
    prod(data)["bootstrap_node"] = "wk-a"
    problem = only_problem(data)
    assert problem.field == "clusters.prod"
    assert "bootstrap_node 'wk-a' is not a control plane" in problem.message
    assert "name one of cp-a, cp-b, cp-c" in problem.message


# ---------------------------------------------------------------------------------------------------------- hypervisors
def test_unknown_hypervisor():
    data = example()
    worker_a(data)["hypervisor"] = "pve4"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.hypervisor"
    assert "unknown hypervisor 'pve4'" in problem.message
    assert "use one of pve1, pve2, pve3 or add it under 'hypervisors'" in problem.message


def test_bridge_not_declared_on_the_hypervisor():
    data = example()
    worker_a(data)["bridge"] = "vmbr9"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.bridge"
    assert "bridge 'vmbr9' is not declared on hypervisor 'pve1'" in problem.message
    assert "declare it under hypervisors.pve1.bridges or use one of vmbr1" in problem.message


def test_vlan_not_allowed_on_the_bridge():
    data = example()
    worker_a(data)["networks"]["vlans"][130] = {"address": "10.13.0.21/24"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.130"  # the entry to fix, with its line
    assert "VLAN 130 is not allowed on bridge 'vmbr1' of 'pve1'" in problem.message
    assert "add it to hypervisors.pve1.bridges.vmbr1.vlans" in problem.message


def test_routable_vlan_not_allowed_on_the_bridge():
    data = example()
    worker_a(data)["networks"]["routable"] = {"vlan": 140, "address": "192.0.2.21/24", "gateway": "192.0.2.1"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.routable.vlan"
    assert "VLAN 140 is not allowed on bridge 'vmbr1' of 'pve1'" in problem.message


def test_a_vlan_in_vlans_and_routable_is_reported_once():
    data = example()
    worker_a(data)["networks"]["vlans"][140] = {"address": "192.0.2.22/24"}
    worker_a(data)["networks"]["routable"] = {"vlan": 140, "address": "192.0.2.21/24", "gateway": "192.0.2.1"}
    problems = [p for p in problems_of(data) if "is not allowed on bridge" in p.message]
    assert [p.field for p in problems] == ["clusters.prod.workers.wk-a.networks.vlans.140"]


# ---------------------------------------------------------------------------------------------------------- networks
@pytest.mark.parametrize("bad", [0, 4095])
def test_bridge_vlan_id_out_of_range(bad):
    data = example()
    data["hypervisors"]["pve1"]["bridges"]["vmbr1"]["vlans"] = [111, bad]
    problem = only_problem(data)
    assert problem.field == "hypervisors.pve1.bridges.vmbr1.vlans.1"
    assert f"VLAN id {bad} is out of range" in problem.message
    assert "802.1Q VLAN ids are 1-4094" in problem.message


@pytest.mark.parametrize("bad", [0, 4095])
def test_node_vlan_id_out_of_range(bad):
    data = example()
    worker_a(data)["networks"]["vlans"][bad] = {"address": "10.13.0.21/24"}
    problem = only_problem(data)
    assert problem.field == f"clusters.prod.workers.wk-a.networks.vlans.{bad}.[key]"
    assert f"VLAN id {bad} is out of range" in problem.message


def test_management_vlan_out_of_range():
    data = example()
    prod(data)["management_vlan"] = 4095
    problem = only_problem(data)
    assert problem.field == "clusters.prod.management_vlan"
    assert "VLAN id 4095 is out of range" in problem.message


def test_interface_address_without_prefix():
    data = example()
    worker_a(data)["networks"]["vlans"][111]["address"] = "10.11.1.21"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.111.address"
    assert "'10.11.1.21' has no prefix length" in problem.message
    assert "e.g. 10.11.1.21/24" in problem.message


def test_interface_address_garbage():
    data = example()
    worker_a(data)["networks"]["vlans"][111]["address"] = "not-an-ip/24"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.111.address"
    assert "'not-an-ip/24' is not a valid address/prefix (CIDR)" in problem.message
    assert "e.g. 10.0.111.11/24" in problem.message


def test_routable_address_without_prefix():
    data = example()
    worker_a(data)["networks"]["routable"] = {"vlan": 120, "address": "10.12.0.99"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.routable.address"
    assert "'10.12.0.99' has no prefix length" in problem.message


@pytest.mark.parametrize("bad", ["10.0.0.61/24", "10.0.0.300"], ids=["with-prefix", "out-of-range"])
def test_bad_maintenance_ip(bad):
    data = example()
    worker_a(data)["networks"]["maintenance_ip"] = bad
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.maintenance_ip"
    assert f"{bad!r} is not a valid IP address" in problem.message
    assert "no prefix length here" in problem.message


def test_bad_gateway():
    data = example()
    worker_a(data)["networks"]["vlans"][111]["gateway"] = "10.11.1.1/24"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.111.gateway"
    assert "'10.11.1.1/24' is not a valid IP address" in problem.message


def test_bad_endpoint_vip():
    data = example()
    prod(data)["endpoint_vip"] = "10.11.1.10/24"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.endpoint_vip"
    assert "'10.11.1.10/24' is not a valid IP address" in problem.message


# ---------------------------------------------------------------------------------------------------------- cilium
def test_cilium_pool_with_host_bits_set():
    data = example()
    prod(data)["cilium"]["pools"]["services"] = ["10.12.0.193/27"]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.services.0"
    assert "'10.12.0.193/27' is not a valid CIDR network" in problem.message
    assert "host bits set" in problem.message
    assert "write the network address" in problem.message


def test_cilium_pool_garbage():
    data = example()
    prod(data)["cilium"]["pools"]["services"] = ["10.12.0.192/27", "ten-twelve"]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.services.1"
    assert "'ten-twelve' is not a valid CIDR network" in problem.message


def test_cilium_pool_name_not_dns_safe():
    data = example()
    prod(data)["cilium"]["pools"]["Services"] = prod(data)["cilium"]["pools"].pop("services")
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.Services.[key]"
    assert "'Services' is not a DNS-safe name" in problem.message


def test_cilium_pool_containing_a_node_address():
    data = example()
    prod(data)["cilium"]["pools"]["services"] = ["10.12.0.16/28"]  # 10.12.0.16-31: holds wk-a (.21) and wk-b (.22)
    problems = problems_of(data)
    assert [p.field for p in problems] == ["clusters.prod.cilium.pools.services"] * 2
    assert (
        "LoadBalancer pool 10.12.0.16/28 contains 10.12.0.21, used by clusters.prod.workers.wk-a" in problems[0].message
    )
    assert "10.12.0.22, used by clusters.prod.workers.wk-b" in problems[1].message
    assert "shrink the pool or move the address" in problems[0].message


def test_cilium_pool_containing_the_endpoint_vip():
    data = example()
    prod(data)["cilium"]["pools"]["services"] = ["10.11.1.8/30"]  # 10.11.1.8-11: the VIP (.10) and cp-a (.11)
    problems = problems_of(data)
    messages = "\n".join(p.message for p in problems)
    assert "LoadBalancer pool 10.11.1.8/30 contains 10.11.1.10, used by clusters.prod.endpoint_vip" in messages
    assert "contains 10.11.1.11, used by clusters.prod.control_planes.cp-a" in messages
    assert len(problems) == 2


def test_overlapping_cilium_pools():
    data = example()
    prod(data)["cilium"]["pools"]["extra"] = ["10.12.0.208/28"]  # inside services 10.12.0.192/27
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.services"
    assert "pool services (10.12.0.192/27) overlaps pool extra (10.12.0.208/28)" in problem.message
    assert "give each pool its own range" in problem.message


def test_overlapping_ranges_within_one_pool():
    data = example()
    prod(data)["cilium"]["pools"]["services"] = ["10.12.0.192/27", "10.12.0.224/27", "10.12.0.224/28"]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.services"
    assert "overlaps pool services (10.12.0.224/28)" in problem.message


# ---------------------------------------------------------------------------------------------------------- versions
@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("talos_version", "1.11"),
        ("talos_version", "v1.11.x"),
        ("kubernetes_version", "latest"),
        ("kubernetes_version", "vv1.34.2"),
    ],
)
def test_malformed_version(field, bad):
    data = example()
    prod(data)[field] = bad
    problem = only_problem(data)
    assert problem.field == f"clusters.prod.{field}"
    assert f"{bad!r} is not a version like v1.11.5 or 1.34.2" in problem.message
    assert "write MAJOR.MINOR.PATCH" in problem.message


def test_malformed_chart_version():
    data = example()
    prod(data)["cilium"]["chart_version"] = "1.18"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.chart_version"
    assert "'1.18' is not a version" in problem.message


def test_versions_without_v_are_normalized():
    data = example()
    prod(data)["talos_version"] = "1.11.6"
    prod(data)["kubernetes_version"] = "1.34.2"
    prod(data)["cilium"]["chart_version"] = "1.18.4"
    cluster = parse_site(data, "site.yaml").clusters["prod"]
    assert cluster.talos_version == "v1.11.6"
    assert cluster.kubernetes_version == "v1.34.2"
    assert cluster.cilium.chart_version == "v1.18.4"


def test_versions_with_v_and_prerelease_are_kept():
    data = example()
    prod(data)["talos_version"] = "v1.11.6-beta.1"
    assert parse_site(data, "site.yaml").clusters["prod"].talos_version == "v1.11.6-beta.1"


@pytest.mark.parametrize("version", ["v1.14.0", "v1.14.0-rc.1", "v2.0.0"])
def test_talos_newer_than_supported(version):
    data = example()
    prod(data)["talos_version"] = version
    problem = only_problem(data)
    assert problem.field == "clusters.prod.talos_version"
    assert problem.message == (
        f"Talos {version!r} is newer than terravixens supports (up to v1.13.x): its configuration documents and "
        f"Kubernetes range are not checked yet; stay on v1.13.x"
    )


def test_talos_older_than_supported():
    data = example()
    prod(data)["talos_version"] = "v1.10.7"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.talos_version"
    assert problem.message == (
        "Talos 'v1.10.7' is older than terravixens supports (v1.11.x to v1.13.x): upgrade "
        "the cluster to v1.11.x with talosctl first"
    )


# Talos' compatibility table (pkg/machinery/compatibility/talos11x): each minor's oldest and newest Kubernetes.
KUBERNETES_EDGES = {
    "v1.11.6": ("v1.29.0", "v1.34.9", "1.29.0 to v1.34.x"),
    "v1.12.7": ("v1.30.0", "v1.35.4", "1.30.0 to v1.35.x"),
    "v1.13.0": ("v1.31.0", "v1.36.0", "1.31.0 to v1.36.x"),
}


@pytest.mark.parametrize("talos", sorted(KUBERNETES_EDGES))
def test_kubernetes_at_the_edges_of_what_talos_runs(talos):
    oldest, newest, _ = KUBERNETES_EDGES[talos]
    for kubernetes in (oldest, newest):
        data = example()
        prod(data).update(talos_version=talos, kubernetes_version=kubernetes)
        assert parse_site(data, "site.yaml").clusters["prod"].kubernetes_version == kubernetes


@pytest.mark.parametrize("talos", sorted(KUBERNETES_EDGES))
@pytest.mark.parametrize("side", ["older", "newer"])
def test_kubernetes_outside_what_talos_runs(talos, side):
    oldest, newest, allowed = KUBERNETES_EDGES[talos]
    major, minor = (int(part) for part in (oldest if side == "older" else newest)[1:].split(".")[:2])
    kubernetes = f"v{major}.{minor - 1}.9" if side == "older" else f"v{major}.{minor + 1}.0"
    data = example()
    prod(data).update(talos_version=talos, kubernetes_version=kubernetes)
    problem = only_problem(data)
    assert problem.field == "clusters.prod.kubernetes_version"
    assert problem.message == (
        f"Kubernetes {kubernetes!r} does not run on Talos {talos}: Talos {talos[:5]} runs Kubernetes v{allowed} "
        f"(Talos' compatibility table); pick a version in that range"
    )


def test_kubernetes_is_not_judged_against_a_refused_talos():
    data = example()
    prod(data).update(talos_version="v1.14.0", kubernetes_version="v1.37.0")
    assert only_problem(data).field == "clusters.prod.talos_version"


@pytest.mark.parametrize(("written", "kept"), [("v1.11", "v1.11"), ("1.12", "v1.12"), ("v1.11.5", "v1.11")])
def test_config_contract_is_a_minor(written, kept):
    data = example()
    prod(data).update(talos_version="v1.13.0", config_contract=written)
    cluster = parse_site(data, "site.yaml").clusters["prod"]
    assert (cluster.config_contract, cluster.contract) == (kept, kept)


def test_config_contract_defaults_to_the_talos_minor():
    data = example()
    prod(data).update(talos_version="v1.12.7", kubernetes_version="v1.35.4")
    cluster = parse_site(data, "site.yaml").clusters["prod"]
    assert (cluster.config_contract, cluster.contract) == (None, "v1.12")


@pytest.mark.parametrize(
    ("contract", "message"),
    [
        (
            "latest",
            (
                "'latest' is not a configuration contract like v1.11: write the Talos minor the machine "
                "configurations are generated for"
            ),
        ),
        (
            "v1.10",
            "contract 'v1.10' is not one terravixens writes (v1.11.x to v1.13.x): use one of v1.11, v1.12, v1.13",
        ),
        (
            "v1.14",
            "contract 'v1.14' is not one terravixens writes (v1.11.x to v1.13.x): use one of v1.11, v1.12, v1.13",
        ),
    ],
)
def test_config_contract_refused(contract, message):
    data = example()
    prod(data)["config_contract"] = contract
    problem = only_problem(data)
    assert (problem.field, problem.message) == ("clusters.prod.config_contract", message)


def test_config_contract_ahead_of_the_nodes():
    data = example()
    prod(data).update(talos_version="v1.11.6", config_contract="v1.12")
    problem = only_problem(data)
    assert problem.field == "clusters.prod.config_contract"
    assert problem.message == (
        "contract v1.12 is ahead of talos_version v1.11.6: nodes cannot read configuration documents of a newer "
        "Talos (1.11 does not know HostnameConfig); bump talos_version to v1.12.x and run `terravixens upgrade` "
        "first, or keep the contract at v1.11 or below"
    )


def test_ssh_flux_url_needs_credentials():
    data = example()
    del prod(data)["flux"]["git_secret"]
    prod(data)["flux"]["git_auth"] = "none"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.flux"
    assert problem.message.startswith(
        "url 'ssh://git@git.lab.internal/platform/fleet.git' is ssh but git_auth is "
        "none: Flux needs a deploy key for ssh"
    )


# ---------------------------------------------------------------------------------------------------------- keys
@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda d: d, ""),
        (lambda d: d["proxmox"], "proxmox."),
        (lambda d: d["hypervisors"]["pve1"]["bridges"]["vmbr1"], "hypervisors.pve1.bridges.vmbr1."),
        (lambda d: prod(d), "clusters.prod."),
        (lambda d: worker_a(d), "clusters.prod.workers.wk-a."),
        (lambda d: worker_a(d)["networks"]["vlans"][111], "clusters.prod.workers.wk-a.networks.vlans.111."),
        (lambda d: prod(d)["flux"], "clusters.prod.flux."),
    ],
    ids=["top", "proxmox", "bridge", "cluster", "node", "vlan-interface", "flux"],
)
def test_unknown_key_anywhere(where, path):
    data = example()
    where(data)["cpus"] = 3
    problem = only_problem(data)
    assert problem.field == f"{path}cpus"
    assert "unknown key (value 3)" in problem.message
    assert "remove it or check its spelling" in problem.message


@pytest.mark.parametrize(
    ("where", "key", "path"),
    [
        (lambda d: d, "proxmox", "proxmox"),
        (lambda d: d, "site", "site"),
        (lambda d: worker_a(d), "vm_id", "clusters.prod.workers.wk-a.vm_id"),
        (lambda d: worker_a(d), "hypervisor", "clusters.prod.workers.wk-a.hypervisor"),
        (lambda d: prod(d), "endpoint_vip", "clusters.prod.endpoint_vip"),
        (lambda d: prod(d), "talos_version", "clusters.prod.talos_version"),
        (lambda d: prod(d), "control_planes", "clusters.prod.control_planes"),
        (lambda d: prod(d)["flux"], "url", "clusters.prod.flux.url"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_missing_required_field(where, key, path):
    data = example()
    del where(data)[key]
    problem = only_problem(data)
    assert problem.field == path
    assert problem.message == "is required: add it"


def test_wrong_type_names_the_bad_value():
    data = example()
    worker_a(data)["cpu"] = "eight"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.cpu"
    assert "(got 'eight')" in problem.message


def test_value_below_minimum_names_the_bad_value():
    data = example()
    worker_a(data)["vm_id"] = 99
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.vm_id"
    assert "greater than or equal to 100" in problem.message
    assert "(got 99)" in problem.message


def test_top_level_not_a_mapping():
    with pytest.raises(SiteError) as caught:
        parse_site(["site", "homelab"], "site.yaml")
    [problem] = caught.value.problems
    assert problem.field == "(top level)"
    assert "must be a YAML mapping" in problem.message


# ---------------------------------------------------------------------------------------------------------- settings
def test_s3_backend_without_s3_settings():
    data = example()
    data["state"]["backend"] = "s3"
    problem = only_problem(data)
    assert problem.field == "state"
    assert "backend is 's3' but no 's3' settings are given" in problem.message
    assert "add state.s3.endpoint and state.s3.bucket" in problem.message


def test_s3_backend_with_s3_settings_is_accepted():
    data = example()
    data["state"] = {"backend": "s3", "s3": {"endpoint": "https://minio.lab.internal:9000", "bucket": "tf"}}
    assert parse_site(data, "site.yaml").state.s3.bucket == "tf"


def test_s3_kms_key_needs_encryption():
    data = example()
    data["state"] = {
        "backend": "s3",
        "s3": {
            "endpoint": "https://minio.lab.internal:9000",
            "bucket": "tf",
            "encrypt": False,
            "kms_key_id": "alias/state",
        },
    }
    problem = only_problem(data)
    assert problem.message == "kms_key_id is set but encrypt is false: set encrypt: true to use the KMS key"


def test_sops_age_key_revision_is_positive():
    data = example()
    data["clusters"]["prod"]["flux"]["sops_age_key_revision"] = 0
    problem = only_problem(data)
    assert problem.field == "clusters.prod.flux.sops_age_key_revision"
    assert "greater than or equal to 1" in problem.message


def test_unknown_state_backend():
    data = example()
    data["state"]["backend"] = "consul"
    problem = only_problem(data)
    assert problem.field == "state.backend"
    assert "'local' or 's3'" in problem.message
    assert "(got 'consul')" in problem.message


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("/var/lib/terravixens", "is absolute"),
        ("C:\\state", "is absolute"),
        ("~/state", "starts with '~' (a home folder)"),
        ("~", "starts with '~'"),
        ("../state", "climbs out of the project root with '..'"),
        ("state/../../etc", "climbs out of the project root"),
        ("./", "names no folder"),
        ("", "names no folder"),
    ],
)
def test_local_dir_must_be_a_folder_inside_the_project(bad, why):
    data = example()
    data["state"]["local_dir"] = bad
    problem = only_problem(data)
    assert problem.field == "state.local_dir"
    assert problem.message.startswith(f"{bad!r} {why}")
    assert "e.g. 'state'" in problem.message


def test_proxmox_endpoint_not_https():
    data = example()
    data["proxmox"]["endpoint"] = "http://pve1.lab.internal:8006/"
    problem = only_problem(data)
    assert problem.field == "proxmox.endpoint"
    assert problem.message.startswith(
        "'http://pve1.lab.internal:8006/' is plain http: credentials and content would cross the network unencrypted"
    )
    assert (
        "use https (https://HOST:8006/), or keep http and say why next to it in allow_insecure_http" in problem.message
    )


@pytest.mark.parametrize("bad", ["git@git.lab.internal:platform/fleet.git", "platform/fleet"])
def test_flux_url_not_a_git_url(bad):
    data = example()
    prod(data)["flux"]["url"] = bad
    problem = only_problem(data)
    assert problem.field == "clusters.prod.flux.url"
    assert f"{bad!r} is not a git URL Flux accepts" in problem.message
    assert "ssh://git@host/org/repo.git" in problem.message


def test_api_user_without_realm():
    data = example()
    data["hypervisors"]["pve1"]["api_user"]["user_id"] = "terravixens"
    problem = only_problem(data)
    assert problem.field == "hypervisors.pve1.api_user.user_id"
    assert "'terravixens' has no realm" in problem.message
    assert "NAME@REALM, e.g. terravixens@pve" in problem.message


def test_unknown_talos_image_platform():
    data = example()
    data["hypervisors"]["pve1"]["talos_image"]["platform"] = "aws"
    problem = only_problem(data)
    assert problem.field == "hypervisors.pve1.talos_image.platform"
    assert "(got 'aws')" in problem.message


# ---------------------------------------------------------------------------------------------------------- reporting
def test_several_field_problems_are_all_reported():
    data = example()
    data["site"] = "Home_Lab"
    data["proxmox"]["endpoint"] = "http://pve1:8006/"
    prod(data)["talos_version"] = "latest"
    worker_a(data)["networks"]["maintenance_ip"] = "nope"
    problems = problems_of(data)
    assert len(problems) == 4
    assert [p.field for p in problems] == [
        "site",
        "proxmox.endpoint",
        "clusters.prod.talos_version",
        "clusters.prod.workers.wk-a.networks.maintenance_ip",
    ]


def test_several_cross_field_problems_are_all_reported():
    data = example()
    worker_a(data)["vm_id"] = 1101
    prod(data)["workers"]["wk-b"]["hypervisor"] = "pve9"
    worker_a(data)["networks"]["vlans"][111]["address"] = "10.11.1.12/24"
    problems = problems_of(data)
    assert len(problems) == 3
    assert {p.field for p in problems} == {
        "clusters.prod.workers.wk-b.hypervisor",
        "clusters.prod.workers.wk-a.vm_id",
        "clusters.prod.workers.wk-a.networks.vlans.111.address",
    }


def test_str_of_site_error_starts_with_the_file_and_lists_every_problem():
    data = example()
    data["site"] = "Home_Lab"
    data["state"]["local_dir"] = "/abs"
    with pytest.raises(SiteError) as caught:
        parse_site(data, "sites/broken.yaml")
    report = str(caught.value)
    lines = report.splitlines()
    assert lines[0] == "sites/broken.yaml: 2 problems in the site file"
    assert len(lines) == 3
    assert lines[1] == f"  - site: {caught.value.problems[0].message}"
    assert lines[2] == f"  - state.local_dir: {caught.value.problems[1].message}"
    assert "'Home_Lab'" in lines[1] and "'/abs' is absolute" in lines[2]


def test_str_of_site_error_with_one_problem_is_singular():
    data = example()
    data["site"] = "Home_Lab"
    with pytest.raises(SiteError) as caught:
        parse_site(data, "site.yaml")
    assert str(caught.value).splitlines()[0] == "site.yaml: 1 problem in the site file"


def test_load_site_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SiteError) as caught:
        load_site(missing)
    assert caught.value.path == str(missing)
    [problem] = caught.value.problems
    assert problem.field == "(file)"
    assert "cannot be read (No such file or directory)" in problem.message
    assert "TERRAVIXENS_SITE" in problem.message
    assert str(caught.value).startswith(f"{missing}: 1 problem")


def test_load_site_invalid_yaml_names_file_and_line(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("site: homelab\nproxmox:\n  endpoint: https://pve1:8006/\n\tinsecure: false\n")
    with pytest.raises(SiteError) as caught:
        load_site(broken)
    assert caught.value.path == str(broken)
    [problem] = caught.value.problems
    assert problem.field == "line 4, column 1"
    assert problem.message.startswith("is not valid YAML: ")
    assert "tab" in problem.message
    assert str(caught.value).startswith(f"{broken}: 1 problem")


def test_load_site_unclosed_flow_sequence(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("site: homelab\nhypervisors:\n  pve1:\n    bridges: {vmbr1: {vlans: [111, 120}}\n")
    with pytest.raises(SiteError) as caught:
        load_site(broken)
    [problem] = caught.value.problems
    assert problem.field == "line 4, column 39"  # the stray "}" (1-based)
    assert "is not valid YAML" in problem.message


def test_load_site_empty_file(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(SiteError) as caught:
        load_site(empty)
    [problem] = caught.value.problems
    assert problem.field == "(top level)"


def test_load_site_reports_model_problems_with_the_file_name(tmp_path):
    import yaml

    data = example()
    worker_a(data)["vm_id"] = 1101
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SiteError) as caught:
        load_site(path)
    assert str(caught.value).startswith(f"{path}: 1 problem in the site file")
    assert caught.value.problems[0].field == "clusters.prod.workers.wk-a.vm_id"


# ------------------------------------------------------------------------------------- fixed after review (helper-2)
def _second_cluster(data: dict, vip: str, vlan: int = 111, address: str = "10.11.1.101/24") -> dict:
    staging = copy.deepcopy(prod(data))
    staging["endpoint_vip"] = vip
    staging["management_vlan"] = vlan
    staging["cilium"]["pools"] = {}
    staging["flux"] = None
    staging["control_planes"] = {
        "st-a": {"hypervisor": "pve1", "vm_id": 2101, "networks": {"vlans": {vlan: {"address": address}}}}
    }
    staging["workers"] = {}
    data["clusters"]["staging"] = staging
    return staging


def test_two_clusters_cannot_share_an_endpoint_vip():
    data = example()
    _second_cluster(data, "10.11.1.10")
    problem = only_problem(data)
    assert problem.field == "clusters.staging.endpoint_vip"
    assert problem.message.startswith("address 10.11.1.10 is already used by clusters.prod.endpoint_vip")


def test_pool_may_not_contain_another_clusters_vip():
    data = example()
    _second_cluster(data, "10.12.0.200", vlan=120, address="10.12.0.101/24")
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.services"
    assert (
        "LoadBalancer pool 10.12.0.192/27 contains 10.12.0.200, used by clusters.staging.endpoint_vip"
        in problem.message
    )


def test_vip_compared_as_an_address_not_as_text():
    data = example()
    # An IPv6 management VLAN (130) on every control plane, so that the VIP itself is in place.
    for hypervisor in data["hypervisors"].values():
        hypervisor["bridges"]["vmbr1"]["vlans"].append(130)
    prod(data)["management_vlan"] = 130
    for octet, name in enumerate(("cp-a", "cp-b", "cp-c"), 11):
        prod(data)["control_planes"][name]["networks"]["vlans"][130] = {"address": f"fd00::{octet}/64"}
    prod(data)["endpoint_vip"] = "FD00::10"
    prod(data)["workers"]["wk-a"]["networks"]["vlans"][120] = {"address": "fd00::10/64"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.120.address"
    assert "address fd00::10 is already used by clusters.prod.endpoint_vip" in problem.message


def test_node_without_any_address():
    data = example()
    prod(data)["workers"]["wk-b"]["networks"] = {}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-b.networks"
    assert problem.message.startswith("the node has no address: give it networks.maintenance_ip")


def test_non_utf8_site_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"site: \xff\xfe\n")
    with pytest.raises(SiteError) as raised:
        load_site(path)
    assert raised.value.problems == [
        SiteProblem("line 1, column 7", "is not UTF-8 text (byte 0xff): save the file as UTF-8")
    ]


def test_garbage_interface_address_is_not_offered_a_prefix():
    data = example()
    prod(data)["workers"]["wk-a"]["networks"]["vlans"][111]["address"] = "garbage"
    problem = only_problem(data)
    assert problem.message == "'garbage' is not a valid address/prefix (CIDR), e.g. 10.0.111.11/24"


@pytest.mark.parametrize("bad, suggestion", [("1node", "node"), ("x" * 70, "x" * 63), ("__", "node-a")])
def test_dns_name_suggestion_is_itself_valid(bad, suggestion):
    data = example()
    prod(data)["workers"][bad] = prod(data)["workers"].pop("wk-b")
    problem = problems_of(data)[0]
    assert f"(e.g. {suggestion!r})" in problem.message


def test_duplicate_taint_key():
    data = example()
    prod(data)["workers"]["wk-a"]["taints"] = [
        {"key": "dedicated", "effect": "NoSchedule"},
        {"key": "dedicated", "effect": "NoExecute"},
    ]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.taints"
    assert problem.message == "taint key 'dedicated' appears twice: Talos nodeTaints is a map, one taint per key"


# ------------------------------------------------------------------------------------- issue 7: accepted though wrong
def test_endpoint_vip_outside_the_management_subnet():
    data = example()
    prod(data)["endpoint_vip"] = "10.99.0.10"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.endpoint_vip"
    assert problem.message == (
        "endpoint VIP 10.99.0.10 is outside the control planes' subnet on the management VLAN 111 (10.11.1.0/24): "
        "Talos puts the VIP on that interface, where clients outside the subnet cannot reach it; pick a free address "
        "in 10.11.1.0/24"
    )


@pytest.mark.parametrize("vip", ["10.11.1.0", "10.11.1.255"])
def test_endpoint_vip_on_the_network_or_broadcast_address(vip):
    data = example()
    prod(data)["endpoint_vip"] = vip
    problem = only_problem(data)
    assert problem.field == "clusters.prod.endpoint_vip"
    assert problem.message == (
        f"endpoint VIP {vip} is the network or broadcast address of 10.11.1.0/24: pick a free host address in it"
    )


def test_node_address_outside_its_vlans_subnet():
    data = example()
    worker_a(data)["networks"]["vlans"][111] = {"address": "10.11.2.21/24"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.111.address"
    assert problem.message == (
        "address 10.11.2.21/24 is outside VLAN 111's subnet 10.11.1.0/24 (that of cp-a, cp-b, cp-c and 1 more): "
        "nodes on one VLAN share its subnet; use an address in 10.11.1.0/24 with the same prefix length, or another "
        "VLAN"
    )


def test_node_address_with_another_prefix_length_on_the_vlan():
    # Two nodes on VLAN 120, one subnet each: a tie goes to the first node by name (wk-a).
    data = example()
    prod(data)["workers"]["wk-b"]["networks"]["vlans"][120]["address"] = "10.12.0.22/16"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-b.networks.vlans.120.address"
    assert "address 10.12.0.22/16 is outside VLAN 120's subnet 10.12.0.0/24 (that of wk-a)" in problem.message


def test_routable_address_is_checked_against_its_vlan_too():
    data = example()
    prod(data)["control_planes"]["cp-b"]["networks"]["routable"] = {"vlan": 120, "address": "10.13.0.40/24"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.control_planes.cp-b.networks.routable.address"
    assert "address 10.13.0.40/24 is outside VLAN 120's subnet 10.12.0.0/24 (that of wk-a, wk-b)" in problem.message


def test_one_vlan_may_carry_ipv4_and_ipv6_subnets():
    data = example()
    worker_a(data)["networks"]["vlans"][120] = {"address": "2001:db8:120::21/64", "gateway": "2001:db8:120::1"}
    vlans = parse_site(data, "site.yaml").clusters["prod"].workers["wk-a"].networks.vlans
    assert vlans[120].gateway == "2001:db8:120::1"


@pytest.mark.parametrize(
    ("networks", "field", "message"),
    [
        (
            {"vlans": {111: {"address": "10.11.1.21/24", "gateway": "10.11.2.1"}}},
            "vlans.111.gateway",
            (
                "gateway 10.11.2.1 is outside the interface's subnet 10.11.1.0/24 (address 10.11.1.21/24): the node "
                "could not reach it; use a gateway inside 10.11.1.0/24, or correct the address' prefix length"
            ),
        ),
        (
            {"vlans": {111: {"address": "10.11.1.21/24", "gateway": "10.11.1.21"}}},
            "vlans.111.gateway",
            "gateway 10.11.1.21 is the node's own address: use the router's address in 10.11.1.0/24",
        ),
        (
            {"vlans": {111: {"address": "10.11.1.21/24", "gateway": "2001:db8::1"}}},
            "vlans.111.gateway",
            "gateway 2001:db8::1 is outside the interface's subnet 10.11.1.0/24",
        ),
        (
            {
                "vlans": {111: {"address": "10.11.1.21/24"}},
                "routable": {"vlan": 120, "address": "10.12.0.21/24", "gateway": "192.0.2.1"},
            },
            "routable.gateway",
            "gateway 192.0.2.1 is outside the interface's subnet 10.12.0.0/24",
        ),
    ],
    ids=["other-subnet", "own-address", "other-family", "routable"],
)
def test_gateway_outside_the_interfaces_subnet(networks, field, message):
    data = example()
    worker_a(data)["networks"] = {"maintenance_ip": "10.0.0.61", **networks}
    problem = only_problem(data)
    assert problem.field == f"clusters.prod.workers.wk-a.networks.{field}"
    assert problem.message.startswith(message)


# ---------------------------------------------------------------------------------------------------------- MACs
@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("bc:24:11:4f:2a:01", "BC:24:11:4F:2A:01"),
        ("02-00-0a-0b-01-0b", "02:00:0A:0B:01:0B"),
        ("02:00:0A:0B:01:0B", "02:00:0A:0B:01:0B"),
    ],
)
def test_mac_address_is_stored_as_proxmox_writes_it(written, stored):
    data = example()
    worker_a(data)["mac_address"] = written
    assert parse_site(data, "site.yaml").clusters["prod"].workers["wk-a"].mac_address == stored


@pytest.mark.parametrize(
    ("mac", "message"),
    [
        (
            "bc:24:11:4f:2a",
            (
                "'bc:24:11:4f:2a' is not a MAC address: write six hexadecimal pairs separated by ':', "
                "e.g. 02:00:0A:0B:01:0B (locally administered) or BC:24:11:4F:2A:01 (Proxmox' own prefix)"
            ),
        ),
        ("bc:24-11:4f:2a:01", "'bc:24-11:4f:2a:01' is not a MAC address: write six hexadecimal pairs separated by ':'"),
        ("bc:24:11:4f:2a:0g", "'bc:24:11:4f:2a:0g' is not a MAC address"),
        (
            "01:00:5e:00:00:fb",
            (
                "'01:00:5e:00:00:fb' is a multicast address (the first byte is odd): a network card needs "
                "a unicast MAC, e.g. 02:00:0A:0B:01:0B"
            ),
        ),
        ("ff:ff:ff:ff:ff:ff", "'ff:ff:ff:ff:ff:ff' is a multicast address"),
        ("00:00:00:00:00:00", "'00:00:00:00:00:00' is the null MAC: give the VM its own, e.g. 02:00:0A:0B:01:0B"),
    ],
)
def test_mac_address_refused(mac, message):
    data = example()
    worker_a(data)["mac_address"] = mac
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.mac_address"
    assert problem.message.startswith(message)


def test_two_nodes_with_one_mac_whatever_its_spelling():
    data = example()
    prod(data)["control_planes"]["cp-b"]["mac_address"] = "02:00:0a:0b:01:0b"
    worker_a(data)["mac_address"] = "02-00-0A-0B-01-0B"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.mac_address"
    assert problem.message == (
        "MAC 02:00:0A:0B:01:0B is already the MAC of clusters.prod.control_planes.cp-b: give "
        "each VM its own (e.g. change the last byte)"
    )


def test_one_mac_in_two_clusters():
    data = example()
    worker_a(data)["mac_address"] = "02:00:0A:0B:01:0B"
    staging = second_cluster(data, endpoint_vip="10.11.1.100", cp_address="10.11.1.101/24")
    staging["control_planes"]["st-cp"]["mac_address"] = "02:00:0A:0B:01:0B"
    problem = only_problem(data)
    assert problem.field == "clusters.staging.control_planes.st-cp.mac_address"
    assert "is already the MAC of clusters.prod.workers.wk-a" in problem.message


def test_two_nodes_with_one_hostname():
    data = example()
    worker_a(data)["hostname"] = "wk-b"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.hostname"
    assert problem.message == (
        "hostname 'wk-b' is also the hostname of clusters.prod.workers.wk-b: two machines with one name become one "
        "Kubernetes Node and clash in Talos; give each node its own hostname"
    )


def test_two_explicit_hostnames_alike():
    data = example()
    prod(data)["control_planes"]["cp-b"]["hostname"] = "node-x"
    worker_a(data)["hostname"] = "node-x"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.hostname"
    assert "hostname 'node-x' is also the hostname of clusters.prod.control_planes.cp-b" in problem.message


def test_the_same_hostname_in_two_clusters_on_two_hypervisors_is_fine():
    data = example()
    second_cluster(data, endpoint_vip="10.11.1.100", cp_address="10.11.1.101/24")
    data["clusters"]["staging"]["control_planes"]["st-cp"].update(hostname="cp-a", hypervisor="pve2")
    assert parse_site(data, "site.yaml").clusters["staging"].control_planes["st-cp"].hostname == "cp-a"


def test_two_vms_with_one_name_on_a_hypervisor():
    data = example()
    second_cluster(data, endpoint_vip="10.11.1.100", cp_address="10.11.1.101/24")
    data["clusters"]["staging"]["control_planes"]["st-cp"]["hostname"] = "cp-a"  # cp-a runs on pve1 too
    problem = only_problem(data)
    assert problem.field == "clusters.staging.control_planes.st-cp.hostname"
    assert problem.message == (
        "VM name 'cp-a' on hypervisor 'pve1' is already used by clusters.prod.control_planes.cp-a: Proxmox would show "
        "two VMs with one name; give one of them another hostname"
    )


def test_a_management_vlan_no_control_plane_has():
    data = example()
    prod(data)["management_vlan"] = 120  # only the workers have VLAN 120
    problem = only_problem(data)
    assert problem.field == "clusters.prod.management_vlan"
    assert problem.message == (
        "no control plane has an address on the management VLAN 120: the endpoint VIP 10.11.1.10 lives on that VLAN, "
        "so no node would ever carry it; give every control plane an address on VLAN 120 (networks.vlans.120), or set "
        "clusters.prod.management_vlan to a VLAN they all have"
    )


def test_a_control_plane_without_the_management_vlan():
    data = example()
    prod(data)["control_planes"]["cp-c"]["networks"]["vlans"] = {120: {"address": "10.12.0.13/24"}}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.control_planes.cp-c.networks"
    assert problem.message.startswith(
        "control plane cp-c has no address on the management VLAN 111: the endpoint VIP 10.11.1.10 moves between the "
        "control planes on that VLAN and could never move to this one; give every control plane an address on VLAN 111"
    )


def test_a_routable_address_on_the_management_vlan_counts():
    data = example()
    cp_c = prod(data)["control_planes"]["cp-c"]["networks"]
    cp_c["vlans"] = {}
    cp_c["routable"] = {"vlan": 111, "address": "10.11.1.13/24", "gateway": "10.11.1.1"}
    assert parse_site(data, "site.yaml").clusters["prod"].control_planes["cp-c"].networks.routable.vlan == 111


@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        (
            "cpu",
            513,
            "513 cores is more than 512 cores: Proxmox starts no VM with more vCPUs than its host has threads",
        ),
        ("memory_mib", 4_194_305, "4194305 MiB is more than 4,194,304 MiB: Proxmox gives a VM at most 4 TiB"),
        ("memory_mib", 2**62, "4611686018427387904 MiB is more than 4,194,304 MiB"),
        ("memory_mib", 1e40, "Unable to parse input string as an integer, exceeded maximum size (got 1e+40)"),
        ("disk_gib", 16_385, "16385 GiB is more than 16,384 GiB: a Talos system disk holds the OS and /var"),
    ],
    ids=["cpu", "memory", "memory-2^62", "memory-1e40", "disk"],
)
def test_vm_sizes_have_upper_bounds(field, bad, message):
    data = example()
    worker_a(data)[field] = bad
    problem = only_problem(data)
    assert problem.field == f"clusters.prod.workers.wk-a.{field}"
    assert problem.message.startswith(message)


@pytest.mark.parametrize(("field", "largest"), [("cpu", 512), ("memory_mib", 4_194_304), ("disk_gib", 16_384)])
def test_the_upper_bounds_themselves_are_accepted(field, largest):
    data = example()
    worker_a(data)[field] = largest
    assert getattr(parse_site(data, "site.yaml").clusters["prod"].workers["wk-a"], field) == largest


# ---------------------------------------------------------------------------------------------- plain http
def _flux_https(data: dict) -> dict:
    flux = prod(data)["flux"]
    flux.update(url="https://git.lab.internal/platform/fleet.git")
    del flux["git_secret"]
    return flux


@pytest.mark.parametrize(
    ("where", "field", "url"),
    [
        (lambda d: d["proxmox"], "proxmox.endpoint", "http://pve1.lab.internal:8006/"),
        (
            lambda d: d["hypervisors"]["pve1"]["talos_image"],
            "hypervisors.pve1.talos_image.factory_url",
            "http://factory.lab.internal",
        ),
        (lambda d: _flux_https(d), "clusters.prod.flux.url", "http://git.lab.internal/platform/fleet.git"),
        (
            lambda d: d["state"].update(backend="s3", s3={"bucket": "tf"}) or d["state"]["s3"],
            "state.s3.endpoint",
            "http://minio.lab.internal:9000",
        ),
    ],
    ids=["proxmox", "factory", "flux", "s3"],
)
def test_plain_http_urls_need_a_reason(where, field, url):
    data = example()
    section = where(data)
    section[field.rsplit(".", 1)[1]] = url
    problem = only_problem(data)
    assert problem.field == field
    assert problem.message.startswith(
        f"{url!r} is plain http: credentials and content would cross the network "
        f"unencrypted and unauthenticated; use https ("
    )
    assert problem.message.endswith("or keep http and say why next to it in allow_insecure_http")
    section["allow_insecure_http"] = "lab network without TLS, isolated VLAN"
    parse_site(data, "site.yaml")  # the explicit reason makes it acceptable


@pytest.mark.parametrize("reason", ["", "   "])
def test_allow_insecure_http_needs_a_reason(reason):
    data = example()
    data["proxmox"].update(endpoint="http://pve1.lab.internal:8006/", allow_insecure_http=reason)
    problems = problems_of(data)
    assert [p.field for p in problems] == ["proxmox.allow_insecure_http", "proxmox.endpoint"]
    assert problems[0].message.startswith("is empty: say why plain http is acceptable here")


def test_allow_insecure_http_next_to_an_https_url_is_stale():
    data = example()
    data["proxmox"]["allow_insecure_http"] = "old lab"
    problem = only_problem(data)
    assert problem.field == "proxmox"
    assert problem.message == (
        "allow_insecure_http is set but endpoint is not an http:// URL: remove "
        "allow_insecure_http (it only permits plain http)"
    )


@pytest.mark.parametrize(
    "bad",
    ["https://factory.talos.dev/", "https://factory.talos.dev/image", "factory.talos.dev", "ftp://factory.talos.dev"],
)
def test_factory_url_is_a_scheme_and_a_host(bad):
    data = example()
    data["hypervisors"]["pve1"]["talos_image"]["factory_url"] = bad
    problem = only_problem(data)
    assert problem.field == "hypervisors.pve1.talos_image.factory_url"
    assert problem.message.startswith(repr(bad))
    assert "https://factory.talos.dev" in problem.message


# ---------------------------------------------------------------------------------------------- site text (ADR 0016)
ENVIRON = '${file("/proc/self/environ")}'
TEMPLATE_FIXES = (
    "so terravixens refuses '${' and '%{' in site text (docs/adr/0016-no-templates-from-site-text.md); remove it"
)

TEXT_FIELDS = {
    "label value": (lambda d, v: worker_a(d)["labels"].update(pool=v), "clusters.prod.workers.wk-a.labels.pool"),
    "label key": (lambda d, v: worker_a(d)["labels"].update({v: "x"}), "clusters.prod.workers.wk-a.labels.<v>"),
    "taint value": (
        lambda d, v: worker_a(d).update(taints=[{"key": "k", "value": v}]),
        "clusters.prod.workers.wk-a.taints.0.value",
    ),
    "tag": (lambda d, v: worker_a(d).update(tags=["ok", v]), "clusters.prod.workers.wk-a.tags.1"),
    "bridge comment": (
        lambda d, v: d["hypervisors"]["pve1"]["bridges"]["vmbr1"].update(comment=v),
        "hypervisors.pve1.bridges.vmbr1.comment",
    ),
    "install disk": (lambda d, v: prod(d).update(install_disk=v), "clusters.prod.install_disk"),
    "proxmox node name": (lambda d, v: d["hypervisors"]["pve1"].update(node_name=v), "hypervisors.pve1.node_name"),
    "flux branch": (lambda d, v: prod(d)["flux"].update(branch=v), "clusters.prod.flux.branch"),
    "flux path": (lambda d, v: prod(d)["flux"].update(path=v), "clusters.prod.flux.path"),
    "flux url": (lambda d, v: prod(d)["flux"].update(url="ssh://git@git.lab.internal/" + v), "clusters.prod.flux.url"),
    "sops age key file": (
        lambda d, v: prod(d)["flux"].update(sops_age_key_file=v),
        "clusters.prod.flux.sops_age_key_file",
    ),
    "factory url": (
        lambda d, v: d["hypervisors"]["pve1"]["talos_image"].update(factory_url="https://" + v),
        "hypervisors.pve1.talos_image.factory_url",
    ),
    "proxmox endpoint": (lambda d, v: d["proxmox"].update(endpoint="https://" + v), "proxmox.endpoint"),
    "kernel argument": (
        lambda d, v: d["hypervisors"]["pve2"].update(talos_image={"extra_kernel_args": [v]}),
        "hypervisors.pve2.talos_image.extra_kernel_args.0",
    ),
    "l2 interface": (lambda d, v: prod(d)["cilium"].update(l2_interfaces=[v]), "clusters.prod.cilium.l2_interfaces.0"),
    "s3 bucket": (
        lambda d, v: d.update(state={"backend": "s3", "s3": {"endpoint": "https://s3.lab.internal", "bucket": v}}),
        "state.s3.bucket",
    ),
    "bridge name": (lambda d, v: d["hypervisors"]["pve1"]["bridges"].update({v: {}}), "hypervisors.pve1.bridges.<v>"),
}


@pytest.mark.parametrize("name", sorted(TEXT_FIELDS))
@pytest.mark.parametrize(
    "sequence", [ENVIRON, "%{ for k in [1] }x%{ endfor }", "$${escaped}"], ids=["interpolation", "directive", "escaped"]
)
def test_terraform_template_sequences_are_refused_in_every_string(name, sequence):
    data = example()
    change, field = TEXT_FIELDS[name]
    change(data, sequence)
    problems = [p for p in problems_of(data) if p.field == field.replace("<v>", sequence)]
    assert len(problems) == 1, problems_of(data)
    assert "holds '${'" in problems[0].message or "holds '%{'" in problems[0].message
    assert problems[0].message.endswith(TEMPLATE_FIXES)


def test_a_template_sequence_names_the_value_and_the_key_it_is_under():
    data = example()
    worker_a(data)["labels"]["pool"] = ENVIRON
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.labels.pool"
    assert problem.message.startswith(
        "'${file(\"/proc/self/environ\")}' holds '${': Terraform would evaluate it as "
        "a template (reading files or the environment at apply time)"
    )


def test_without_the_loader_the_message_says_where_in_the_field():
    from pydantic import ValidationError

    from terravixens.config.model import Node

    with pytest.raises(ValidationError) as caught:
        Node(hypervisor="pve1", vm_id=100, labels={"a": "ok", "pool": ENVIRON})
    [error] = caught.value.errors()
    assert error["loc"] == ("labels",)
    assert error["msg"].startswith("at pool: '${file(")


def test_a_template_sequence_under_a_secret_looking_key_is_not_shown():
    data = example()
    data["hypervisors"]["pve1"]["api_user"]["token_name"] = '${file("/etc/shadow")}'
    problem = only_problem(data)
    assert problem.field == "hypervisors.pve1.api_user.token_name"
    assert "shadow" not in problem.message
    assert problem.message.startswith("(value hidden: the key looks like it holds a secret) holds '${'")


def test_a_template_sequence_under_a_secret_looking_map_key_is_not_shown():
    data = example()
    worker_a(data)["labels"]["api_token"] = '${file("/x")} hunter2'
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.labels.api_token"
    assert "hunter2" not in problem.message and problem.message.startswith("(value hidden")


@pytest.mark.parametrize(
    ("text", "character"), [("a\nb", "\n"), ("tab\there", "\t"), ("nul\x00", "\x00"), ("del\x7f", "\x7f")]
)
def test_control_characters_are_refused_in_site_text(text, character):
    data = example()
    data["hypervisors"]["pve1"]["bridges"]["vmbr1"]["comment"] = text
    problem = only_problem(data)
    assert problem.field == "hypervisors.pve1.bridges.vmbr1.comment"
    assert problem.message == f"{text!r} holds a control character ({character!r}): remove it"


def test_dollar_and_percent_alone_are_fine():
    data = example()
    worker_a(data)["tags"] = ["cost-$5", "100%"]
    data["hypervisors"]["pve1"]["bridges"]["vmbr1"]["comment"] = "50% of $budget {not a template}"
    parse_site(data, "site.yaml")


# ---------------------------------------------------------------------------------------------- bounded messages
def test_a_long_bad_value_is_truncated_in_the_message():
    data = example()
    data["site"] = "Bad_" + "x" * 10_000
    problem = only_problem(data)
    assert problem.field == "site"
    assert len(problem.message) < 400
    assert problem.message.startswith("'Bad_xxx") and "…" in problem.message


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (
            lambda d, v: worker_a(d)["networks"]["vlans"][111].update(address=v),
            "clusters.prod.workers.wk-a.networks.vlans.111.address",
        ),
        (lambda d, v: prod(d).update(kubernetes_version=v), "clusters.prod.kubernetes_version"),
        (lambda d, v: prod(d)["cilium"]["pools"].update(services=[v]), "clusters.prod.cilium.pools.services.0"),
        (lambda d, v: data_api_user(d).update(user_id=v), "hypervisors.pve1.api_user.user_id"),
        (lambda d, v: d["proxmox"].update(endpoint=v), "proxmox.endpoint"),
        (lambda d, v: prod(d)["flux"].update(url=v), "clusters.prod.flux.url"),
        (lambda d, v: worker_a(d).update(hypervisor=v), "clusters.prod.workers.wk-a.hypervisor"),
        (lambda d, v: worker_a(d).update(bridge=v), "clusters.prod.workers.wk-a.bridge"),
    ],
    ids=["address", "version", "pool", "user", "endpoint", "flux", "hypervisor", "bridge"],
)
def test_every_validator_shows_the_value_bounded(where, field):
    data = example()
    where(data, "z" * 5000)
    problem = only_problem(data)
    assert problem.field == field
    assert len(str(problem)) <= 400 and "z" * 100 not in problem.message and "'zzzz" in problem.message


def data_api_user(data: dict) -> dict:
    return data["hypervisors"]["pve1"]["api_user"]


def test_new_checks_are_located_in_the_file(tmp_path):
    import yaml

    data = example()
    worker_a(data)["hostname"] = "wk-b"
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SiteError) as caught:
        load_site(path)
    [problem] = caught.value.problems
    line = path.read_text().splitlines().index("        hostname: wk-b") + 1
    assert str(problem).startswith(f"line {line}, clusters.prod.workers.wk-a.hostname: hostname 'wk-b' is also")


# ---------------------------------------------------------------------------------------------- the seam (ADR 0017)
def test_the_model_alone_does_not_run_whole_site_rules():
    """Site rules run in the loader after the model validated: the model never imports them (no cycle)."""
    from terravixens.config.model import Site

    data = example()
    worker_a(data)["vm_id"] = 1101  # a whole-site rule problem only
    assert Site.model_validate(copy.deepcopy(data)).clusters["prod"].workers["wk-a"].vm_id == 1101
    assert only_problem(data).field == "clusters.prod.workers.wk-a.vm_id"


def test_model_problems_come_first_and_rules_run_only_on_a_valid_model():
    data = example()
    worker_a(data)["vm_id"] = 1101
    data["site"] = "Bad_Name"
    assert [p.field for p in problems_of(data)] == ["site"]


def test_a_new_sections_rules_plug_into_one_place():
    from terravixens.config import site_rules

    def no_cluster_named_legacy(site):
        if "prod" in site.clusters:
            yield ("clusters", "prod"), "a test rule: rename it"

    site = parse_site(example(), "site.yaml")
    assert site_rules.check(site) == []
    assert site_rules.check(site, (*site_rules.RULES, no_cluster_named_legacy)) == [
        (("clusters", "prod"), "a test rule: rename it")
    ]
    assert len(site_rules.RULES) == len(set(site_rules.RULES)) >= 13


# ------------------------------------------------------------------------ what is read is what the file says (ADR 0032)
WK_A_VLAN_120 = "            120: {address: 10.12.0.21/24}\n"


def site_text() -> str:
    from tests.support import EXAMPLE_SITE

    return EXAMPLE_SITE.read_text()


def loaded_problems(tmp_path, text: str) -> list[SiteProblem]:
    path = tmp_path / "site.yaml"
    path.write_text(text)
    with pytest.raises(SiteError) as caught:
        load_site(path)
    return caught.value.problems


def line_of(text: str, fragment: str) -> int:
    return text[: text.index(fragment)].count("\n") + 1


@pytest.mark.parametrize("spelling", ["'0120'", "' 120 '", "'+120'", "'1_20'", "'120.0'"])
def test_vlan_keys_that_become_one_once_read_name_both_lines(tmp_path, spelling):
    text = site_text().replace(WK_A_VLAN_120, WK_A_VLAN_120 + f"            {spelling}: {{address: 10.12.0.23/24}}\n")
    [problem] = loaded_problems(tmp_path, text)
    first = line_of(text, WK_A_VLAN_120)
    assert problem.line == first + 1
    assert problem.field == f"clusters.prod.workers.wk-a.networks.vlans.{spelling.strip(chr(39))}"
    assert problem.message == (
        f"{spelling} and 120 (line {first}) are both VLAN 120 once read: the site would keep "
        f"only one of them, silently; remove one, and write VLAN ids as plain numbers"
    )


def test_vlan_keys_that_become_one_without_a_file():
    data = example()
    worker_a(data)["networks"]["vlans"]["0120"] = {"address": "10.12.0.23/24"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.0120" and problem.line is None
    assert problem.message.startswith("'0120' and 120 are both VLAN 120 once read: the site would keep only one")


def test_a_float_vlan_key_alone_is_refused():
    data = example()
    worker_a(data)["networks"]["vlans"][130.0] = {"address": "10.13.0.21/24"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.vlans.130.0"
    assert problem.message == (
        "VLAN id 130.0 is written as a decimal number, which would silently become 130: a VLAN "
        "id is a whole number (an 802.1Q tag, 1-4094); write 130"
    )


@pytest.mark.parametrize("spelling", ["true", "yes", "on"])
def test_a_boolean_vlan_key_is_refused(tmp_path, spelling):
    text = site_text().replace(WK_A_VLAN_120, WK_A_VLAN_120 + f"            {spelling}: {{address: 10.1.0.21/24}}\n")
    [problem] = loaded_problems(tmp_path, text)
    assert problem.line == line_of(text, WK_A_VLAN_120) + 1
    assert problem.message == (
        f"VLAN id {spelling} is a YAML boolean (true/yes/on), which would be read as VLAN 1: "
        f"write the VLAN id as a number, e.g. 111"
    )


def test_a_vlan_id_given_as_text_is_refused():
    data = example()
    prod(data)["management_vlan"] = "0111"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.management_vlan"
    assert problem.message == (
        "VLAN id '0111' is text that would be read as VLAN 111: write it as a plain number, 111 "
        "(unquoted, 0111 would be octal in YAML 1.1: 73)"
    )


def test_a_vlan_id_in_digits_quoted_is_accepted():
    data = example()
    prod(data)["management_vlan"] = "111"
    worker_a(data)["networks"]["vlans"]["120"] = worker_a(data)["networks"]["vlans"].pop(120)
    assert parse_site(data, "site.yaml").clusters["prod"].workers["wk-a"].networks.vlans[120].address == "10.12.0.21/24"


def test_an_octal_vlan_id_is_refused_with_what_it_reads_as(tmp_path):
    text = site_text().replace("    management_vlan: 111\n", "    management_vlan: 0157\n")
    [problem] = loaded_problems(tmp_path, text)
    assert problem.line == line_of(text, "    management_vlan: 0157")
    assert problem.field == "clusters.prod.management_vlan"
    assert problem.message == (
        "VLAN id written 0157 is read as 111 (YAML 1.1 reads a leading 0 as octal): write 111 "
        "if you meant VLAN 111, or write 157 without the leading zero"
    )


@pytest.mark.parametrize(("spelling", "why"), [("0x6f", " (hexadecimal)"), ("1_11", ""), ("+111", "")])
def test_a_vlan_id_written_otherwise_than_in_digits_is_refused(tmp_path, spelling, why):
    text = site_text().replace("    management_vlan: 111\n", f"    management_vlan: {spelling}\n")
    [problem] = loaded_problems(tmp_path, text)
    assert problem.message == f"VLAN id written {spelling} is read as 111{why}: write VLAN ids as plain numbers, 111"


def test_a_float_routable_vlan_is_refused():
    data = example()
    worker_a(data)["networks"]["routable"] = {"vlan": 120.0, "address": "10.12.0.21/24"}
    del worker_a(data)["networks"]["vlans"][120]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.routable.vlan"
    assert problem.message.startswith("VLAN id 120.0 is written as a decimal number, which would silently become 120")


def test_a_vlan_listed_twice_on_a_bridge(tmp_path):
    text = site_text().replace("        vlans: [111, 120]\n", "        vlans: [111, 120, '120']\n", 1)
    [problem] = loaded_problems(tmp_path, text)
    assert problem.field == "hypervisors.pve1.bridges.vmbr1.vlans.2"
    line = line_of(text, "vlans: [111, 120, '120']")
    assert problem.line == line
    assert problem.message == (
        f"VLAN 120 is listed twice (items 1 and 2, line {line}): a bridge lets a VLAN through once; remove one"
    )


def test_an_octal_integer_anywhere_is_refused(tmp_path):
    text = site_text().replace("        vm_id: 1201\n", "        vm_id: 01201\n")
    [problem] = loaded_problems(tmp_path, text)
    assert problem.field == "clusters.prod.workers.wk-a.vm_id" and problem.line == line_of(text, "vm_id: 01201")
    assert problem.message == (
        "written 01201, which is read as 641 (YAML 1.1 reads a leading 0 as octal): write 1201 "
        "without the leading zero, or 641 if you meant that"
    )


def test_a_base_60_integer_is_refused(tmp_path):
    text = site_text().replace("        cpu: 8\n", "        cpu: 1:00\n", 1)
    [problem] = loaded_problems(tmp_path, text)
    assert problem.field == "clusters.prod.workers.wk-a.cpu"
    assert problem.message == (
        "written 1:00, which is read as 60 (YAML 1.1 reads numbers with ':' in base 60): write "
        "the number without ':', or 60 if you meant that"
    )


def test_numbers_written_plainly_or_with_separators_are_fine(tmp_path):
    text = site_text().replace("        memory_mib: 16384\n", "        memory_mib: 16_384\n", 1)
    path = tmp_path / "site.yaml"
    path.write_text(text)
    assert load_site(path).clusters["prod"].workers["wk-a"].memory_mib == 16384


def test_coercion_problems_come_with_the_models(tmp_path):
    data = example()
    worker_a(data)["networks"]["vlans"]["0120"] = {"address": "10.12.0.23/24"}
    worker_a(data)["cpu"] = 0
    assert [p.field for p in problems_of(data)] == [
        "clusters.prod.workers.wk-a.networks.vlans.0120",
        "clusters.prod.workers.wk-a.cpu",
    ]


def test_a_map_keyed_by_integers_other_than_vlan_ids_gets_the_same_check():
    # None in the model today (the test below lists the maps): the walk judges any int-keyed map the same way.
    from terravixens.config import coercion
    from terravixens.inputs import Lines

    check = coercion._Check(Lines())
    check.keys(int, {7: "a", " 7": "b", 8.0: "c"}, ("ids",))
    assert [(p.field, p.message) for p in check.problems] == [
        (
            "ids. 7",
            ("' 7' and 7 are both the key 7 once read: the site would keep only one of them, silently; remove one"),
        )
    ]


def test_every_map_of_the_model_keyed_by_other_than_text_is_checked():
    """The maps whose keys pydantic coerces, found from the model's annotations: a new one gets the check for free,
    and shows up here to be given a test."""
    from terravixens.config import coercion

    assert sorted(coercion.coerced_key_maps()) == [
        "clusters.<name>.control_planes.<name>.networks.vlans",
        "clusters.<name>.workers.<name>.networks.vlans",
        "standalone.nodes.<name>.networks.vlans",
    ]


# ---------------------------------------------------------------------------------------------- labels and taints
KEY_FIX = (
    "write NAME or PREFIX/NAME (NAME: 1-63 letters, digits, '-', '_' or '.', a letter or digit at both ends; "
    "PREFIX: a lowercase DNS subdomain), e.g. example.com/pool"
)
VALUE_FIX = "use up to 63 letters, digits, '-', '_' or '.', a letter or digit at both ends, or an empty value"


def control_plane_a(data: dict) -> dict:
    return prod(data)["control_planes"]["cp-a"]


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("team/a/b", "has more than one '/'"),
        ("/pool", "has an empty prefix before '/'"),
        (
            "Example.com/pool",
            ("has a prefix, 'Example.com', that is not a DNS subdomain (lowercase letters, digits, '-' and '.')"),
        ),
        ("a" * 254 + "/pool", "has a prefix of 254 characters (at most 253)"),
        ("example.com/", "has no name after '/'"),
        ("p" * 64, "has a name of 64 characters (at most 63)"),
        ("disk type", "holds ' ' in its name (only letters, digits, '-', '_' and '.')"),
        ("gpu-", "has a name that does not start and end with a letter or digit"),
        ("", "is empty"),
    ],
    ids=[
        "slashes",
        "empty-prefix",
        "prefix-case",
        "prefix-length",
        "no-name",
        "name-length",
        "character",
        "ends",
        "empty",
    ],
)
def test_a_label_key_kubernetes_refuses(key, why):
    data = example()
    worker_a(data)["labels"][key] = "x"
    problem = only_problem(data)
    assert problem.field == f"clusters.prod.workers.wk-a.labels.{key}"
    assert problem.message == f"label key {shown(key)} is not a Kubernetes qualified name: it {why}; {KEY_FIX}"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("v" * 64, "is 64 characters long (at most 63)"),
        ("a100 80gb", "holds ' ' (only letters, digits, '-', '_' and '.')"),
        ("nvidia/a100", "holds '/' (only letters, digits, '-', '_' and '.')"),
        ("_a100", "does not start and end with a letter or digit"),
    ],
    ids=["length", "space", "slash", "ends"],
)
def test_a_label_value_kubernetes_refuses(value, why):
    data = example()
    worker_a(data)["labels"]["example.com/gpu"] = value
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.labels.example.com/gpu"
    assert problem.message.endswith(f"is not a Kubernetes label value: it {why}; {VALUE_FIX}")
    assert problem.message.startswith("label value '")


@pytest.mark.parametrize("value", ["", "gpu", "a100.80gb_v-2", "v" * 63])
def test_label_values_kubernetes_takes(value):
    data = example()
    worker_a(data)["labels"]["example.com/gpu"] = value
    assert parse_site(data, "site.yaml").clusters["prod"].workers["wk-a"].labels["example.com/gpu"] == value


def test_a_bad_label_value_under_a_secret_looking_key_is_not_shown():
    data = example()
    worker_a(data)["labels"]["api_token"] = "hunter2 hunter2"
    problem = only_problem(data)
    assert "hunter2" not in problem.message
    assert problem.message.startswith(
        "label value (value hidden: the key looks like it holds a secret) is not a Kubernetes label value: it holds ' '"
    )


def test_a_bad_label_is_located_in_the_file(tmp_path):
    text = site_text().replace(
        "        labels: {node.kubernetes.io/pool: general}\n",
        "        labels: {node.kubernetes.io/pool: general pool}\n",
        1,
    )
    [problem] = loaded_problems(tmp_path, text)
    assert problem.line == line_of(text, "general pool")
    assert str(problem).startswith(
        f"line {problem.line}, clusters.prod.workers.wk-a.labels.node.kubernetes.io/pool: "
        f"label value 'general pool' is not a Kubernetes label value"
    )


@pytest.mark.parametrize(
    ("key", "domain"),
    [
        ("node-role.kubernetes.io/worker", "kubernetes.io"),
        ("kubernetes.io/role", "kubernetes.io"),
        ("topology.kubernetes.io/rack", "kubernetes.io"),
        ("storage.k8s.io/tier", "k8s.io"),
    ],
)
def test_a_label_a_worker_may_not_set_on_itself(key, domain):
    data = example()
    worker_a(data)["labels"][key] = ""
    problem = only_problem(data)
    name = key.rpartition("/")[2]
    assert problem.field == f"clusters.prod.workers.wk-a.labels.{key}"
    assert problem.message == (
        f"a worker may not set a {domain} label on itself but the kubelet's own: Talos writes a worker's labels with "
        f"its kubelet credentials and NodeRestriction refuses the update (no label lands); use example.com/{name} or "
        f"node.kubernetes.io/{name}, or kubectl label it as an admin"
    )


def test_a_node_restriction_label_on_a_worker():
    data = example()
    worker_a(data)["labels"]["node-restriction.kubernetes.io/pci"] = "true"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.labels.node-restriction.kubernetes.io/pci"
    assert problem.message == (
        "only a cluster admin may set a node-restriction.kubernetes.io label (it marks nodes that workloads may "
        "trust): Talos writes a worker's labels as the worker itself, which NodeRestriction refuses (no label lands); "
        "set it with kubectl label node as an admin"
    )


@pytest.mark.parametrize(
    "key",
    [
        "node.kubernetes.io/pool",
        "pool.node.kubernetes.io/a",
        "kubelet.kubernetes.io/x",
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
        "node.kubernetes.io/instance-type",
        "example.com/role",
        "role",
    ],
)
def test_labels_a_worker_may_set_on_itself(key):
    data = example()
    worker_a(data)["labels"][key] = "a"
    assert key in parse_site(data, "site.yaml").clusters["prod"].workers["wk-a"].labels


@pytest.mark.parametrize("key", ["node-role.kubernetes.io/infra", "node-restriction.kubernetes.io/pci"])
def test_a_control_plane_may_carry_any_well_formed_label(key):
    # Talos writes a control plane's labels with an admin client: NodeRestriction does not apply there.
    data = example()
    control_plane_a(data)["labels"] = {key: ""}
    assert parse_site(data, "site.yaml").clusters["prod"].control_planes["cp-a"].labels == {key: ""}


def test_a_taint_key_kubernetes_refuses():
    data = example()
    worker_a(data)["taints"] = [{"key": "dedicated gpu", "value": "x"}]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.taints.0.key"
    assert problem.message == (
        f"taint key 'dedicated gpu' is not a Kubernetes qualified name: it holds ' ' in its "
        f"name (only letters, digits, '-', '_' and '.'); {KEY_FIX}"
    )


def test_a_taint_value_kubernetes_refuses():
    data = example()
    worker_a(data)["taints"] = [{"key": "example.com/dedicated", "value": "gpu:a100", "effect": "NoExecute"}]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.taints.0.value"
    assert problem.message == (
        f"taint value 'gpu:a100' is not valid in Kubernetes: it holds ':' (only letters, "
        f"digits, '-', '_' and '.'); {VALUE_FIX}"
    )


def test_a_taint_effect_kubernetes_does_not_know():
    data = example()
    worker_a(data)["taints"] = [{"key": "dedicated", "effect": "Sometimes"}]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.taints.0.effect"
    assert problem.message == "Input should be 'NoSchedule', 'PreferNoSchedule' or 'NoExecute' (got 'Sometimes')"


def test_the_rules_share_one_walk_per_site_and_never_a_stale_one():
    from terravixens.config.site_rules import walk

    site = parse_site(example(), "site.yaml")
    walked = walk.machines(site)
    assert walk.machines(site) is walked and len(walked) == 5
    data = example()
    worker_a(data)["vm_id"] = 1101
    del site
    assert only_problem(data).field == "clusters.prod.workers.wk-a.vm_id"  # a new site, walked anew
