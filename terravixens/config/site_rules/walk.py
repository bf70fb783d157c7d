"""What the site rules share: one walk over every machine the site places, with its field path and what it holds.

Two kinds of nodes live in a site: cluster nodes (`clusters.<c>.control_planes|workers.<n>`, Talos VMs on a
hypervisor) and standalone nodes (`standalone.nodes.<n>`, VMs and containers on a hypervisor or a nested Proxmox VE
host). Rules about what they have in common — VM ids, addresses, MACs, bridges and VLANs, LoadBalancer pools —
read both through `machines(site)`, so each such rule is written once and names the field the user has to edit
whichever kind of node it is (`Machine.path` is the node's own path). Rules about one kind read `cluster_nodes` /
`all_nodes` (`NodeAt`) or `standalone_nodes` (`StandaloneAt`), the same walk's two halves.
"""

from __future__ import annotations

import ipaddress
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from terravixens.config.model import Bridge, Cluster, Node, Site, parse_address, parse_interface
from terravixens.config.standalone import StandaloneNode
from terravixens.roles import Role

Path = tuple[str | int, ...]
Finding = tuple[Path, str]


class Caution(NamedTuple):
    """A finding that warns instead of refusing: the site is valid, and what it says may still hurt (a hypervisor
    holding a majority of the control planes on a site with too few hypervisors to avoid it: the user has no choice).
    A rule yields it like any finding; the loader refuses only the others, `terravixens validate` and `terravixens
    show` print these (site_rules.cautions, the one place they are read)."""

    path: Path
    message: str


Address = ipaddress.IPv4Address | ipaddress.IPv6Address
ROLE_MAPS = ((Role.CONTROLPLANE, "control_planes"), (Role.WORKER, "workers"))
# VM ids are unique per Proxmox cluster: the site's hypervisors form one; each nested pve node is its own.
SITE_PROXMOX = "the site's hypervisors"


@dataclass(frozen=True)
class NodeAt:
    """A cluster node (a Talos VM) with its field path."""

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
class StandaloneAt:
    """A standalone node (a VM, a container or a nested Proxmox VE host) with its field path."""

    path: Path
    name: str
    node: StandaloneNode


@dataclass(frozen=True)
class Interface:
    """A network interface of a node with the path of its entry: a VLAN interface (networks.vlans.<id>, a cluster
    node's networks.routable), or a standalone node's untagged NIC (vlan None)."""

    path: Path
    vlan: int | None
    address: ipaddress.IPv4Interface | ipaddress.IPv6Interface
    gateway: str | None


@dataclass(frozen=True)
class Machine:
    """What every rule about VMs and containers needs, whichever kind of node holds them.

    proxmox: the Proxmox cluster its VM id lives in; host_kind/host: where it runs ('hypervisor' pve1, or 'parent'
    nest1); bridges/bridges_at: the bridges that host declares ({} when it declares none) and their dotted path;
    addresses: every address with the path of its field; vlans: each VLAN it uses with the path of that entry.
    """

    path: Path
    name: str
    standalone: bool
    vm_id: int
    proxmox: str
    host_kind: str
    host: str
    bridge: str
    bridges: dict[str, Bridge]
    bridges_at: str
    mac_address: str | None
    interfaces: tuple[Interface, ...]
    addresses: tuple[tuple[Path, Address], ...]
    vlans: tuple[tuple[int, Path], ...]
    address_fields: str

    @property
    def bridge_path(self) -> Path:
        return (*self.path, "bridge")


def dotted(path: Path) -> str:
    return ".".join(map(str, path))


# ---------------------------------------------------------------------------------------------------- the two halves
def cluster_nodes(site: Site, cluster_name: str) -> Iterator[NodeAt]:
    cluster = site.clusters[cluster_name]
    for role, role_map in ROLE_MAPS:
        for name, node in getattr(cluster, role_map).items():
            yield NodeAt(("clusters", cluster_name, role_map, name), cluster_name, cluster, name, role, node)


def all_nodes(site: Site) -> Iterator[NodeAt]:
    for cluster_name in site.clusters:
        yield from cluster_nodes(site, cluster_name)


def standalone_nodes(site: Site) -> Iterator[StandaloneAt]:
    for name, node in site.standalone.nodes.items():
        yield StandaloneAt(("standalone", "nodes", name), name, node)


def interfaces(at: NodeAt | StandaloneAt) -> Iterator[Interface]:
    """A cluster node's routable interface then its VLANs; a standalone node's untagged NIC then its VLANs."""
    if isinstance(at, StandaloneAt):
        untagged = at.node.networks.untagged
        if untagged is not None:
            yield Interface(
                (*at.path, "networks", "untagged"), None, parse_interface(untagged.address), untagged.gateway
            )
    elif at.node.networks.routable is not None:
        routable = at.node.networks.routable
        yield Interface(
            (*at.path, "networks", "routable"), routable.vlan, parse_interface(routable.address), routable.gateway
        )
    for vlan, interface in at.node.networks.vlans.items():
        yield Interface(
            (*at.path, "networks", "vlans", vlan), vlan, parse_interface(interface.address), interface.gateway
        )


def node_addresses(
    at: NodeAt | StandaloneAt, found: tuple[Interface, ...] | None = None
) -> Iterator[tuple[Path, Address]]:
    """Every address of a node with the path of the field that holds it: maintenance IP (cluster nodes), then the
    untagged NIC (standalone nodes), the VLANs (by id on standalone nodes), the routable address last."""
    if isinstance(at, NodeAt) and at.node.networks.maintenance_ip:
        yield (*at.path, "networks", "maintenance_ip"), parse_address(at.node.networks.maintenance_ip)
    found = tuple(interfaces(at)) if found is None else found
    untagged = [i for i in found if i.vlan is None]
    vlans = [i for i in found if i.path[-2] == "vlans"]
    if isinstance(at, StandaloneAt):
        vlans.sort(key=lambda item: -1 if item.vlan is None else item.vlan)  # all have one: they are the VLANs
    routable = [i for i in found if i.path[-1] == "routable"]
    for interface in (*untagged, *vlans, *routable):
        yield (*interface.path, "address"), interface.address.ip


# ---------------------------------------------------------------------------------------------------- one walk
def _cluster_machine(site: Site, at: NodeAt) -> Machine:
    hypervisor = site.hypervisors.get(at.node.hypervisor)
    networks = at.node.networks
    vlans = [(vlan, (*at.path, "networks", "vlans", vlan)) for vlan in sorted(networks.vlans)]
    if networks.routable is not None:
        vlans.append((networks.routable.vlan, (*at.path, "networks", "routable", "vlan")))
    found = tuple(interfaces(at))
    return Machine(
        path=at.path,
        name=at.name,
        standalone=False,
        vm_id=at.node.vm_id,
        proxmox=SITE_PROXMOX,
        host_kind="hypervisor",
        host=at.node.hypervisor,
        bridge=at.node.bridge or at.cluster.bridge,
        bridges=hypervisor.bridges if hypervisor else {},
        bridges_at=f"hypervisors.{at.node.hypervisor}.bridges",
        mac_address=at.node.mac_address,
        interfaces=found,
        addresses=tuple(node_addresses(at, found)),
        vlans=tuple(vlans),
        address_fields="networks.maintenance_ip, a VLAN interface under networks.vlans or networks.routable",
    )


def _standalone_machine(site: Site, at: StandaloneAt) -> Machine:
    parent = at.node.parent
    if parent in site.hypervisors:
        proxmox, bridges, where = SITE_PROXMOX, site.hypervisors[parent].bridges, f"hypervisors.{parent}.bridges"
    else:
        nested = site.standalone.nodes.get(parent)
        proxmox, where = f"standalone.nodes.{parent}", f"standalone.nodes.{parent}.bridges"
        bridges = nested.bridges if nested is not None and nested.type == "pve" else {}
    found = tuple(interfaces(at))
    return Machine(
        path=at.path,
        name=at.name,
        standalone=True,
        vm_id=at.node.vm_id,
        proxmox=proxmox,
        host_kind="parent",
        host=parent,
        bridge=at.node.bridge,
        bridges=bridges,
        bridges_at=where,
        mac_address=None,
        interfaces=found,
        addresses=tuple(node_addresses(at, found)),
        vlans=tuple((vlan, (*at.path, "networks", "vlans", vlan)) for vlan in sorted(at.node.networks.vlans)),
        address_fields="networks.untagged or a VLAN under networks.vlans ({address: 10.11.1.50/24, gateway: "
        "10.11.1.1})",
    )


def machines(site: Site) -> tuple[Machine, ...]:
    """Every VM and container of the site: cluster nodes (by cluster, control planes first), then standalone nodes.
    The order matters to rules that name the first owner of a value: a cluster node owns it before a standalone
    node that came later to the site. Computed once per site (the model is frozen) and shared by every rule."""
    cached = _walked.get("site")
    if cached is not None and cached[0]() is site:
        return cached[1]
    walked = tuple(_cluster_machine(site, at) for at in all_nodes(site)) + tuple(
        _standalone_machine(site, at) for at in standalone_nodes(site)
    )
    _walked["site"] = (weakref.ref(site), walked)
    return walked


# The last site walked: the rules of one check share one walk; a weak reference, so the site is not kept alive.
_walked: dict[str, tuple[weakref.ref[Site], tuple[Machine, ...]]] = {}
machines.cache_clear = _walked.clear  # type: ignore[attr-defined]  # as functools' caches spell it (benchmarks)


def used_addresses(site: Site) -> Iterator[tuple[Path, Address, Machine | None]]:
    """Every address of the site with the field path that holds it and the machine it belongs to (None for a
    cluster's endpoint VIP): cluster VIPs first, then every machine's addresses in walk order."""
    for cluster_name, cluster in site.clusters.items():
        yield ("clusters", cluster_name, "endpoint_vip"), parse_address(cluster.endpoint_vip), None
    for machine in machines(site):
        for path, address in machine.addresses:
            yield path, address, machine
