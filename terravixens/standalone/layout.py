"""The L2 stacks of a site: which standalone nodes each one creates, through which Proxmox API, after which stack.

    standalone          the guests of the site's hypervisors (the site's Proxmox API, like L0 and L1)
    standalone-<host>   the guests of one nested pve node <host>, through that host's own API; applied after the
                        stack that creates <host> (`standalone`, or `standalone-<its parent>`)

One stack per nested host, not per tier: each stack talks to exactly one Proxmox API with that API's credentials,
and a host's guests are created, planned and destroyed with that host alone. Stack names are public API (state
keys, `terravixens deploy LAYER`): they come from stable node names only. Pure: no cdktf import (the CLI lists
layers without starting jsii). See docs/adr/0025-standalone-stack-layout.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from terravixens.config.model import Datastores, Site
from terravixens.standalone.topology import PlacedGuest, placement

STANDALONE = "standalone"
# A nested Proxmox VE host has the datastores of a default installation: `local` (a directory: snippets, imported
# images, container templates) and `local-lvm` (guest disks).
NESTED_DATASTORES = Datastores()


def standalone_stack_name(host: str | None) -> str:
    """`standalone` for the guests of the site's hypervisors, `standalone-<host>` for those of a nested pve node."""
    return STANDALONE if host is None else f"{STANDALONE}-{host}"


@dataclass(frozen=True)
class GuestHost:
    """Where a stack's guests run: a hypervisor of the site (host None) or a nested pve node."""

    host: str | None  # the nested pve node, or None for the site's hypervisors
    endpoint: str | None  # the nested host's API (None: the site's proxmox.endpoint)
    address: str | None  # the nested host's address, for the provider's SSH (snippet uploads)


@dataclass(frozen=True)
class StandaloneLayer:
    name: str
    host: GuestHost
    after: str | None  # the L2 stack that creates the host (None: only the hypervisors layer)
    nodes: tuple[PlacedGuest, ...]  # parents first, then by name (topology order)

    def proxmox_node_name(self, site: Site, node: PlacedGuest) -> str:
        """The Proxmox node the guest runs on: the hypervisor's node_name, or the nested host's name."""
        return site.hypervisors[node.parent].node_name if node.parent in site.hypervisors else node.parent

    def datastores(self, site: Site, node: PlacedGuest) -> Datastores:
        """The parent hypervisor's datastores, the guest's disks on the storage it names (a site rule checked that
        the hypervisor has it, with the content it needs); a nested host's guests get a default installation's."""
        if node.parent not in site.hypervisors:
            return NESTED_DATASTORES
        datastores = site.hypervisors[node.parent].datastores
        storage = site.standalone.nodes[node.name].storage if node.name in site.standalone.nodes else None
        return datastores if storage is None else datastores.model_copy(update={"vm": storage})


def standalone_layers(site: Site) -> dict[str, StandaloneLayer]:
    """Every L2 stack in apply order (`standalone` first, then nested hosts by tier and name); none without nodes.

    A nested pve node without guests has no stack of its own."""
    placed = placement(site)
    if not placed:
        return {}
    by_host: dict[str | None, list[PlacedGuest]] = {}
    for node in placed.values():
        host = None if node.parent in site.hypervisors else node.parent
        by_host.setdefault(host, []).append(node)
    layers: dict[str, StandaloneLayer] = {}
    if None in by_host:
        layers[STANDALONE] = StandaloneLayer(STANDALONE, GuestHost(None, None, None), None, tuple(by_host[None]))
    nested = sorted((host for host in by_host if host is not None), key=lambda name: (placed[name].tier, name))
    for host in nested:
        host_node = placed[host]
        grandparent = None if host_node.parent in site.hypervisors else host_node.parent
        name = standalone_stack_name(host)
        layers[name] = StandaloneLayer(
            name,
            GuestHost(host, host_node.api_endpoint, host_node.address),
            standalone_stack_name(grandparent),
            tuple(by_host[host]),
        )
    return layers


def layer_of_node(site: Site) -> dict[str, str]:
    """Standalone node -> the L2 stack that creates it."""
    return {node.name: layer.name for layer in standalone_layers(site).values() for node in layer.nodes}
