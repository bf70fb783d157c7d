"""What the site rules share: walking every node with its field path, and every address or interface it has."""
from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

from terravixens.config.model import Cluster, Node, Site, parse_address, parse_interface
from terravixens.roles import Role

Path = tuple[str | int, ...]
Finding = tuple[Path, str]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
ROLE_MAPS = ((Role.CONTROLPLANE, "control_planes"), (Role.WORKER, "workers"))


@dataclass(frozen=True)
class NodeAt:
    path: Path
    cluster_name: str
    cluster: Cluster
    name: str
    role: Role
    node: Node

    @property
    def hostname(self) -> str:
        return self.node.hostname or self.name


@dataclass(frozen=True)
class Interface:
    """A VLAN interface of a node (from networks.vlans or networks.routable), with the path of its address."""

    path: Path
    vlan: int
    address: ipaddress.IPv4Interface | ipaddress.IPv6Interface
    gateway: str | None


def dotted(path: Path) -> str:
    return ".".join(map(str, path))


def cluster_nodes(site: Site, cluster_name: str) -> Iterator[NodeAt]:
    cluster = site.clusters[cluster_name]
    for role, role_map in ROLE_MAPS:
        for name, node in getattr(cluster, role_map).items():
            yield NodeAt(("clusters", cluster_name, role_map, name), cluster_name, cluster, name, role, node)


def all_nodes(site: Site) -> Iterator[NodeAt]:
    for cluster_name in site.clusters:
        yield from cluster_nodes(site, cluster_name)


def interfaces(at: NodeAt) -> Iterator[Interface]:
    networks = at.node.networks
    if networks.routable is not None:
        routable = networks.routable
        yield Interface((*at.path, "networks", "routable"), routable.vlan, parse_interface(routable.address),
                        routable.gateway)
    for vlan, interface in networks.vlans.items():
        yield Interface((*at.path, "networks", "vlans", vlan), vlan, parse_interface(interface.address),
                        interface.gateway)


def node_addresses(at: NodeAt) -> Iterator[tuple[Path, Address]]:
    """Every address of a node with the path of the field that holds it: maintenance IP, VLANs, routable."""
    if at.node.networks.maintenance_ip:
        yield (*at.path, "networks", "maintenance_ip"), parse_address(at.node.networks.maintenance_ip)
    for interface in sorted(interfaces(at), key=lambda item: item.path[-2] != "vlans"):
        yield (*interface.path, "address"), interface.address.ip


def used_addresses(site: Site) -> Iterator[tuple[Path, Address]]:
    """Every address of the site (cluster VIPs first, then nodes), with the field path that holds it."""
    for cluster_name, cluster in site.clusters.items():
        yield ("clusters", cluster_name, "endpoint_vip"), parse_address(cluster.endpoint_vip)
    for at in all_nodes(site):
        yield from node_addresses(at)
