"""terravixens.talos.maintenance on its own (ADR 0055): what `terravixens maintain HYPERVISOR` takes down and brings
back, in which order, and when and how it refuses — pure functions of the site, read here without any machine. The
run that acts on them (fake Proxmox VE, talosctl and kubectl) is tests/test_maintain.py; this file is the cheap judge
of the module's mutants (scripts/mutation.py JUDGES), so each answer is compared whole."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from terravixens.config.model import Site
from terravixens.roles import Role
from terravixens.talos.maintenance import Blocked, Hosted, HostedGuest, TalosMachine, blocked, hosted
from tests import support

STANDALONE = Path(__file__).resolve().parent.parent / "sites" / "standalone.yaml"
CP, WORKER = Role.CONTROLPLANE, Role.WORKER


def three_hosts(guests: bool = False) -> dict:
    """The example site (cp-a on pve1, cp-b on pve2, cp-c on pve3; wk-a on pve1, wk-b on pve2), and with `guests`
    the standalone example's on pve1: `tools` (a VM) and `nest1` (a nested Proxmox VE host holding dns1 and jump1)."""
    data = support.example_data()
    if guests:
        data["standalone"] = yaml.safe_load(STANDALONE.read_text())["standalone"]
    return data


def add_control_plane(data: dict, cluster: str, name: str, hypervisor: str, number: int) -> None:
    """Another control plane of `cluster` like prod's cp-a, on `hypervisor`, with VM id and address of its own."""
    node = copy.deepcopy(support.example_data()["clusters"]["prod"]["control_planes"]["cp-a"])
    node.update(hypervisor=hypervisor, vm_id=1300 + number)
    node["networks"] = {
        "maintenance_ip": f"10.0.0.{100 + number}",
        "vlans": {111: {"address": f"10.11.1.{100 + number}/24", "gateway": "10.11.1.1"}},
    }
    data["clusters"][cluster]["control_planes"][name] = node


def with_dev(data: dict, control_planes: dict[str, str]) -> dict:
    """A second cluster, `dev` (sorted before prod), of the given control planes (name -> hypervisor), one worker
    on pve3 and an endpoint of its own."""
    dev = copy.deepcopy(data["clusters"]["prod"])
    dev.update(endpoint_vip="10.11.1.90", control_planes={}, workers={})
    dev["flux"] = {**dev["flux"], "path": "./clusters/dev"}
    data["clusters"]["dev"] = dev
    for number, (name, hypervisor) in enumerate(control_planes.items()):
        add_control_plane(data, "dev", name, hypervisor, 50 + number)
    worker = copy.deepcopy(data["clusters"]["prod"]["workers"]["wk-b"])
    worker.update(hypervisor="pve3", vm_id=1390)
    worker["networks"] = {"vlans": {111: {"address": "10.11.1.190/24", "gateway": "10.11.1.1"}}}
    dev["workers"]["dev-wk"] = worker
    return data


def site_of(data: dict) -> Site:
    return support.site_from(data)


# ------------------------------------------------------------------------------------------------ what is hosted
def test_a_host_holds_its_talos_nodes_workers_first_then_its_guests_vms_before_a_nested_host():
    """pve1: wk-a before cp-a (workers drain first), then `tools` before `nest1` (a nested Proxmox VE host goes
    last: its own guests, dns1 and jump1, stop with it and are not pve1's)."""
    site = site_of(three_hosts(guests=True))
    assert hosted(site, "pve1") == Hosted(
        "pve1",
        "pve1",
        (
            TalosMachine("prod", "wk-a", "wk-a", WORKER, 1201, "10.11.1.21"),
            TalosMachine("prod", "cp-a", "cp-a", CP, 1101, "10.11.1.11"),
        ),
        (
            HostedGuest("tools", "vm", 3002, "tools"),
            HostedGuest("nest1", "pve", 3001, "nested-pve", ("dns1", "jump1")),
        ),
    )
    assert [step.unit for step in hosted(site, "pve1").going_down()] == [
        "prod/wk-a",
        "prod/cp-a",
        "guest tools",
        "guest nest1",
    ]


def test_a_host_holds_only_its_own_nodes():
    site = site_of(three_hosts(guests=True))
    assert [(m.name, m.role) for m in hosted(site, "pve2").talos] == [("wk-b", WORKER), ("cp-b", CP)]
    assert [(m.name, m.role) for m in hosted(site, "pve3").talos] == [("cp-c", CP)]
    assert hosted(site, "pve2").guests == hosted(site, "pve3").guests == ()


def test_coming_back_is_the_reverse_guests_first_then_per_cluster_control_planes_before_workers():
    site = site_of(three_hosts(guests=True))
    assert [step.unit for step in hosted(site, "pve1").coming_back()] == [
        "guest nest1",
        "guest tools",
        "prod/cp-a",
        "prod/wk-a",
    ]


def test_with_two_clusters_on_a_host_each_comes_back_whole_control_planes_first():
    """pve3 holds prod's cp-c and dev's dev-c and dev-wk: going down, per cluster by name, workers then control
    planes; coming back, per cluster by name, control planes then workers (never another cluster's in between)."""
    site = site_of(with_dev(three_hosts(), {"dev-a": "pve1", "dev-b": "pve2", "dev-c": "pve3"}))
    here = hosted(site, "pve3")
    assert [m.unit for m in here.going_down()] == ["dev/dev-wk", "dev/dev-c", "prod/cp-c"]
    assert [m.unit for m in here.coming_back()] == ["dev/dev-c", "dev/dev-wk", "prod/cp-c"]
    assert here.clusters() == ["dev", "prod"]


# ------------------------------------------------------------------------------------------------ when it refuses
def test_one_control_plane_of_three_leaving_keeps_quorum():
    """pve1 holds cp-a: 2 of 3 members stay, exactly a majority: not blocked."""
    assert blocked(site_of(three_hosts()), "pve1") == []
    assert blocked(site_of(three_hosts()), "pve1", {"prod": {"cp-a"}}) == []  # the leaving one counts once


def test_a_member_down_elsewhere_blocks_and_says_bring_it_back_or_move():
    site = site_of(three_hosts())
    [found] = blocked(site, "pve1", {"prod": {"cp-b"}})
    assert found == Blocked("prod", 3, ("cp-a",), ("cp-b",), 1, 2, (("cp-a", "pve2"),))
    assert found.message("pve1", "platform-prod") == (
        "prod: emptying pve1 shuts down cp-a and cp-b already down elsewhere: 1 of 3 etcd members would be left "
        "where 2 keep quorum (and the cluster's API). First bring cp-b back, or move cp-a to pve2 "
        "(clusters.prod.control_planes.<name>.hypervisor, then `bin/terravixens deploy platform-prod`: the VM "
        "migrates), then run maintain again"
    )


def test_a_host_holding_a_majority_is_told_to_move_only_as_many_as_quorum_needs():
    """cp-a and cp-c on pve1 (exempted): 1 of 3 would stay where 2 must; moving one (cp-c, not the bootstrap
    node) is enough, not both."""
    data = three_hosts()
    data["clusters"]["prod"]["control_planes"]["cp-c"]["hypervisor"] = "pve1"
    data["clusters"]["prod"]["placement"] = {"allow_control_plane_majority_on": "pve1", "reason": "pve3 on order"}
    [found] = blocked(site_of(data), "pve1")
    assert found == Blocked("prod", 3, ("cp-a", "cp-c"), (), 1, 2, (("cp-c", "pve3"),))
    assert found.message("pve1", "platform-prod") == (
        "prod: emptying pve1 shuts down cp-a, cp-c: 1 of 3 etcd members would be left where 2 keep quorum (and "
        "the cluster's API). First move cp-c to pve3 (clusters.prod.control_planes.<name>.hypervisor, then "
        "`bin/terravixens deploy platform-prod`: the VM migrates), then run maintain again"
    )


def five_control_planes() -> Site:
    """prod of five control planes: cp-a and cp-d on pve1, cp-b and cp-e on pve2, cp-c on pve3."""
    data = three_hosts()
    add_control_plane(data, "prod", "cp-d", "pve1", 4)
    add_control_plane(data, "prod", "cp-e", "pve2", 5)
    return site_of(data)


def test_two_leaving_and_two_down_of_five_need_two_moves_each_named():
    site = five_control_planes()
    [found] = blocked(site, "pve1", {"prod": {"cp-b", "cp-c", "cp-a"}})
    assert found == Blocked("prod", 5, ("cp-a", "cp-d"), ("cp-b", "cp-c"), 1, 3, (("cp-a", "pve3"), ("cp-d", "pve2")))
    assert found.message("pve1", "platform-prod") == (
        "prod: emptying pve1 shuts down cp-a, cp-d and cp-b, cp-c already down elsewhere: 1 of 5 etcd members "
        "would be left where 3 keep quorum (and the cluster's API). First bring cp-b, cp-c back, or move cp-a to "
        "pve3 and cp-d to pve2 (clusters.prod.control_planes.<name>.hypervisor, then `bin/terravixens deploy "
        "platform-prod`: the VM migrates), then run maintain again"
    )


def test_with_nowhere_to_move_enough_it_says_bring_them_back_and_gives_no_half_advice():
    """Three of five down elsewhere and two leaving pve1: no member would answer; two hypervisors can take at most
    the two leaving ones, short of the three quorum needs: no moves, only bring them back."""
    site = five_control_planes()
    [found] = blocked(site, "pve1", {"prod": {"cp-b", "cp-c", "cp-e"}})
    assert (found.left, found.needed, found.moves) == (0, 3, ())
    assert found.message("pve1", "platform-prod") == (
        "prod: emptying pve1 shuts down cp-a, cp-d and cp-b, cp-c, cp-e already down elsewhere: 0 of 5 etcd "
        "members would be left where 3 keep quorum (and the cluster's API). Bring cp-b, cp-c, cp-e back first, then "
        "run maintain again"
    )


@pytest.mark.parametrize(
    ("dev", "hypervisor"),
    [
        pytest.param({"dev-a": "pve1"}, "pve3", id="dev-has-nothing-there"),
        pytest.param({"dev-a": "pve1", "dev-b": "pve2", "dev-c": "pve3"}, "pve3", id="dev-keeps-its-quorum"),
    ],
)
def test_every_cluster_is_judged_not_only_the_first(dev, hypervisor):
    site = site_of(with_dev(three_hosts(), dev))
    found = blocked(site, hypervisor, {"prod": {"cp-b"}})
    assert [(b.cluster, b.leaving, b.down) for b in found] == [("prod", ("cp-c",), ("cp-b",))]


def test_each_blocked_cluster_is_listed_by_name():
    """dev's only control plane and prod's cp-a (cp-b down) on pve1: both refuse, dev first."""
    site = site_of(with_dev(three_hosts(), {"dev-a": "pve1"}))
    found = blocked(site, "pve1", {"prod": {"cp-b"}})
    assert [(b.cluster, b.count, b.leaving, b.left, b.needed, b.moves) for b in found] == [
        ("dev", 1, ("dev-a",), 0, 1, (("dev-a", "pve2"),)),
        ("prod", 3, ("cp-a",), 1, 2, (("cp-a", "pve2"),)),
    ]
