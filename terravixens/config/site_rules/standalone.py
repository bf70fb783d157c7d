"""Rules of the `standalone` section that need the whole site: each yields (field path, message) problems.

`problems(site)` is the one entry point the site's cross-reference check calls; every rule is a generator so that
all problems are reported at once. References to specs and postures live in other files and are resolved later
(`terravixens.standalone.catalog`); ssh keys and tokens only at serve/apply time (`terravixens.standalone.secrets`).
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING

from terravixens.inputs import shown

if TYPE_CHECKING:
    from terravixens.config.model import Site
    from terravixens.config.standalone import StandaloneNode

Problem = tuple[tuple[str | int, ...], str]
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def problems(site: Site) -> Iterator[Problem]:
    yield from fields_of_their_type(site)
    yield from names_distinct_from_hypervisors(site)
    yield from known_parents(site)
    yield from parents_host_guests(site)
    yield from no_parent_cycles(site)
    yield from complete_presets(site)
    yield from known_presets(site)
    yield from reachable(site)
    yield from bridges_on_parent(site)
    yield from unique_vm_ids(site)
    yield from unique_addresses(site)
    yield from clear_of_pools(site)
    yield from spec_server_given(site)


def _nodes(site: Site) -> Iterator[tuple[tuple, str, StandaloneNode]]:
    for name, node in site.standalone.nodes.items():
        yield ("standalone", "nodes", name), name, node


def fields_of_their_type(site: Site) -> Iterator[Problem]:
    for path, _, node in _nodes(site):
        if node.type == "ct":
            if node.image is not None:
                yield (*path, "image"), (f"a ct boots from a template, not an image (got {shown(node.image)}): "
                                         f"use 'template: STORAGE:vztmpl/FILE', or make the node a vm")
            elif node.template is None:
                yield (*path, "template"), ("a ct needs 'template', the container template, e.g. "
                                            "'local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst'")
            continue
        if node.template is not None:
            yield (*path, "template"), (f"a {node.type} boots from an image, not a template (got "
                                        f"{shown(node.template)}): use 'image', or make the node a ct")
        elif node.image is None:
            yield (*path, "image"), (f"a {node.type} needs 'image', a cloud image volume, e.g. "
                                     f"'local:import/debian-12-genericcloud-amd64.qcow2'")
        if node.unprivileged is not None:
            yield (*path, "unprivileged"), f"applies to containers only: remove it from this {node.type}"
        if node.bridges and node.type != "pve":
            yield (*path, "bridges"), (f"declares a nested hypervisor's bridges: only a pve node has them, "
                                       f"not a {node.type}; remove it")


def names_distinct_from_hypervisors(site: Site) -> Iterator[Problem]:
    for path, name, _ in _nodes(site):
        if name in site.hypervisors:
            yield path, (f"{shown(name)} also names a hypervisor: a parent reference would be ambiguous; rename the "
                         f"standalone node")


def known_parents(site: Site) -> Iterator[Problem]:
    nodes = site.standalone.nodes
    for path, _, node in _nodes(site):
        if node.parent not in site.hypervisors and node.parent not in nodes:
            pves = sorted(site.hypervisors) + sorted(n for n, other in nodes.items() if other.type == "pve")
            yield (*path, "parent"), (f"unknown parent {shown(node.parent)}: use a hypervisor or a standalone pve "
                                      f"node ({', '.join(pves) or 'none declared'})")


def parents_host_guests(site: Site) -> Iterator[Problem]:
    nodes = site.standalone.nodes
    for path, _, node in _nodes(site):
        parent = nodes.get(node.parent)
        if node.parent not in site.hypervisors and parent is not None and parent.type != "pve":
            yield (*path, "parent"), (f"parent {shown(node.parent)} is a {parent.type}, which cannot host guests: "
                                      f"use a hypervisor or a standalone node of type pve")


def no_parent_cycles(site: Site) -> Iterator[Problem]:
    nodes = site.standalone.nodes
    reported: set[str] = set()
    for start in sorted(nodes):
        chain, current = [start], nodes[start].parent
        while current in nodes and current not in chain and current not in site.hypervisors:
            chain.append(current)
            current = nodes[current].parent
        if current in chain and current not in site.hypervisors and current not in reported:
            cycle = chain[chain.index(current):]
            reported.update(cycle)
            first = min(cycle)
            ordered = cycle[cycle.index(first):] + cycle[:cycle.index(first)]
            yield ("standalone", "nodes", first, "parent"), (
                f"parent cycle {' -> '.join([*ordered, first])}: every chain of parents must end at a hypervisor")


def complete_presets(site: Site) -> Iterator[Problem]:
    from terravixens.config.standalone import DEFAULT_PRESETS

    for name, preset in site.standalone.presets.items():
        if name in DEFAULT_PRESETS:
            continue
        missing = [field for field in ("cores", "memory_mib", "disk_gib") if getattr(preset, field) is None]
        if missing:
            yield ("standalone", "presets", name), (
                f"new preset {shown(name)} lacks {', '.join(missing)}: a preset that does not override a shipped "
                f"one (vm-xsmall … vm-xlarge) gives cores, memory_mib and disk_gib")


def known_presets(site: Site) -> Iterator[Problem]:
    presets = site.standalone.effective_presets()
    for path, _, node in _nodes(site):
        if node.preset not in presets:
            yield (*path, "preset"), (f"unknown preset {shown(node.preset)}: use one of {', '.join(sorted(presets))} "
                                      f"or define it under standalone.presets")


def reachable(site: Site) -> Iterator[Problem]:
    for path, _, node in _nodes(site):
        if not node.networks.interfaces():
            yield (*path, "networks"), ("the node has no address: give it networks.untagged or a VLAN under "
                                        "networks.vlans ({address: 10.11.1.50/24, gateway: 10.11.1.1})")


def _parent_bridges(site: Site, parent: str):
    if parent in site.hypervisors:
        return site.hypervisors[parent].bridges
    node = site.standalone.nodes.get(parent)
    return node.bridges if node is not None and node.type == "pve" else {}


def bridges_on_parent(site: Site) -> Iterator[Problem]:
    for path, _, node in _nodes(site):
        bridges = _parent_bridges(site, node.parent)
        where = (f"hypervisors.{node.parent}.bridges" if node.parent in site.hypervisors
                 else f"standalone.nodes.{node.parent}.bridges")
        if not bridges:
            continue
        if node.bridge not in bridges:
            yield (*path, "bridge"), (f"bridge {shown(node.bridge)} is not declared on parent {shown(node.parent)}: "
                                      f"declare it under {where} or use one of {', '.join(sorted(bridges))}")
            continue
        allowed = bridges[node.bridge].vlans
        for vlan in sorted(node.networks.vlans):
            if allowed and vlan not in allowed:
                yield (*path, "networks", "vlans", vlan), (
                    f"VLAN {vlan} is not allowed on bridge {shown(node.bridge)} of {shown(node.parent)}: add it to "
                    f"{where}.{node.bridge}.vlans")


def _proxmox_cluster(site: Site, node: StandaloneNode) -> str:
    """VM ids are unique per Proxmox cluster: the site's hypervisors form one; each nested pve host is its own."""
    return "site" if node.parent in site.hypervisors else f"standalone.nodes.{node.parent}"


def unique_vm_ids(site: Site) -> Iterator[Problem]:
    seen: dict[tuple[str, int], str] = {}
    for cluster_name, cluster in site.clusters.items():
        for node_name, (role, node) in cluster.nodes().items():
            role_map = "control_planes" if role == "controlplane" else "workers"
            seen.setdefault(("site", node.vm_id), f"clusters.{cluster_name}.{role_map}.{node_name}")
    for path, name, node in _nodes(site):
        here = ".".join(path)
        owner = seen.setdefault((_proxmox_cluster(site, node), node.vm_id), here)
        if owner != here:
            yield (*path, "vm_id"), (f"VM id {node.vm_id} is already used by {owner} on the same Proxmox cluster: "
                                     f"give each guest its own id")


def _address(interface: str) -> IpAddress:
    return ipaddress.ip_interface(interface).ip


def _cluster_addresses(site: Site) -> Iterator[tuple[str, IpAddress]]:
    for cluster_name, cluster in site.clusters.items():
        yield f"clusters.{cluster_name}.endpoint_vip", ipaddress.ip_address(cluster.endpoint_vip)
        for node_name, (role, node) in cluster.nodes().items():
            base = f"clusters.{cluster_name}.{'control_planes' if role == 'controlplane' else 'workers'}.{node_name}"
            networks = node.networks
            if networks.maintenance_ip:
                yield f"{base}.networks.maintenance_ip", ipaddress.ip_address(networks.maintenance_ip)
            for vlan, interface in networks.vlans.items():
                yield f"{base}.networks.vlans.{vlan}.address", _address(interface.address)
            if networks.routable:
                yield f"{base}.networks.routable.address", _address(networks.routable.address)


def _standalone_addresses(site: Site) -> Iterator[tuple[tuple, IpAddress]]:
    for path, _, node in _nodes(site):
        if node.networks.untagged:
            yield (*path, "networks", "untagged", "address"), _address(node.networks.untagged.address)
        for vlan, interface in sorted(node.networks.vlans.items()):
            yield (*path, "networks", "vlans", vlan, "address"), _address(interface.address)


def unique_addresses(site: Site) -> Iterator[Problem]:
    seen: dict[IpAddress, str] = {}
    for owner, address in _cluster_addresses(site):
        seen.setdefault(address, owner)
    for path, address in _standalone_addresses(site):
        here = ".".join(map(str, path))
        owner = seen.setdefault(address, here)
        if owner != here:
            yield path, f"address {address} is already used by {owner}: give each address to one node"


def clear_of_pools(site: Site) -> Iterator[Problem]:
    for cluster_name, cluster in site.clusters.items():
        for pool_name, cidrs in cluster.cilium.pools.items():
            for cidr in cidrs:
                pool = ipaddress.ip_network(cidr)
                for path, address in _standalone_addresses(site):
                    if address in pool:
                        yield path, (f"address {address} is inside LoadBalancer pool {pool} of "
                                     f"clusters.{cluster_name}.cilium.pools.{pool_name}: Cilium would hand it to a "
                                     f"Service; move the node or shrink the pool")


def spec_server_given(site: Site) -> Iterator[Problem]:
    """Cloud-init tells every node where to pull its spec from at create time (ADR 0026): no URL, no L2 stack."""
    if site.standalone.nodes and site.standalone.spec_server is None:
        yield ("standalone", "spec_server"), ("is missing: the standalone nodes are told at create time where to pull "
                                              "their spec from; add spec_server: {url: https://specs.lab.internal:8443}")
