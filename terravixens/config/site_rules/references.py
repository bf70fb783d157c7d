"""References between sections: a node's hypervisor, its bridge, and the VLANs that bridge lets through (bridges and
VLANs for every machine, cluster or standalone: `walk.machines`)."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.model import Site
from terravixens.config.site_rules.walk import Finding, all_nodes, machines
from terravixens.inputs import shown


def known_hypervisors(site: Site) -> Iterator[Finding]:
    for at in all_nodes(site):
        if at.node.hypervisor not in site.hypervisors:
            yield (
                (*at.path, "hypervisor"),
                (
                    f"unknown hypervisor {shown(at.node.hypervisor)}: use one of {', '.join(sorted(site.hypervisors))} "
                    f"or add it under 'hypervisors'"
                ),
            )


def bridges_exist(site: Site) -> Iterator[Finding]:
    """A node's bridge is declared on the host it runs on, when that host declares its bridges at all."""
    for machine in machines(site):
        if not machine.bridges or machine.bridge in machine.bridges:
            continue
        yield (
            machine.bridge_path,
            (
                f"bridge {shown(machine.bridge)} is not declared on {machine.host_kind} {shown(machine.host)}: "
                f"declare it under {machine.bridges_at} or use one of {', '.join(sorted(machine.bridges))}"
            ),
        )


def vlans_allowed_on_bridges(site: Site) -> Iterator[Finding]:
    """Each VLAN a node uses is allowed on its bridge, when the bridge lists the VLANs it lets through; reported once
    per VLAN, at the first entry that uses it."""
    for machine in machines(site):
        bridge = machine.bridges.get(machine.bridge)
        if bridge is None or not bridge.vlans:
            continue
        reported: set[int] = set()
        for vlan, path in machine.vlans:
            if vlan in bridge.vlans or vlan in reported:
                continue
            reported.add(vlan)
            yield (
                path,
                (
                    f"VLAN {vlan} is not allowed on bridge {shown(machine.bridge)} of {shown(machine.host)}: add "
                    f"it to {machine.bridges_at}.{machine.bridge}.vlans"
                ),
            )
