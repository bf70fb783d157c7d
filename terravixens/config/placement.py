"""Placed nodes: each node of a cluster with everything derived from the site about it, computed once.

The platform stack, the node patches and the upgrade command all need a node's role, its hypervisor, the address
it is managed at, the address it is first contacted at and the network of the managed address. They take a
`PlacedNode` instead of working it out again from the raw model (one fallback chain: terravixens.config.addressing).
"""

from __future__ import annotations

from dataclasses import dataclass

from terravixens.config.addressing import first_contact_address, managed
from terravixens.config.model import Cluster, Hypervisor, Node, Site
from terravixens.roles import Role


@dataclass(frozen=True)
class PlacedNode:
    """name: the node's stable key in the site file; role: its machine type; hypervisor: the spec it runs on."""

    name: str
    role: Role
    node: Node
    hypervisor_name: str
    hypervisor: Hypervisor
    address: str
    first_contact: str
    managed_subnet: str | None

    @property
    def hostname(self) -> str:
        """The machine's hostname and VM name: the site's `hostname`, else the node's key."""
        return self.node.hostname or self.name


def place(name: str, role: Role | str, node: Node, cluster: Cluster, hypervisor: Hypervisor) -> PlacedNode:
    """One node, placed. Library users composing constructs without a site file call this too."""
    where = managed(node.networks, cluster.management_vlan)
    return PlacedNode(
        name=name,
        role=Role(role),
        node=node,
        hypervisor_name=node.hypervisor,
        hypervisor=hypervisor,
        address=where.address,
        first_contact=first_contact_address(node.networks, cluster.management_vlan),
        managed_subnet=where.subnet,
    )


def placed_nodes(site: Site, cluster_name: str) -> dict[str, PlacedNode]:
    """Every node of a cluster by its stable name, sorted by name (never by position in the file)."""
    cluster = site.clusters[cluster_name]
    return {
        name: place(name, role, node, cluster, site.hypervisors[node.hypervisor])
        for name, (role, node) in cluster.nodes().items()
    }
