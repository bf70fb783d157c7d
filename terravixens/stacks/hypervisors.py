"""L0: the Proxmox hosts of the site."""

from __future__ import annotations

from terravixens.config.model import Site
from terravixens.constructs.hypervisor import Hypervisor, HypervisorProps
from terravixens.stacks import providers
from terravixens.stacks.base import LayerStack


def talos_versions_by_hypervisor(site: Site) -> dict[str, frozenset[str]]:
    """Each hypervisor downloads the image of every Talos version that a VM on it boots from."""
    versions: dict[str, set[str]] = {name: set() for name in site.hypervisors}
    for cluster in site.clusters.values():
        for _, node in cluster.nodes().values():
            versions[node.hypervisor].add(cluster.talos_version)
    return {name: frozenset(found) for name, found in versions.items()}


class HypervisorsStack(LayerStack):
    def build(self) -> None:
        site = self.site
        providers.proxmox(self, site.proxmox)
        versions = talos_versions_by_hypervisor(site)
        self.hypervisors = {
            hv_name: Hypervisor(
                self, hv_name, HypervisorProps(name=hv_name, spec=spec, talos_versions=versions[hv_name])
            )
            for hv_name, spec in sorted(site.hypervisors.items())
        }
