"""L1: one Talos cluster: its VMs, machine configuration, bootstrap and kubeconfig."""
from __future__ import annotations

from cdktf import TerraformOutput, TerraformStack
from constructs import Construct

from terravixens.config.model import Site
from terravixens.config.placement import placed_nodes
from terravixens.layers import platform_stack_name
from terravixens.constructs.cluster_config import ClusterConfig, ClusterConfigProps
from terravixens.constructs.control_plane import ControlPlane, ControlPlaneProps
from terravixens.constructs.talos_node import TalosNode, TalosNodeProps
from terravixens.rules import apply_rules
from terravixens.stacks import providers
from terravixens.stacks.backend import declare_backend
from terravixens.stacks.guarded import require_guarded_path
from terravixens.decommission_settings import Decommission


class PlatformStack(TerraformStack):
    """Nodes are constructs named by their stable key, directly under the stack: never under a role."""

    def __init__(self, scope: Construct, site: Site, cluster_name: str, decommission: Decommission | None = None):
        name = platform_stack_name(cluster_name)
        super().__init__(scope, name)
        cluster = site.clusters[cluster_name]
        declare_backend(self, site.state, site.site, name)
        require_guarded_path(self)
        providers.proxmox(self, site.proxmox)
        providers.talos(self)
        self.cluster_config = ClusterConfig(self, "cluster_config", ClusterConfigProps(
            cluster_name=cluster_name, cluster=cluster,
            release_secrets=decommission is not None and decommission.release_secrets,
        ))
        self.nodes: dict[str, TalosNode] = {}
        for node_name, placed in placed_nodes(site, cluster_name).items():
            self.nodes[node_name] = TalosNode(self, node_name, TalosNodeProps(
                placed=placed, cluster=cluster, cluster_config=self.cluster_config,
                **({} if decommission is None else {
                    "reboot_after_reset": decommission.reboot_after_reset,
                    "reset_graceful": node_name not in decommission.non_graceful,
                }),
            ))
        self.control_plane = ControlPlane(self, "control_plane", ControlPlaneProps(
            cluster_name=cluster_name,
            cluster_config=self.cluster_config,
            control_planes={n: self.nodes[n] for n in cluster.control_planes},
            workers={n: self.nodes[n] for n in cluster.workers},
            bootstrap_node=cluster.bootstrap,
        ))
        TerraformOutput(self, "node_addresses", value={n: node.address for n, node in self.nodes.items()})
        apply_rules(self)
