"""Addresses that can work: every node reachable and gateways inside their subnet (every machine, cluster or
standalone), one subnet per VLAN in a cluster, and the endpoint VIP inside the control planes' subnet on the
management VLAN.

A VLAN's subnet is not declared in the site: it is the network most of the cluster's interfaces on that VLAN are
in (ties: the first node by name). An interface outside it cannot talk to its peers on that VLAN without a router.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterator

from terravixens.config.model import Site, parse_address
from terravixens.config.site_rules.walk import (
    Finding,
    Interface,
    cluster_nodes,
    interfaces,
    machines,
)
from terravixens.roles import Role


def nodes_reachable(site: Site) -> Iterator[Finding]:
    for machine in machines(site):
        if not machine.addresses:
            yield (*machine.path, "networks"), f"the node has no address: give it {machine.address_fields}"


def gateways_reachable(site: Site) -> Iterator[Finding]:
    for machine in machines(site):
        for interface in machine.interfaces:
            if interface.gateway is None:
                continue
            gateway = parse_address(interface.gateway)
            subnet = interface.address.network
            if gateway not in subnet:
                yield (
                    (*interface.path, "gateway"),
                    (
                        f"gateway {gateway} is outside the interface's subnet {subnet} (address {interface.address}): "
                        f"the node could not reach it; use a gateway inside {subnet}, or correct the address' prefix "
                        f"length"
                    ),
                )
            elif gateway == interface.address.ip:
                yield (
                    (*interface.path, "gateway"),
                    (f"gateway {gateway} is the node's own address: use the router's address in {subnet}"),
                )


def _vlan_members(site: Site, cluster_name: str) -> dict[tuple[int, int], list[tuple[str, Interface]]]:
    """The cluster's interfaces by (VLAN, IP version), nodes by name."""
    members: dict[tuple[int, int], list[tuple[str, Interface]]] = {}
    for at in sorted(cluster_nodes(site, cluster_name), key=lambda item: item.name):
        for interface in interfaces(at):
            if interface.vlan is None:  # only a standalone node's untagged NIC has none
                continue
            members.setdefault((interface.vlan, interface.address.version), []).append((at.name, interface))
    return members


def _holders(members: list[tuple[str, Interface]], subnet: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str:
    names = sorted({name for name, interface in members if interface.address.network == subnet})
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def vlan_subnets(site: Site) -> Iterator[Finding]:
    for cluster_name in site.clusters:
        for (vlan, _), members in sorted(_vlan_members(site, cluster_name).items()):
            counts = Counter(interface.address.network for _, interface in members)
            if len(counts) < 2:
                continue
            subnet = counts.most_common(1)[0][0]
            for _, interface in members:
                if interface.address.network != subnet:
                    yield (
                        (*interface.path, "address"),
                        (
                            f"address {interface.address} is outside VLAN {vlan}'s subnet {subnet} (that of "
                            f"{_holders(members, subnet)}): nodes on one VLAN share its subnet; use an address in "
                            f"{subnet} with the same prefix length, or another VLAN"
                        ),
                    )


def _management_interfaces(site: Site, cluster_name: str) -> Iterator[tuple[str, Interface | None]]:
    """Each control plane with its interface on the management VLAN (None when it has none)."""
    cluster = site.clusters[cluster_name]
    for at in cluster_nodes(site, cluster_name):
        if at.role is Role.CONTROLPLANE:
            found = [i for i in interfaces(at) if i.vlan == cluster.management_vlan]
            yield at.name, (found[0] if found else None)


def management_vlan_present(site: Site) -> Iterator[Finding]:
    for cluster_name, cluster in site.clusters.items():
        vlan = cluster.management_vlan
        pairs = list(_management_interfaces(site, cluster_name))
        missing = [name for name, interface in pairs if interface is None]
        fix = (
            f"give every control plane an address on VLAN {vlan} (networks.vlans.{vlan}), or set "
            f"clusters.{cluster_name}.management_vlan to a VLAN they all have"
        )
        if missing and len(missing) == len(pairs):
            yield (
                ("clusters", cluster_name, "management_vlan"),
                (
                    f"no control plane has an address on the management VLAN {vlan}: the endpoint VIP "
                    f"{cluster.endpoint_vip} lives on that VLAN, so no node would ever carry it; {fix}"
                ),
            )
            continue
        for name in missing:
            yield (
                ("clusters", cluster_name, "control_planes", name, "networks"),
                (
                    f"control plane {name} has no address on the management VLAN {vlan}: the endpoint VIP "
                    f"{cluster.endpoint_vip} moves between the control planes on that VLAN and could never move to "
                    f"this one; {fix}"
                ),
            )


def vip_in_management_subnet(site: Site) -> Iterator[Finding]:
    for cluster_name, cluster in site.clusters.items():
        vip = parse_address(cluster.endpoint_vip)
        subnets = sorted(
            {
                interface.address.network
                for _, interface in _management_interfaces(site, cluster_name)
                if interface is not None
            },
            key=str,
        )
        if not subnets:
            continue  # management_vlan_present says why
        inside = [subnet for subnet in subnets if vip in subnet]
        where = ("clusters", cluster_name, "endpoint_vip")
        if not inside:
            yield (
                where,
                (
                    f"endpoint VIP {vip} is outside the control planes' subnet on the management VLAN "
                    f"{cluster.management_vlan} ({', '.join(map(str, subnets))}): Talos puts the VIP on that "
                    f"interface, where clients outside the subnet cannot reach it; pick a free address in {subnets[0]}"
                ),
            )
        elif vip.version == 4 and any(
            vip in (s.network_address, s.broadcast_address) for s in inside if s.prefixlen < 31
        ):
            yield (
                where,
                (
                    f"endpoint VIP {vip} is the network or broadcast address of {inside[0]}: pick a free host "
                    f"address in it"
                ),
            )
