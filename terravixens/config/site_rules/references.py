"""References between sections: a node's hypervisor, its bridge, and the VLANs that bridge lets through."""
from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.model import Site
from terravixens.config.site_rules.walk import Finding, all_nodes
from terravixens.inputs import shown


def known_hypervisors(site: Site) -> Iterator[Finding]:
    for at in all_nodes(site):
        if at.node.hypervisor not in site.hypervisors:
            yield (*at.path, "hypervisor"), (
                f"unknown hypervisor {shown(at.node.hypervisor)}: use one of {', '.join(sorted(site.hypervisors))} "
                f"or add it under 'hypervisors'"
            )


def bridges_exist(site: Site) -> Iterator[Finding]:
    # Past the `hypervisor is None` checks the hypervisor is a key of the site: a DNS label, short and printable.
    for at in all_nodes(site):
        hypervisor = site.hypervisors.get(at.node.hypervisor)
        bridge = at.node.bridge or at.cluster.bridge
        if hypervisor is None or not hypervisor.bridges or bridge in hypervisor.bridges:
            continue
        yield (*at.path, "bridge"), (
            f"bridge {shown(bridge)} is not declared on hypervisor {at.node.hypervisor!r}: declare it under "
            f"hypervisors.{at.node.hypervisor}.bridges or use one of {', '.join(sorted(hypervisor.bridges))}"
        )


def vlans_allowed_on_bridges(site: Site) -> Iterator[Finding]:
    for at in all_nodes(site):
        hypervisor = site.hypervisors.get(at.node.hypervisor)
        name = at.node.bridge or at.cluster.bridge
        bridge = hypervisor.bridges.get(name) if hypervisor else None
        if bridge is None or not bridge.vlans:
            continue
        networks = at.node.networks
        wanted = set(networks.vlans) | ({networks.routable.vlan} if networks.routable else set())
        for vlan in sorted(wanted - set(bridge.vlans)):
            yield (*at.path, "networks"), (
                f"VLAN {vlan} is not allowed on bridge {shown(name)} of {at.node.hypervisor!r}: "
                f"add it to hypervisors.{at.node.hypervisor}.bridges.{name}.vlans"
            )
