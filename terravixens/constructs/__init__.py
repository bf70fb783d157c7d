"""Public constructs: `(scope, id, props)`, typed props with defaults. Construct ids and logical ids are public API.

Hypervisor      L0: bridges, Talos disk images, automation user/token of one Proxmox host
ClusterConfig   machine secrets and per-role machine configurations of one Talos cluster
TalosNode       one node: its VM and its configuration apply (reset only when it leaves)
ControlPlane    bootstrap once, kubeconfig, talosconfig and the health gate of a cluster
Cilium          the CNI, LoadBalancer pools and L2 announcements
FluxBootstrap   the SOPS age secret, Flux, and its GitRepository/Kustomization
"""

from terravixens.constructs.cilium import Cilium, CiliumProps
from terravixens.constructs.cluster_config import ClusterConfig, ClusterConfigProps
from terravixens.constructs.control_plane import ControlPlane, ControlPlaneProps
from terravixens.constructs.flux_bootstrap import FluxBootstrap, FluxBootstrapProps
from terravixens.constructs.hypervisor import Hypervisor, HypervisorProps
from terravixens.constructs.talos_node import TalosNode, TalosNodeProps

__all__ = [
    "Cilium",
    "CiliumProps",
    "ClusterConfig",
    "ClusterConfigProps",
    "ControlPlane",
    "ControlPlaneProps",
    "FluxBootstrap",
    "FluxBootstrapProps",
    "Hypervisor",
    "HypervisorProps",
    "TalosNode",
    "TalosNodeProps",
]
