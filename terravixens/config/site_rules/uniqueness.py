"""What must be unique: VM ids per Proxmox cluster, addresses and MACs in the site, hostnames in a cluster, VM names
per hypervisor. VM ids, addresses and MACs are checked over every machine (cluster and standalone nodes alike)."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.model import Site
from terravixens.config.site_rules.walk import (
    SITE_PROXMOX,
    Address,
    Finding,
    NodeAt,
    Path,
    all_nodes,
    cluster_nodes,
    dotted,
    machines,
    used_addresses,
)
from terravixens.inputs import shown


def unique_vm_ids(site: Site) -> Iterator[Finding]:
    """VM ids are unique per Proxmox cluster: the site's hypervisors form one, each nested pve node is its own."""
    seen: dict[tuple[str, int], Path] = {}
    for machine in machines(site):
        owner = seen.setdefault((machine.proxmox, machine.vm_id), machine.path)
        if owner != machine.path:
            where = "" if machine.proxmox == SITE_PROXMOX else f" on the same nested Proxmox VE ({machine.proxmox})"
            yield (
                (*machine.path, "vm_id"),
                (f"VM id {machine.vm_id} is already used by {dotted(owner)}{where}: give each VM its own id"),
            )


def unique_addresses(site: Site) -> Iterator[Finding]:
    seen: dict[Address, Path] = {}
    for path, address, _ in used_addresses(site):
        owner = seen.setdefault(address, path)
        if owner != path:
            yield (
                path,
                (f"address {address} is already used by {dotted(owner)}: give each address to one node or cluster"),
            )


def _name_path(at: NodeAt) -> Path:
    """Where to fix a name: the node's `hostname` when it sets one, else the node (its key is the name)."""
    return (*at.path, "hostname") if at.node.hostname else at.path


def unique_hostnames(site: Site) -> Iterator[Finding]:
    for cluster_name in site.clusters:
        seen: dict[str, NodeAt] = {}
        for at in sorted(cluster_nodes(site, cluster_name), key=lambda a: a.name):
            first = seen.setdefault(at.hostname, at)
            if first is at:
                continue
            # Point at whichever of the two chose the name with an explicit `hostname`.
            blamed, other = (first, at) if first.node.hostname and not at.node.hostname else (at, first)
            yield (
                _name_path(blamed),
                (
                    f"hostname {blamed.hostname!r} is also the hostname of {dotted(other.path)}: two machines with one "
                    f"name become one Kubernetes Node and clash in Talos; give each node its own hostname"
                ),
            )


def unique_vm_names(site: Site) -> Iterator[Finding]:
    """Across clusters only: within one cluster, the same name is already a hostname clash (one report is enough)."""
    seen: dict[tuple[str, str], NodeAt] = {}
    for at in all_nodes(site):
        first = seen.setdefault((at.node.hypervisor, at.hostname), at)
        if first is not at and first.cluster_name != at.cluster_name:
            yield (
                _name_path(at),
                (
                    f"VM name {at.hostname!r} on hypervisor {shown(at.node.hypervisor)} is already used by "
                    f"{dotted(first.path)}: Proxmox would show two VMs with one name; give one of them another hostname"
                ),
            )


def unique_mac_addresses(site: Site) -> Iterator[Finding]:
    """A MAC is unique in the site: two VMs with one MAC on one bridge steal each other's frames, and the maintenance
    IP's DHCP reservation would answer both. Standalone nodes join the check once they carry a `mac_address`."""
    seen: dict[str, Path] = {}
    for machine in machines(site):
        if machine.mac_address is None:
            continue
        owner = seen.setdefault(machine.mac_address, machine.path)
        if owner != machine.path:
            yield (
                (*machine.path, "mac_address"),
                (
                    f"MAC {machine.mac_address} is already the MAC of {dotted(owner)}: "
                    f"give each VM its own (e.g. change the last byte)"
                ),
            )
