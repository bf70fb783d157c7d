"""A platform team's own stack built from terravixens' constructs, without a site file (tests/test_library_use.py;
tests/test_guarded_path.py shows such a stack carries nothing of the app's guarded path)."""

from __future__ import annotations

from cdktf import LocalBackend, TerraformStack

from terravixens._bindings.proxmox.provider import ProxmoxProvider
from terravixens._bindings.talos.provider import TalosProvider
from terravixens.config.model import Cluster, Node, NodeNetworks, VlanInterface
from terravixens.config.model import Hypervisor as HypervisorSpec
from terravixens.config.placement import place
from terravixens.constructs import (
    ClusterConfig,
    ClusterConfigProps,
    ControlPlane,
    ControlPlaneProps,
    Hypervisor,
    HypervisorProps,
    TalosNode,
    TalosNodeProps,
)
from terravixens.rules import apply_rules


class EdgeStack(TerraformStack):
    """A user's own stack: one hypervisor and a single-node cluster, with the terravixens rules on."""

    def __init__(self, scope, id):
        super().__init__(scope, id)
        LocalBackend(self, path="edge.tfstate")
        ProxmoxProvider(self, "proxmox", endpoint="https://127.0.0.1:8006/")
        TalosProvider(self, "talos")
        spec = HypervisorSpec(node_name="edge1")
        Hypervisor(self, "edge1", HypervisorProps(name="edge1", spec=spec, talos_versions=frozenset({"v1.11.5"})))
        node = Node(
            hypervisor="edge1", vm_id=900, networks=NodeNetworks(vlans={111: VlanInterface(address="127.0.10.2/24")})
        )
        cluster = Cluster(
            endpoint_vip="127.0.10.1",
            talos_version="v1.11.5",
            kubernetes_version="1.34.2",
            control_planes={"solo": node},
        )
        config = ClusterConfig(self, "cluster_config", ClusterConfigProps(cluster_name="edge", cluster=cluster))
        solo = TalosNode(
            self,
            "solo",
            TalosNodeProps(
                placed=place("solo", "controlplane", node, cluster, spec), cluster=cluster, cluster_config=config
            ),
        )
        ControlPlane(
            self,
            "control_plane",
            ControlPlaneProps(
                cluster_name="edge",
                cluster_config=config,
                control_planes={"solo": solo},
                workers={},
                bootstrap_node="solo",
            ),
        )
        apply_rules(self)
