"""One small test per site-file error: a minimally changed copy of the example, the exact field, the bad value and the fix.

Each test mutates a deep copy of sites/example.yaml (via tests.support.example_data()) and checks what
terravixens.config.loader.parse_site reports: the field path the user has to edit, and the key parts of the message.
"""
from __future__ import annotations

import copy

import pytest

from terravixens.config.loader import SiteError, SiteProblem, load_site, parse_site
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
        planes["cp-d"] = {**copy.deepcopy(planes["cp-c"]), "vm_id": 1104,
                          "networks": {"maintenance_ip": "10.0.0.54", "vlans": {111: {"address": "10.11.1.14/24"}}}}
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
    assert "address 10.11.1.11 is already used by clusters.prod.control_planes.cp-a.networks.vlans.111.address" in problem.message
    assert "give each address to one node" in problem.message


def test_duplicate_maintenance_ip_between_nodes():
    data = example()
    worker_a(data)["networks"]["maintenance_ip"] = "10.0.0.51"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks.maintenance_ip"
    assert "address 10.0.0.51 is already used by clusters.prod.control_planes.cp-a.networks.maintenance_ip" in problem.message


def test_duplicate_address_across_clusters():
    data = example()
    second_cluster(data, endpoint_vip="10.11.2.10", cp_address="10.11.1.11/24")
    problem = only_problem(data)
    assert problem.field == "clusters.staging.control_planes.st-cp.networks.vlans.111.address"
    assert "address 10.11.1.11 is already used by clusters.prod.control_planes.cp-a.networks.vlans.111.address" in problem.message


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
    worker_a(data)["hypervisor"] = "pve3"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.hypervisor"
    assert "unknown hypervisor 'pve3'" in problem.message
    assert "use one of pve1, pve2 or add it under 'hypervisors'" in problem.message


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
    assert problem.field == "clusters.prod.workers.wk-a.networks"
    assert "VLAN 130 is not allowed on bridge 'vmbr1' of 'pve1'" in problem.message
    assert "add it to hypervisors.pve1.bridges.vmbr1.vlans" in problem.message


def test_routable_vlan_not_allowed_on_the_bridge():
    data = example()
    worker_a(data)["networks"]["routable"] = {"vlan": 140, "address": "192.0.2.21/24", "gateway": "192.0.2.1"}
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.networks"
    assert "VLAN 140 is not allowed on bridge 'vmbr1' of 'pve1'" in problem.message


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
    assert "LoadBalancer pool 10.12.0.16/28 contains 10.12.0.21, used by clusters.prod.workers.wk-a" in problems[0].message
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
@pytest.mark.parametrize(("field", "bad"), [("talos_version", "1.11"), ("talos_version", "v1.11.x"),
                                            ("kubernetes_version", "latest"), ("kubernetes_version", "vv1.34.2")])
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
    prod(data)["talos_version"] = "1.2.3"
    prod(data)["kubernetes_version"] = "1.34.2"
    prod(data)["cilium"]["chart_version"] = "1.18.4"
    cluster = parse_site(data, "site.yaml").clusters["prod"]
    assert cluster.talos_version == "v1.2.3"
    assert cluster.kubernetes_version == "v1.34.2"
    assert cluster.cilium.chart_version == "v1.18.4"


def test_versions_with_v_and_prerelease_are_kept():
    data = example()
    prod(data)["talos_version"] = "v1.11.6-beta.1"
    assert parse_site(data, "site.yaml").clusters["prod"].talos_version == "v1.11.6-beta.1"


def test_talos_newer_than_supported():
    data = example()
    prod(data)["talos_version"] = "v1.12.0"
    problem = only_problem(data)
    assert problem.field == "clusters.prod.talos_version"
    assert problem.message.startswith("Talos v1.12.0 is newer than terravixens supports (up to v1.11.x)")


def test_ssh_flux_url_needs_a_git_secret():
    data = example()
    del prod(data)["flux"]["git_secret"]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.flux"
    assert problem.message.startswith("url 'ssh://git@git.lab.internal/platform/fleet.git' is ssh but git_secret is not set")


# ---------------------------------------------------------------------------------------------------------- keys
@pytest.mark.parametrize(("where", "path"), [
    (lambda d: d, ""),
    (lambda d: d["proxmox"], "proxmox."),
    (lambda d: d["hypervisors"]["pve1"]["bridges"]["vmbr1"], "hypervisors.pve1.bridges.vmbr1."),
    (lambda d: prod(d), "clusters.prod."),
    (lambda d: worker_a(d), "clusters.prod.workers.wk-a."),
    (lambda d: worker_a(d)["networks"]["vlans"][111], "clusters.prod.workers.wk-a.networks.vlans.111."),
    (lambda d: prod(d)["flux"], "clusters.prod.flux."),
], ids=["top", "proxmox", "bridge", "cluster", "node", "vlan-interface", "flux"])
def test_unknown_key_anywhere(where, path):
    data = example()
    where(data)["cpus"] = 3
    problem = only_problem(data)
    assert problem.field == f"{path}cpus"
    assert "unknown key (value 3)" in problem.message
    assert "remove it or check its spelling" in problem.message


@pytest.mark.parametrize(("where", "key", "path"), [
    (lambda d: d, "proxmox", "proxmox"),
    (lambda d: d, "site", "site"),
    (lambda d: worker_a(d), "vm_id", "clusters.prod.workers.wk-a.vm_id"),
    (lambda d: worker_a(d), "hypervisor", "clusters.prod.workers.wk-a.hypervisor"),
    (lambda d: prod(d), "endpoint_vip", "clusters.prod.endpoint_vip"),
    (lambda d: prod(d), "talos_version", "clusters.prod.talos_version"),
    (lambda d: prod(d), "control_planes", "clusters.prod.control_planes"),
    (lambda d: prod(d)["flux"], "url", "clusters.prod.flux.url"),
], ids=lambda value: value if isinstance(value, str) else "")
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


def test_s3_endpoint_must_be_https():
    data = example()
    data["state"] = {"backend": "s3", "s3": {"endpoint": "http://minio.lab.internal:9000", "bucket": "tf"}}
    problem = only_problem(data)
    assert problem.field == "state.s3"
    assert problem.message == ("endpoint 'http://minio.lab.internal:9000' is not https: state holds secrets and "
                               "credentials, so it travels over https only; use https://…, or set allow_http: true "
                               "for a local test emulator")


def test_s3_http_endpoint_allowed_explicitly():
    data = example()
    data["state"] = {"backend": "s3", "s3": {"endpoint": "http://127.0.0.1:9000", "bucket": "tf", "allow_http": True}}
    assert parse_site(data, "site.yaml").state.s3.allow_http is True


def test_s3_kms_key_needs_encryption():
    data = example()
    data["state"] = {"backend": "s3", "s3": {"endpoint": "https://minio.lab.internal:9000", "bucket": "tf",
                                             "encrypt": False, "kms_key_id": "alias/state"}}
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


@pytest.mark.parametrize("bad", ["/var/lib/terravixens", "~/state"])
def test_absolute_local_dir(bad):
    data = example()
    data["state"]["local_dir"] = bad
    problem = only_problem(data)
    assert problem.field == "state.local_dir"
    assert f"{bad!r} is absolute" in problem.message
    assert "relative to the project root" in problem.message


def test_proxmox_endpoint_not_https():
    data = example()
    data["proxmox"]["endpoint"] = "http://pve1.lab.internal:8006/"
    problem = only_problem(data)
    assert problem.field == "proxmox.endpoint"
    assert "'http://pve1.lab.internal:8006/' is not an https URL" in problem.message
    assert "https://HOST:8006/" in problem.message


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
        "site", "proxmox.endpoint", "clusters.prod.talos_version", "clusters.prod.workers.wk-a.networks.maintenance_ip",
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
def _second_cluster(data: dict, vip: str) -> dict:
    staging = copy.deepcopy(prod(data))
    staging["endpoint_vip"] = vip
    staging["cilium"]["pools"] = {}
    staging["flux"] = None
    staging["control_planes"] = {"st-a": {"hypervisor": "pve1", "vm_id": 2101,
                                          "networks": {"vlans": {111: {"address": "10.11.1.101/24"}}}}}
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
    _second_cluster(data, "10.12.0.200")
    problem = only_problem(data)
    assert problem.field == "clusters.prod.cilium.pools.services"
    assert "LoadBalancer pool 10.12.0.192/27 contains 10.12.0.200, used by clusters.staging.endpoint_vip" in problem.message


def test_vip_compared_as_an_address_not_as_text():
    data = example()
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
    assert raised.value.problems == [SiteProblem("line 1, column 7", "is not UTF-8 text (byte 0xff): save the file as UTF-8")]


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
    prod(data)["workers"]["wk-a"]["taints"] = [{"key": "dedicated", "effect": "NoSchedule"},
                                               {"key": "dedicated", "effect": "NoExecute"}]
    problem = only_problem(data)
    assert problem.field == "clusters.prod.workers.wk-a.taints"
    assert problem.message == "taint key 'dedicated' appears twice: Talos nodeTaints is a map, one taint per key"
