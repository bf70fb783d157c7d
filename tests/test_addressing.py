"""Every branch of the address fallback chain: routable -> management VLAN -> lowest other VLAN -> maintenance IP."""

from __future__ import annotations

import pytest

from terravixens.config.addressing import NoAddressError, first_contact_address, node_address
from terravixens.config.model import NodeNetworks


def networks(**fields) -> NodeNetworks:
    return NodeNetworks.model_validate(fields)


FULL = {
    "maintenance_ip": "10.0.0.51",
    "vlans": {111: {"address": "10.11.1.11/24", "gateway": "10.11.1.1"}, 120: {"address": "10.12.0.11/24"}},
    "routable": {"vlan": 130, "address": "192.0.2.11/24", "gateway": "192.0.2.1"},
}


# --------------------------------------------------------------------------------------------------------- node_address
def test_routable_wins_over_everything():
    assert node_address(networks(**FULL)) == "192.0.2.11"


def test_routable_wins_even_with_a_matching_management_vlan_argument():
    assert node_address(networks(**FULL), management_vlan=120) == "192.0.2.11"


def test_management_vlan_111_when_no_routable():
    full = {**FULL, "routable": None}
    assert node_address(networks(**full)) == "10.11.1.11"


def test_management_vlan_111_is_preferred_over_a_lower_vlan_id():
    nets = networks(vlans={100: {"address": "10.10.0.11/24"}, 111: {"address": "10.11.1.11/24"}})
    assert node_address(nets) == "10.11.1.11"


def test_non_default_management_vlan_argument():
    nets = networks(vlans={111: {"address": "10.11.1.11/24"}, 120: {"address": "10.12.0.11/24"}})
    assert node_address(nets, management_vlan=120) == "10.12.0.11"
    assert node_address(nets) == "10.11.1.11"


def test_lowest_other_vlan_when_management_vlan_absent():
    nets = networks(vlans={130: {"address": "10.13.0.11/24"}, 120: {"address": "10.12.0.11/24"}})
    assert node_address(nets) == "10.12.0.11"


def test_lowest_other_vlan_is_numeric_not_by_insertion_or_text():
    nets = networks(vlans={1000: {"address": "10.100.0.11/24"}, 99: {"address": "10.99.0.11/24"}})
    assert node_address(nets) == "10.99.0.11"


def test_lowest_other_vlan_when_a_non_default_management_vlan_is_absent():
    nets = networks(vlans={130: {"address": "10.13.0.11/24"}, 120: {"address": "10.12.0.11/24"}})
    assert node_address(nets, management_vlan=200) == "10.12.0.11"


def test_vlan_beats_the_maintenance_ip():
    nets = networks(maintenance_ip="10.0.0.51", vlans={130: {"address": "10.13.0.11/24"}})
    assert node_address(nets) == "10.13.0.11"


def test_maintenance_ip_only():
    assert node_address(networks(maintenance_ip="10.0.0.51")) == "10.0.0.51"


def test_address_is_returned_without_prefix_length():
    nets = networks(vlans={111: {"address": "10.11.1.11/16"}})
    assert node_address(nets) == "10.11.1.11"
    assert "/" not in node_address(nets)


def test_ipv6_address():
    nets = networks(routable={"vlan": 130, "address": "2001:db8::11/64"})
    assert node_address(nets) == "2001:db8::11"


def test_nothing_raises_no_address_error_saying_how_to_fix():
    with pytest.raises(NoAddressError) as caught:
        node_address(networks())
    assert str(caught.value) == (
        "the node has no address: give it networks.maintenance_ip, a VLAN interface under networks.vlans or "
        "networks.routable"
    )


def test_no_address_error_is_a_value_error():
    with pytest.raises(ValueError):
        node_address(NodeNetworks())


# -------------------------------------------------------------------------------------------------------- first_contact
def test_first_contact_is_the_maintenance_ip_when_present():
    assert first_contact_address(networks(**FULL)) == "10.0.0.51"


def test_first_contact_is_the_maintenance_ip_when_it_is_the_only_address():
    assert first_contact_address(networks(maintenance_ip="10.0.0.51")) == "10.0.0.51"


def test_first_contact_without_maintenance_ip_is_the_managed_address():
    full = {**FULL, "maintenance_ip": None}
    assert first_contact_address(networks(**full)) == "192.0.2.11" == node_address(networks(**full))


def test_first_contact_passes_the_management_vlan_on():
    nets = networks(vlans={111: {"address": "10.11.1.11/24"}, 120: {"address": "10.12.0.11/24"}})
    assert first_contact_address(nets, management_vlan=120) == "10.12.0.11"
    assert first_contact_address(nets) == "10.11.1.11"


def test_first_contact_with_nothing_raises_no_address_error():
    with pytest.raises(NoAddressError, match="has no address"):
        first_contact_address(networks())


# ------------------------------------------------------------------------------------------------------ partial configs
@pytest.mark.parametrize(
    ("fields", "managed", "first"),
    [
        ({"routable": {"vlan": 130, "address": "192.0.2.11/24", "gateway": "192.0.2.1"}}, "192.0.2.11", "192.0.2.11"),
        (
            {"routable": {"vlan": 130, "address": "192.0.2.11/24"}, "maintenance_ip": "10.0.0.51"},
            "192.0.2.11",
            "10.0.0.51",
        ),
        ({"vlans": {120: {"address": "10.12.0.11/24"}, 130: {"address": "10.13.0.11/24"}}}, "10.12.0.11", "10.12.0.11"),
        (
            {
                "vlans": {130: {"address": "10.13.0.11/24"}, 120: {"address": "10.12.0.11/24"}},
                "maintenance_ip": "10.0.0.51",
            },
            "10.12.0.11",
            "10.0.0.51",
        ),
        ({"vlans": {111: {"address": "10.11.1.11/24"}}, "maintenance_ip": "10.0.0.51"}, "10.11.1.11", "10.0.0.51"),
        ({"maintenance_ip": "10.0.0.51"}, "10.0.0.51", "10.0.0.51"),
    ],
    ids=[
        "only-routable",
        "routable+maintenance",
        "vlans-120-130",
        "vlans-130-120+maintenance",
        "vlan-111+maintenance",
        "only-maintenance",
    ],
)
def test_partial_network_configs(fields, managed, first):
    nets = networks(**fields)
    assert node_address(nets) == managed
    assert first_contact_address(nets) == first


def test_example_site_nodes(example_site):
    cluster = example_site.clusters["prod"]
    found = {
        name: (node_address(node.networks, cluster.management_vlan), first_contact_address(node.networks))
        for name, (_, node) in cluster.nodes().items()
    }
    assert found == {
        "cp-a": ("10.11.1.11", "10.0.0.51"),
        "cp-b": ("10.11.1.12", "10.0.0.52"),
        "cp-c": ("10.11.1.13", "10.0.0.53"),
        "wk-a": ("10.11.1.21", "10.0.0.61"),
        "wk-b": ("10.11.1.22", "10.0.0.62"),
    }


# ------------------------------------------------------------------------------------------------------- managed_subnet
def test_the_managed_subnet_follows_the_same_chain():
    from terravixens.config.addressing import managed, managed_subnet

    assert managed_subnet(networks(**FULL)) == "192.0.2.0/24"
    assert managed_subnet(networks(**{**FULL, "routable": None})) == "10.11.1.0/24"
    assert managed_subnet(networks(**{**FULL, "routable": None}), management_vlan=120) == "10.12.0.0/24"
    only_other = networks(vlans={130: {"address": "10.13.0.11/16"}, 120: {"address": "10.12.0.11/24"}})
    assert managed_subnet(only_other) == "10.12.0.0/24"
    assert managed(only_other).address == "10.12.0.11"


def test_the_maintenance_ip_has_no_subnet_and_no_address_is_an_error():
    from terravixens.config.addressing import managed, managed_subnet

    maintenance = networks(maintenance_ip="10.0.0.51")
    assert managed_subnet(maintenance) is None
    assert managed(maintenance).subnet is None and managed(maintenance).address == "10.0.0.51"
    with pytest.raises(NoAddressError, match=r"the node has no address: give it networks\.maintenance_ip"):
        managed(networks())


# ------------------------------------------------------------------------------------------------- placement.py
def test_a_placed_node_carries_what_the_chain_gives_under_the_clusters_management_vlan():
    """placed_nodes: every node by name, with its role, hypervisor, hostname and the chain's answers under the
    cluster's management VLAN (here 120, and wk-a without a maintenance IP: first contacted on that VLAN too)."""
    import copy

    from terravixens.config.placement import placed_nodes
    from terravixens.roles import Role
    from tests import support

    data = copy.deepcopy(support.example_data())
    cluster = data["clusters"]["prod"]
    cluster["management_vlan"] = 120
    cluster["endpoint_vip"] = "10.12.0.10"
    for name, address in (("cp-a", "10.12.0.11/24"), ("cp-b", "10.12.0.12/24"), ("cp-c", "10.12.0.13/24")):
        cluster["control_planes"][name]["networks"]["vlans"][120] = {"address": address}
    wk_a = cluster["workers"]["wk-a"]
    wk_a["hostname"] = "worker-one"
    wk_a["networks"]["maintenance_ip"] = None
    site = support.site_from(data)
    placed = placed_nodes(site, "prod")
    assert list(placed) == ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]
    cp_a, worker = placed["cp-a"], placed["wk-a"]
    assert (cp_a.name, cp_a.role, cp_a.hostname) == ("cp-a", Role.CONTROLPLANE, "cp-a")
    assert (cp_a.address, cp_a.first_contact, cp_a.managed_subnet) == ("10.12.0.11", "10.0.0.51", "10.12.0.0/24")
    assert cp_a.hypervisor_name == cp_a.node.hypervisor
    assert cp_a.hypervisor is site.hypervisors[cp_a.node.hypervisor]
    assert cp_a.node is site.clusters["prod"].control_planes["cp-a"]
    assert (worker.name, worker.role, worker.hostname) == ("wk-a", Role.WORKER, "worker-one")
    wk_address = worker.node.networks.vlans[120].address.split("/")[0]
    assert worker.address == worker.first_contact == wk_address
