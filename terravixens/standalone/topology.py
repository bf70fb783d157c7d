"""Each standalone node placed: where it runs (parent chain, tier), its size (preset resolved) and its NICs.

This is the view the L2 stacks are built from, a pure function of a validated site (parents known, no cycles):

    tier 1   a guest of one of the site's hypervisors (the `standalone` stack)
    tier n   a guest of a nested pve node of tier n-1 (one stack per nested host, applied after its parent's tier)

Nodes come out parents first, then by name, so creating in this order and destroying in reverse is always safe.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from terravixens.config.model import Site
from terravixens.config.standalone import StandaloneNode


@dataclass(frozen=True)
class Nic:
    bridge: str
    vlan: int | None
    address: str
    gateway: str | None


@dataclass(frozen=True)
class PlacedGuest:
    """A standalone node placed on its parent (a hypervisor or a nested pve host): its tier, id, size, NICs and spec
    (a cluster's Talos node placed on its hypervisor is config.placement.PlacedNode)."""

    name: str
    type: str
    parent: str
    chain: tuple[str, ...]  # hypervisor first, then each nested pve host down to the parent
    tier: int
    vm_id: int
    cores: int
    memory_mib: int
    disk_gib: int
    nics: tuple[Nic, ...]
    spec: str
    image: str | None
    template: str | None
    unprivileged: bool | None
    tags: tuple[str, ...]

    @property
    def hypervisor(self) -> str:
        return self.chain[0]

    @property
    def address(self) -> str:
        """The node's first address (no prefix): what its spec's network defaults to, and how it is reached."""
        return str(ipaddress.ip_interface(self.nics[0].address).ip)

    @property
    def api_endpoint(self) -> str | None:
        """For a pve node: the Proxmox API its own guests are created through."""
        if self.type != "pve":
            return None
        host = self.address if ":" not in self.address else f"[{self.address}]"
        return f"https://{host}:8006/"


def _chain(site: Site, name: str) -> tuple[str, ...]:
    nodes = site.standalone.nodes
    chain: list[str] = []
    current = nodes[name].parent
    while current not in site.hypervisors:
        chain.append(current)
        current = nodes[current].parent
    return (current, *reversed(chain))


def _size(name: str, preset: str, field: str, value: int | None) -> int:
    if value is None:  # the site rules refuse a new preset without every size (complete_presets)
        raise ValueError(f"standalone node {name!r}: neither the node nor its preset {preset!r} gives {field}")
    return value


def _placed(site: Site, name: str, node: StandaloneNode) -> PlacedGuest:
    preset = site.standalone.effective_presets()[node.preset]
    chain = _chain(site, name)
    nics = tuple(
        Nic(node.bridge, vlan, interface.address, interface.gateway) for vlan, interface in node.networks.interfaces()
    )
    return PlacedGuest(
        name=name,
        type=node.type,
        parent=node.parent,
        chain=chain,
        tier=len(chain),
        vm_id=node.vm_id,
        cores=_size(name, node.preset, "cores", node.cores or preset.cores),
        memory_mib=_size(name, node.preset, "memory_mib", node.memory_mib or preset.memory_mib),
        disk_gib=_size(name, node.preset, "disk_gib", node.disk_gib or preset.disk_gib),
        nics=nics,
        spec=node.spec,
        image=node.image,
        template=node.template,
        unprivileged=(node.unprivileged is not False) if node.type == "ct" else None,
        tags=tuple(sorted({tag.lower() for tag in node.tags})),
    )


def placement(site: Site) -> dict[str, PlacedGuest]:
    """Every standalone node, parents before children (by tier, then by name)."""
    placed = [_placed(site, name, node) for name, node in site.standalone.nodes.items()]
    return {node.name: node for node in sorted(placed, key=lambda node: (node.tier, node.name))}
