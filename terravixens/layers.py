"""Stack (layer) names, in apply order. Pure: used by the stacks and by CLI commands that must not start jsii."""
from __future__ import annotations

from terravixens.config.model import Site

HYPERVISORS = "hypervisors"


def platform_stack_name(cluster_name: str) -> str:
    return f"platform-{cluster_name}"


def gitops_stack_name(cluster_name: str) -> str:
    return f"gitops-{cluster_name}"


def stack_names(site: Site) -> list[str]:
    """L0 first, then per cluster its platform stack and its GitOps stack (which reads the platform state), then the
    L2 stacks when the site has standalone nodes: `standalone`, then one `standalone-<host>` per nested pve host
    with guests, each after the stack that creates its host (terravixens.standalone.layout)."""
    from terravixens.standalone.layout import standalone_layers

    names = [HYPERVISORS]
    for cluster in sorted(site.clusters):
        names += [platform_stack_name(cluster), gitops_stack_name(cluster)]
    return names + list(standalone_layers(site))
