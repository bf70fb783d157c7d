"""Talos machine configuration patches, read back as YAML: what each node gets, and that it depends only on that
node."""

from __future__ import annotations

import copy

import pytest
import yaml

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.talos.patches import cluster_patch, node_patch
from tests import support

INSTALLER = (
    "factory.talos.dev/nocloud-installer/ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515:v1.11.5"
)


def example() -> dict:
    return copy.deepcopy(support.example_data())


def patch_of(data: dict, name: str, cluster_name: str = "prod") -> dict:
    """node_patch of one node of a site given as data, parsed back with yaml.safe_load."""
    return yaml.safe_load(raw_patch_of(data, name, cluster_name))


def raw_patch_of(data: dict, name: str, cluster_name: str = "prod") -> str:
    site = support.site_from(data)
    return node_patch(placed_nodes(site, cluster_name)[name], site.clusters[cluster_name])


def interface(patch: dict) -> dict:
    [only] = patch["machine"]["network"]["interfaces"]
    return only


def vlans_by_id(patch: dict) -> dict[int, dict]:
    return {entry["vlanId"]: entry for entry in interface(patch)["vlans"]}


# ---------------------------------------------------------------------------------------------------------- hostname
def test_hostname_defaults_to_the_node_key():
    assert patch_of(example(), "cp-a")["machine"]["network"]["hostname"] == "cp-a"
    assert patch_of(example(), "wk-b")["machine"]["network"]["hostname"] == "wk-b"


def test_hostname_can_be_overridden():
    data = example()
    data["clusters"]["prod"]["workers"]["wk-a"]["hostname"] = "worker-one"
    assert patch_of(data, "wk-a")["machine"]["network"]["hostname"] == "worker-one"


# ---------------------------------------------------------------------------------------------------------- contracts
def on(talos_version: str, kubernetes_version: str = "v1.34.2", contract: str | None = None) -> dict:
    data = example()
    data["clusters"]["prod"].update(talos_version=talos_version, kubernetes_version=kubernetes_version)
    if contract:
        data["clusters"]["prod"]["config_contract"] = contract
    return data


def documents_of(data: dict, name: str) -> list[dict]:
    return list(yaml.safe_load_all(raw_patch_of(data, name)))


@pytest.mark.parametrize("name", ["cp-a", "wk-a"])
@pytest.mark.parametrize(("talos_version", "contract"), [("v1.12.7", None), ("v1.13.0", None), ("v1.13.0", "v1.12")])
def test_from_contract_1_12_the_hostname_is_a_static_hostname_config(name, talos_version, contract):
    """Talos >= 1.12 generates `HostnameConfig {auto: stable}` and refuses machine.network.hostname beside it; the
    hostname goes into that document, with auto off: never a generated name (terraform-provider-talos#296)."""
    machine, hostname = documents_of(on(talos_version, contract=contract), name)
    assert "hostname" not in machine["machine"]["network"]
    assert hostname == {"apiVersion": "v1alpha1", "kind": "HostnameConfig", "hostname": name, "auto": "off"}


def test_auto_off_is_written_as_a_string():
    """A bare `off` is the boolean false to YAML 1.1 readers: it must be quoted."""
    assert raw_patch_of(on("v1.13.0"), "cp-a").endswith(
        "---\napiVersion: v1alpha1\nauto: 'off'\nhostname: cp-a\nkind: HostnameConfig\n"
    )


def test_an_overridden_hostname_goes_into_the_hostname_config():
    data = on("v1.13.0")
    data["clusters"]["prod"]["workers"]["wk-a"]["hostname"] = "worker-one"
    assert documents_of(data, "wk-a")[1]["hostname"] == "worker-one"


@pytest.mark.parametrize("talos_version", ["v1.11.6", "v1.12.7", "v1.13.0"])
def test_contract_1_11_keeps_the_hostname_in_machine_network_on_any_talos(talos_version):
    [machine] = documents_of(on(talos_version, contract="v1.11"), "wk-b")
    assert machine["machine"]["network"]["hostname"] == "wk-b"


@pytest.mark.parametrize("name", ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"])
def test_moving_the_contract_moves_only_the_hostname(name):
    """Network, install, labels and pins stay as they are: moving the contract changes where the hostname is
    written, nothing else of the node (ADR 0023: the network stays in machine.network.interfaces)."""
    [before] = documents_of(on("v1.13.0", contract="v1.11"), name)
    after, hostname = documents_of(on("v1.13.0", contract="v1.13"), name)
    assert before["machine"]["network"].pop("hostname") == hostname["hostname"] == name
    assert before == after


# ---------------------------------------------------------------------------------------------------------- interfaces
def test_interface_selects_the_physical_nic():
    assert interface(patch_of(example(), "cp-a"))["deviceSelector"] == {"physical": True}


def test_control_plane_gets_the_vip_on_the_management_vlan():
    vlans = vlans_by_id(patch_of(example(), "cp-a"))
    assert vlans[111]["vip"] == {"ip": "10.11.1.10"}
    assert vlans[111]["addresses"] == ["10.11.1.11/24"]


def test_worker_gets_no_vip():
    vlans = vlans_by_id(patch_of(example(), "wk-a"))
    assert sorted(vlans) == [111, 120]
    assert all("vip" not in entry for entry in vlans.values())


def test_vip_follows_a_non_default_management_vlan():
    data = example()
    cluster = data["clusters"]["prod"]
    cluster["management_vlan"] = 120
    cluster["endpoint_vip"] = "10.12.0.10"
    for name, address in (("cp-a", "10.12.0.11/24"), ("cp-b", "10.12.0.12/24"), ("cp-c", "10.12.0.13/24")):
        cluster["control_planes"][name]["networks"]["vlans"][120] = {"address": address}
    vlans = vlans_by_id(patch_of(data, "cp-a"))
    assert vlans[120]["vip"] == {"ip": "10.12.0.10"}
    assert "vip" not in vlans[111]


def test_control_plane_without_the_management_vlan_gets_no_vip():
    """The site loader refuses such a cluster (test_site_errors); a library user's own model still gets a sane patch."""
    data = example()
    cp_a = data["clusters"]["prod"]["control_planes"]["cp-a"]
    cp_a["networks"]["vlans"] = {120: {"address": "10.12.0.11/24"}}
    site = Site.model_validate(data)  # the model alone: no site rules
    vlans = vlans_by_id(yaml.safe_load(node_patch(placed_nodes(site, "prod")["cp-a"], site.clusters["prod"])))
    assert list(vlans) == [120]
    assert "vip" not in vlans[120]


def test_dhcp_when_a_maintenance_ip_exists():
    assert interface(patch_of(example(), "cp-a"))["dhcp"] is True


def test_no_dhcp_without_a_maintenance_ip():
    data = example()
    del data["clusters"]["prod"]["workers"]["wk-a"]["networks"]["maintenance_ip"]
    assert "dhcp" not in interface(patch_of(data, "wk-a"))
    assert "dhcp" in interface(patch_of(data, "wk-b"))


def test_no_vlans_key_for_a_maintenance_only_node():
    data = example()
    data["clusters"]["prod"]["workers"]["wk-a"]["networks"] = {"maintenance_ip": "10.0.0.61"}
    assert interface(patch_of(data, "wk-a")) == {
        "deviceSelector": {"physical": True},
        "dhcp": True,
        "dhcpOptions": {"routeMetric": 2048},
    }


def test_dhcp_routes_rank_below_static_defaults():
    """Talos' DHCP routes default to metric 1024, the same as our first static default route."""
    static = vlans_by_id(patch_of(example(), "wk-a"))[111]["routes"][0]["metric"]
    assert interface(patch_of(example(), "wk-a"))["dhcpOptions"]["routeMetric"] > static


def test_etcd_and_kubelet_pinned_to_the_managed_network():
    document = patch_of(example(), "cp-a")
    assert document["cluster"] == {"etcd": {"advertisedSubnets": ["10.11.1.0/24"]}}
    assert document["machine"]["kubelet"] == {"nodeIP": {"validSubnets": ["10.11.1.0/24"]}}


def test_workers_pin_the_kubelet_only():
    document = patch_of(example(), "wk-a")
    assert "cluster" not in document
    assert document["machine"]["kubelet"] == {"nodeIP": {"validSubnets": ["10.11.1.0/24"]}}


def test_routable_network_wins_for_the_pins():
    data = example()
    data["clusters"]["prod"]["control_planes"]["cp-b"]["networks"]["routable"] = {
        "vlan": 120,
        "address": "10.12.0.40/24",
    }
    document = patch_of(data, "cp-b")
    assert document["cluster"]["etcd"]["advertisedSubnets"] == ["10.12.0.0/24"]


def test_maintenance_only_node_pins_nothing():
    data = example()
    data["clusters"]["prod"]["workers"]["wk-a"]["networks"] = {"maintenance_ip": "10.0.0.61"}
    assert "kubelet" not in patch_of(data, "wk-a")["machine"]


# ---------------------------------------------------------------------------------------------------------- routes
def test_gateway_gives_a_default_route_and_no_gateway_gives_none():
    vlans = vlans_by_id(patch_of(example(), "wk-a"))
    assert vlans[111]["routes"] == [{"network": "0.0.0.0/0", "gateway": "10.11.1.1", "metric": 1024}]
    assert "routes" not in vlans[120]


def test_routes_routable_first_then_vlans_by_id_with_increasing_metrics():
    data = example()
    hypervisor_bridge = data["hypervisors"]["pve1"]["bridges"]["vmbr1"]
    hypervisor_bridge["vlans"] = [111, 120, 130]
    networks = data["clusters"]["prod"]["workers"]["wk-a"]["networks"]
    networks["vlans"] = {
        120: {"address": "10.12.0.21/24", "gateway": "10.12.0.1"},
        111: {"address": "10.11.1.21/24", "gateway": "10.11.1.1"},
    }
    networks["routable"] = {"vlan": 130, "address": "192.0.2.21/24", "gateway": "192.0.2.1"}
    vlans = vlans_by_id(patch_of(data, "wk-a"))
    assert [entry["vlanId"] for entry in interface(patch_of(data, "wk-a"))["vlans"]] == [111, 120, 130]
    assert vlans[130]["routes"] == [{"network": "0.0.0.0/0", "gateway": "192.0.2.1", "metric": 1024}]
    assert vlans[111]["routes"] == [{"network": "0.0.0.0/0", "gateway": "10.11.1.1", "metric": 1025}]
    assert vlans[120]["routes"] == [{"network": "0.0.0.0/0", "gateway": "10.12.0.1", "metric": 1026}]


def test_routable_on_the_management_vlan_shares_its_entry():
    data = example()
    networks = data["clusters"]["prod"]["control_planes"]["cp-a"]["networks"]
    networks["routable"] = {"vlan": 111, "address": "10.11.1.111/24", "gateway": "10.11.1.254"}
    vlans = vlans_by_id(patch_of(data, "cp-a"))
    assert vlans[111]["addresses"] == ["10.11.1.111/24", "10.11.1.11/24"]
    assert [route["metric"] for route in vlans[111]["routes"]] == [1024, 1025]
    assert vlans[111]["routes"][0]["gateway"] == "10.11.1.254"
    assert vlans[111]["vip"] == {"ip": "10.11.1.10"}


def test_ipv6_gateway_gives_an_ipv6_default_route():
    data = example()
    networks = data["clusters"]["prod"]["workers"]["wk-a"]["networks"]
    networks["vlans"][120] = {"address": "2001:db8:120::21/64", "gateway": "2001:db8:120::1"}
    vlans = vlans_by_id(patch_of(data, "wk-a"))
    assert vlans[120]["routes"] == [{"network": "::/0", "gateway": "2001:db8:120::1", "metric": 1025}]


# ------------------------------------------------------------------------------------------------------- labels, taints
def test_labels_are_rendered():
    assert patch_of(example(), "wk-a")["machine"]["nodeLabels"] == {"node.kubernetes.io/pool": "general"}


def test_no_labels_no_taints_keys_when_empty():
    machine = patch_of(example(), "cp-a")["machine"]
    assert "nodeLabels" not in machine
    assert "nodeTaints" not in machine


def test_taints_with_and_without_value():
    data = example()
    data["clusters"]["prod"]["workers"]["wk-a"]["taints"] = [
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
        {"key": "maintenance"},
        {"key": "spot", "effect": "PreferNoSchedule"},
    ]
    assert patch_of(data, "wk-a")["machine"]["nodeTaints"] == {
        "dedicated": "gpu:NoExecute",
        "maintenance": ":NoSchedule",
        "spot": ":PreferNoSchedule",
    }


# ---------------------------------------------------------------------------------------------------------- install
def test_install_disk_and_installer_image():
    assert patch_of(example(), "wk-b")["machine"]["install"] == {"disk": "/dev/sda", "image": INSTALLER}


def test_install_follows_cluster_disk_version_and_hypervisor_image():
    data = example()
    cluster = data["clusters"]["prod"]
    cluster["install_disk"] = "/dev/vda"
    cluster["talos_version"] = "1.11.6"
    data["hypervisors"]["pve2"]["talos_image"] = {"extensions": []}
    install_b = patch_of(data, "wk-b")["machine"]["install"]  # wk-b runs on pve2
    install_a = patch_of(data, "wk-a")["machine"]["install"]  # wk-a runs on pve1
    assert install_b == {
        "disk": "/dev/vda",
        "image": (
            "factory.talos.dev/nocloud-installer/"
            "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.11.6"
        ),
    }
    assert install_a["image"] == INSTALLER.replace("v1.11.5", "v1.11.6")


# ---------------------------------------------------------------------------------------------------------- isolation
def test_patch_of_a_node_ignores_other_nodes():
    before = example()
    after = example()
    cluster = after["clusters"]["prod"]
    # Change everything about other nodes: another control plane's resources and address, a worker removed,
    # a worker added, a worker moved to another hypervisor, labels and taints elsewhere.
    cluster["control_planes"]["cp-b"]["cpu"] = 16
    cluster["control_planes"]["cp-b"]["networks"]["vlans"][111] = {"address": "10.11.1.99/24", "gateway": "10.11.1.1"}
    del cluster["workers"]["wk-b"]
    cluster["workers"]["wk-c"] = {
        "hypervisor": "pve2",
        "vm_id": 1203,
        "labels": {"role": "new"},
        "taints": [{"key": "new"}],
        "networks": {"maintenance_ip": "10.0.0.63", "vlans": {111: {"address": "10.11.1.23/24"}}},
    }
    cluster["workers"]["wk-a"]["hypervisor"] = "pve2"
    cluster["workers"]["wk-a"]["vm_id"] = 1299
    for name in ("cp-a", "cp-c"):
        assert raw_patch_of(before, name) == raw_patch_of(after, name), name
    # ...while the changed nodes' own patches did change, so the comparison above can fail.
    assert raw_patch_of(before, "cp-b") != raw_patch_of(after, "cp-b")


def test_patch_of_a_node_is_the_same_alone_or_among_others():
    alone = example()
    cluster = alone["clusters"]["prod"]
    cluster["control_planes"] = {"cp-a": cluster["control_planes"]["cp-a"]}
    cluster["workers"] = {}
    assert raw_patch_of(alone, "cp-a") == raw_patch_of(example(), "cp-a")


def test_patch_of_a_node_is_the_same_in_another_cluster_with_the_same_settings():
    # Same addresses in two clusters of one site are rejected, so the copy lives alone in its own site.
    data = example()
    staging = copy.deepcopy(data["clusters"]["prod"])
    staging["control_planes"] = {"cp-a": staging["control_planes"]["cp-a"]}
    staging["workers"] = {}
    staging["cilium"] = {}
    del staging["flux"]
    data["clusters"] = {"staging": staging}
    assert raw_patch_of(data, "cp-a", "staging") == raw_patch_of(example(), "cp-a", "prod")


def test_patch_changes_with_cluster_level_settings():
    data = example()
    data["clusters"]["prod"]["endpoint_vip"] = "10.11.1.9"
    assert vlans_by_id(patch_of(data, "cp-a"))[111]["vip"] == {"ip": "10.11.1.9"}
    assert raw_patch_of(data, "wk-a") == raw_patch_of(example(), "wk-a")


@pytest.mark.parametrize("name", ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"])
def test_patch_is_deterministic(name):
    assert raw_patch_of(example(), name) == raw_patch_of(example(), name)


# ---------------------------------------------------------------------------------------------------------- cluster
def test_cluster_patch_disables_cni_and_kube_proxy(example_site):
    patch = yaml.safe_load(cluster_patch(example_site.clusters["prod"]))
    assert patch["cluster"]["network"]["cni"] == {"name": "none"}
    assert patch["cluster"]["proxy"] == {"disabled": True}


def test_cluster_patch_enables_kubeprism(example_site):
    patch = yaml.safe_load(cluster_patch(example_site.clusters["prod"]))
    assert patch["machine"]["features"]["kubePrism"] == {"enabled": True, "port": 7445}


def test_control_planes_alone_allow_the_etcd_backup_role_from_its_namespace_only():
    """control_plane_patch (ADR 0059): Talos API access from Kubernetes, the backup role only, from the namespace the
    site names; no patch at all without etcd_backup."""
    from terravixens.talos.patches import control_plane_patch
    from tests.site_builders import with_backup

    assert control_plane_patch(support.site_from(example()).clusters["prod"]) is None
    site = support.site_from(with_backup(example(), namespace="backups"))
    assert yaml.safe_load(control_plane_patch(site.clusters["prod"])) == {
        "machine": {
            "features": {
                "kubernetesTalosAPIAccess": {
                    "enabled": True,
                    "allowedRoles": ["os:etcd:backup"],
                    "allowedKubernetesNamespaces": ["backups"],
                }
            }
        }
    }


# ----------------------------------------------------------------------------------- the YAML text (yaml_text.py)
SIMPLE_TEXT = "abcXYZ019._/:@=+-"
TRICKY = [
    "yes",
    "no",
    "on",
    "off",
    "null",
    "true",
    "False",
    "1.0",
    "0x1F",
    "1e3",
    "-",
    "---",
    "...",
    ":",
    "0o17",
    "1_000",
    ".inf",
    "=",
    "2001-12-14",
    "12:30:00",
    "::/0",
    "0.0.0.0/0",
    "-a",
    ":a",
    "a:",
    "@x",
    "+1",
    "00",
]


def _documents():
    from hypothesis import strategies as st

    text = st.one_of(st.sampled_from(TRICKY), st.text(SIMPLE_TEXT, min_size=1, max_size=150))
    scalars = st.one_of(text, st.integers(-10, 10**7), st.booleans(), st.none())
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
        max_leaves=30,
    )


def test_libyaml_writes_what_pyyaml_writes_for_simple_documents():
    """The fast path is taken only where the emitters agree: checked on generated documents of its domain, the text
    yaml_text writes itself, libyaml's and PyYAML's."""
    from hypothesis import given, settings

    from terravixens.talos import yaml_text

    @settings(max_examples=600, deadline=None, derandomize=True, database=None)
    @given(_documents())
    def agree(value):
        document = {"machine": value}
        assert yaml_text.is_simple(document)
        expected = yaml.safe_dump(document, sort_keys=True, default_flow_style=False)
        assert yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False) == expected
        assert yaml_text.dump(document) == expected

    agree()


def test_yaml_text_writes_what_pyyaml_writes_for_any_simple_document():
    """Documents of the domain at any depth and shape (several keys at the top, lists of lists, empty collections,
    every quoting case of the alphabet): the same text as yaml.safe_dump."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from terravixens.talos import yaml_text

    keys = st.one_of(st.sampled_from(TRICKY), st.text(SIMPLE_TEXT, min_size=1, max_size=20))

    @settings(max_examples=800, deadline=None, derandomize=True, database=None)
    @given(st.dictionaries(keys, _documents(), min_size=1, max_size=5))
    def agree(document):
        assert yaml_text.is_simple(document)
        assert yaml_text.dump(document) == yaml.safe_dump(document, sort_keys=True, default_flow_style=False)

    agree()


def test_every_patch_of_the_example_takes_the_fast_path_and_reads_back_the_same(monkeypatch):
    """The fast path (ADR 0057) is taken for every patch of the example — lists of mappings (interfaces, VLANs,
    routes) included: PyYAML's emitter is not called once."""
    from terravixens.talos import yaml_text

    data = example()
    site = support.site_from(data)
    documents = [yaml.safe_load(raw_patch_of(data, name)) for name in ("cp-a", "wk-a")]
    documents.append(yaml.safe_load(cluster_patch(site.clusters["prod"])))
    expected = [yaml.safe_dump(document, sort_keys=True, default_flow_style=False) for document in documents]

    def slow_path(*args, **kwargs):
        raise AssertionError("yaml_text.dump left a simple document to PyYAML's emitter")

    monkeypatch.setattr(yaml, "safe_dump", slow_path)
    for document, text in zip(documents, expected, strict=True):
        assert yaml_text.is_simple(document)
        assert yaml_text.dump(document) == text


@pytest.mark.parametrize("value", ["two words", "", "é", "x" * 200 + " y", "line\nbreak", "tab\there", "q'uote"])
def test_other_text_goes_through_pyyamls_emitter(value):
    """A label value the model would refuse, from a library user: PyYAML's own text, folding and escapes included."""
    from terravixens.talos import yaml_text

    document = {"machine": {"nodeLabels": {"k": value}, "list": [value] * 3}}
    assert not yaml_text.is_simple(document)
    assert yaml_text.dump(document) == yaml.safe_dump(document, sort_keys=True, default_flow_style=False)


@pytest.mark.parametrize(
    "document",
    [
        {"machine": {"certSANs": ["api.lab", "two words"]}},  # one item of a list outside the alphabet
        {"machine": {"list": [["a", "é"]]}},
        {"machine": {"ratio": 0.5}},  # a float: not a scalar the fast path writes
        {"machine": {"at": b"bytes"}},
    ],
)
def test_a_value_outside_the_domain_at_any_depth_goes_through_pyyamls_emitter(document):
    from terravixens.talos import yaml_text

    assert not yaml_text.is_simple(document)
    assert yaml_text.dump(document) == yaml.safe_dump(document, sort_keys=True, default_flow_style=False)


@pytest.mark.parametrize("document", [{}, [], ["a", {"b": 1}], None, "text"])
def test_an_empty_or_non_mapping_document_is_pyyamls_text(document):
    """dump is yaml.safe_dump for every document: an empty mapping is `{}`, not an empty text."""
    from terravixens.talos import yaml_text

    assert yaml_text.dump(document) == yaml.safe_dump(document, sort_keys=True, default_flow_style=False)
