"""Rules of the `standalone` section alone: node types, parents, presets, the spec server. Each yields
(field path, message) findings.

What standalone nodes share with cluster nodes — unique VM ids per Proxmox cluster, unique addresses, LoadBalancer
pools, bridges and VLANs on the host, an address at all, gateways — is checked by the same rules for both, over
`walk.machines` (uniqueness, pools, references, subnets). References to specs and postures live in other files and
are resolved later (`terravixens.standalone.catalog`); ssh keys and tokens only at serve/apply time
(`terravixens.standalone.secrets`).
"""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.config.model import Site
from terravixens.config.site_rules.walk import Finding, standalone_nodes
from terravixens.config.standalone import DEFAULT_PRESETS
from terravixens.inputs import shown


def fields_of_their_type(site: Site) -> Iterator[Finding]:
    for at in standalone_nodes(site):
        path, node = at.path, at.node
        if node.type == "ct":
            if node.image is not None:
                yield (
                    (*path, "image"),
                    (
                        f"a ct boots from a template, not an image (got {shown(node.image)}): "
                        f"use 'template: STORAGE:vztmpl/FILE', or make the node a vm"
                    ),
                )
            elif node.template is None:
                yield (
                    (*path, "template"),
                    (
                        "a ct needs 'template', the container template, e.g. "
                        "'local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst'"
                    ),
                )
            continue
        if node.template is not None:
            yield (
                (*path, "template"),
                (
                    f"a {node.type} boots from an image, not a template (got "
                    f"{shown(node.template)}): use 'image', or make the node a ct"
                ),
            )
        elif node.image is None:
            yield (
                (*path, "image"),
                (
                    f"a {node.type} needs 'image', a cloud image volume, e.g. "
                    f"'local:import/debian-12-genericcloud-amd64.qcow2'"
                ),
            )
        if node.unprivileged is not None:
            yield (*path, "unprivileged"), f"applies to containers only: remove it from this {node.type}"
        if node.bridges and node.type != "pve":
            yield (
                (*path, "bridges"),
                (f"declares a nested hypervisor's bridges: only a pve node has them, not a {node.type}; remove it"),
            )


def names_distinct_from_hypervisors(site: Site) -> Iterator[Finding]:
    for at in standalone_nodes(site):
        if at.name in site.hypervisors:
            yield (
                at.path,
                (
                    f"{shown(at.name)} also names a hypervisor: a parent reference would be ambiguous; "
                    f"rename the standalone node"
                ),
            )


def known_parents(site: Site) -> Iterator[Finding]:
    nodes = site.standalone.nodes
    for at in standalone_nodes(site):
        path, node = at.path, at.node
        if node.parent not in site.hypervisors and node.parent not in nodes:
            pves = sorted(site.hypervisors) + sorted(n for n, other in nodes.items() if other.type == "pve")
            yield (
                (*path, "parent"),
                (
                    f"unknown parent {shown(node.parent)}: use a hypervisor or a standalone pve "
                    f"node ({', '.join(pves) or 'none declared'})"
                ),
            )


def parents_host_guests(site: Site) -> Iterator[Finding]:
    nodes = site.standalone.nodes
    for at in standalone_nodes(site):
        path, node = at.path, at.node
        parent = nodes.get(node.parent)
        if node.parent not in site.hypervisors and parent is not None and parent.type != "pve":
            yield (
                (*path, "parent"),
                (
                    f"parent {shown(node.parent)} is a {parent.type}, which cannot host guests: "
                    f"use a hypervisor or a standalone node of type pve"
                ),
            )


def no_parent_cycles(site: Site) -> Iterator[Finding]:
    nodes = site.standalone.nodes
    reported: set[str] = set()
    for start in sorted(nodes):
        chain, current = [start], nodes[start].parent
        while current in nodes and current not in chain and current not in site.hypervisors:
            chain.append(current)
            current = nodes[current].parent
        if current in chain and current not in site.hypervisors and current not in reported:
            cycle = chain[chain.index(current) :]
            reported.update(cycle)
            first = min(cycle)
            ordered = cycle[cycle.index(first) :] + cycle[: cycle.index(first)]
            yield (
                ("standalone", "nodes", first, "parent"),
                (f"parent cycle {' -> '.join([*ordered, first])}: every chain of parents must end at a hypervisor"),
            )


def complete_presets(site: Site) -> Iterator[Finding]:
    for name, preset in site.standalone.presets.items():
        if name in DEFAULT_PRESETS:
            continue
        missing = [field for field in ("cores", "memory_mib", "disk_gib") if getattr(preset, field) is None]
        if missing:
            yield (
                ("standalone", "presets", name),
                (
                    f"new preset {shown(name)} lacks {', '.join(missing)}: a preset that does not override a shipped "
                    f"one (vm-xsmall … vm-xlarge) gives cores, memory_mib and disk_gib"
                ),
            )


def known_presets(site: Site) -> Iterator[Finding]:
    presets = site.standalone.effective_presets()
    for at in standalone_nodes(site):
        path, node = at.path, at.node
        if node.preset not in presets:
            yield (
                (*path, "preset"),
                (
                    f"unknown preset {shown(node.preset)}: use one of {', '.join(sorted(presets))} "
                    f"or define it under standalone.presets"
                ),
            )


def spec_server_given(site: Site) -> Iterator[Finding]:
    """Cloud-init tells every node where to pull its spec from at create time (ADR 0026): no URL, no L2 stack."""
    if site.standalone.nodes and site.standalone.spec_server is None:
        yield (
            ("standalone", "spec_server"),
            (
                "is missing: the standalone nodes are told at create time where to pull "
                "their spec from; add spec_server: {url: https://specs.lab.internal:8443}"
            ),
        )
