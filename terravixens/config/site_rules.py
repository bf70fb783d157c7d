"""Rules that need the whole site: references between sections and uniqueness across clusters.

Each rule yields (field path, message) pairs so that the loader can name the exact field; all problems are reported
at once instead of one per run.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING

from terravixens.config import standalone_rules

if TYPE_CHECKING:
    from terravixens.config.model import Site

Problem = tuple[tuple[str | int, ...], str]


class SiteRuleError(Exception):
    """Raised from inside model validation with field paths; the loader formats it like pydantic errors."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(message for _, message in problems))
        self.problems = problems


def check(site: Site) -> None:
    problems = [
        *known_hypervisors(site),
        *bridges_exist(site),
        *unique_vm_ids(site),
        *nodes_reachable(site),
        *unique_addresses(site),
        *pools_clear_of_nodes(site),
        *standalone_rules.problems(site),
    ]
    if problems:
        raise SiteRuleError(problems)


def _all_nodes(site: Site):
    for cluster_name, cluster in site.clusters.items():
        for role_map in ("control_planes", "workers"):
            for node_name, node in getattr(cluster, role_map).items():
                yield ("clusters", cluster_name, role_map, node_name), cluster, node


def known_hypervisors(site: Site) -> Iterator[Problem]:
    for path, _, node in _all_nodes(site):
        if node.hypervisor not in site.hypervisors:
            yield (*path, "hypervisor"), (
                f"unknown hypervisor {node.hypervisor!r}: use one of {', '.join(sorted(site.hypervisors))} "
                f"or add it under 'hypervisors'"
            )


def bridges_exist(site: Site) -> Iterator[Problem]:
    for path, cluster, node in _all_nodes(site):
        hypervisor = site.hypervisors.get(node.hypervisor)
        bridge = node.bridge or cluster.bridge
        if hypervisor is None or not hypervisor.bridges or bridge in hypervisor.bridges:
            continue
        yield (*path, "bridge"), (
            f"bridge {bridge!r} is not declared on hypervisor {node.hypervisor!r}: declare it under "
            f"hypervisors.{node.hypervisor}.bridges or use one of {', '.join(sorted(hypervisor.bridges))}"
        )
    for path, cluster, node in _all_nodes(site):
        hypervisor = site.hypervisors.get(node.hypervisor)
        bridge = hypervisor.bridges.get(node.bridge or cluster.bridge) if hypervisor else None
        if bridge is None or not bridge.vlans:
            continue
        wanted = set(node.networks.vlans) | ({node.networks.routable.vlan} if node.networks.routable else set())
        for vlan in sorted(wanted - set(bridge.vlans)):
            yield (*path, "networks"), (
                f"VLAN {vlan} is not allowed on bridge {node.bridge or cluster.bridge!r} of {node.hypervisor!r}: "
                f"add it to hypervisors.{node.hypervisor}.bridges.{node.bridge or cluster.bridge}.vlans"
            )


def unique_vm_ids(site: Site) -> Iterator[Problem]:
    seen: dict[tuple[str, int], str] = {}
    for path, _, node in _all_nodes(site):
        # VM ids are unique per Proxmox cluster; hypervisors of one site form one Proxmox cluster.
        owner = seen.setdefault(("site", node.vm_id), ".".join(map(str, path)))
        if owner != ".".join(map(str, path)):
            yield (*path, "vm_id"), f"VM id {node.vm_id} is already used by {owner}: give each VM its own id"


def _node_addresses(node) -> Iterator[tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    if node.networks.maintenance_ip:
        yield "networks.maintenance_ip", ipaddress.ip_address(node.networks.maintenance_ip)
    for vlan, interface in node.networks.vlans.items():
        yield f"networks.vlans.{vlan}.address", ipaddress.ip_interface(interface.address).ip
    if node.networks.routable:
        yield "networks.routable.address", ipaddress.ip_interface(node.networks.routable.address).ip


def nodes_reachable(site: Site) -> Iterator[Problem]:
    for path, _, node in _all_nodes(site):
        if next(_node_addresses(node), None) is None:
            yield (*path, "networks"), (
                "the node has no address: give it networks.maintenance_ip, a VLAN interface under networks.vlans "
                "or networks.routable"
            )


def _vips(site: Site) -> Iterator[tuple[tuple, ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    for cluster_name, cluster in site.clusters.items():
        yield ("clusters", cluster_name, "endpoint_vip"), ipaddress.ip_address(cluster.endpoint_vip)


def _used_addresses(site: Site) -> Iterator[tuple[tuple, ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    """Every address of the site (cluster VIPs first, then nodes), with the field path that holds it."""
    yield from _vips(site)
    for path, _, node in _all_nodes(site):
        for field, address in _node_addresses(node):
            yield (*path, *field.split(".")), address


def unique_addresses(site: Site) -> Iterator[Problem]:
    seen: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, tuple] = {}
    for path, address in _used_addresses(site):
        owner = seen.setdefault(address, path)
        if owner != path:
            yield path, (f"address {address} is already used by {'.'.join(map(str, owner))}: "
                         f"give each address to one node or cluster")


def pools_clear_of_nodes(site: Site) -> Iterator[Problem]:
    used = list(_used_addresses(site))
    for cluster_name, cluster in site.clusters.items():
        pools = [(name, ipaddress.ip_network(cidr)) for name, cidrs in cluster.cilium.pools.items() for cidr in cidrs]
        for name, pool in pools:
            for owner, address in used:
                if address in pool:
                    yield ("clusters", cluster_name, "cilium", "pools", name), (
                        f"LoadBalancer pool {pool} contains {address}, used by {'.'.join(map(str, owner))}: "
                        f"Cilium would hand that address to a Service; shrink the pool or move the address"
                    )
        for index, (name, pool) in enumerate(pools):
            for other_name, other in pools[index + 1:]:
                if pool.overlaps(other):
                    yield ("clusters", cluster_name, "cilium", "pools", name), (
                        f"pool {name} ({pool}) overlaps pool {other_name} ({other}): give each pool its own range"
                    )
