"""L1: one Talos cluster: its VMs, machine configuration, bootstrap and kubeconfig."""

from __future__ import annotations

from cdktf import TerraformOutput

from terravixens.config.placement import placed_nodes
from terravixens.constructs.cluster_config import ClusterConfig, ClusterConfigProps
from terravixens.constructs.control_plane import ControlPlane, ControlPlaneProps
from terravixens.constructs.talos_node import TalosNode, TalosNodeProps
from terravixens.stacks import providers
from terravixens.stacks.base import LayerStack


class PlatformStack(LayerStack):
    """Nodes are constructs named by their stable key, directly under the stack: never under a role."""

    def build(self) -> None:
        site, cluster_name = self.site, self.cluster_name
        cluster = site.clusters[cluster_name]
        decommission = self.options.decommission.get(cluster_name)
        providers.proxmox(self, site.proxmox)
        providers.talos(self)
        self.cluster_config = ClusterConfig(
            self,
            "cluster_config",
            ClusterConfigProps(
                cluster_name=cluster_name,
                cluster=cluster,
                release_secrets=decommission is not None and decommission.release_secrets,
            ),
        )
        self.nodes: dict[str, TalosNode] = {}
        for node_name, placed in placed_nodes(site, cluster_name).items():
            self.nodes[node_name] = TalosNode(
                self,
                node_name,
                TalosNodeProps(
                    placed=placed,
                    cluster=cluster,
                    cluster_config=self.cluster_config,
                    reboot_after_reset=decommission is not None and decommission.reboot_after_reset,
                    reset_graceful=decommission is None or node_name not in decommission.non_graceful,
                ),
            )
        self.control_plane = ControlPlane(
            self,
            "control_plane",
            ControlPlaneProps(
                cluster_name=cluster_name,
                cluster_config=self.cluster_config,
                control_planes={n: self.nodes[n] for n in cluster.control_planes},
                workers={n: self.nodes[n] for n in cluster.workers},
                bootstrap_node=cluster.bootstrap,
            ),
        )
        TerraformOutput(self, "node_addresses", value={n: node.address for n, node in self.nodes.items()})
