"""Cilium: the CNI and kube-proxy replacement of a Talos cluster, installed with Helm."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from cdktf import AssetType, TerraformAsset
from constructs import Construct

from terravixens._bindings.helm.release import Release
from terravixens.config.model import CiliumConfig
from terravixens.constructs.chart_source import chart_arguments
from terravixens.logical_ids import cluster_id, pin

REPOSITORY = "https://helm.cilium.io"
L2_CHART = Path(__file__).resolve().parent.parent / "charts" / "cilium-l2"

# Talos specifics: no kube-proxy (Cilium replaces it) and the API reached through KubePrism on every node, so
# Cilium starts before the VIP or any load balancer exists; Talos mounts cgroups itself and forbids SYS_MODULE.
TALOS_VALUES = {
    "ipam": {"mode": "kubernetes"},
    "kubeProxyReplacement": True,
    "k8sServiceHost": "localhost",
    "k8sServicePort": 7445,
    "cgroup": {"autoMount": {"enabled": False}, "hostRoot": "/sys/fs/cgroup"},
    "securityContext": {
        "capabilities": {
            "ciliumAgent": [
                "CHOWN",
                "KILL",
                "NET_ADMIN",
                "NET_RAW",
                "IPC_LOCK",
                "SYS_ADMIN",
                "SYS_RESOURCE",
                "DAC_OVERRIDE",
                "FOWNER",
                "SETGID",
                "SETUID",
            ],
            "cleanCiliumState": ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"],
        }
    },
    "l2announcements": {"enabled": True},
    "externalIPs": {"enabled": True},
}


@dataclass(frozen=True)
class CiliumProps:
    config: CiliumConfig


class Cilium(Construct):
    """The Cilium Helm release, then the LoadBalancer IP pools and the L2 announcement policy of the site file.

    Pools and the policy are rendered by a small chart shipped with terravixens (copied next to the stack as a cdktf
    asset, so the JSON holds a relative path): `kubernetes_manifest` would need Cilium's CRDs at plan time, which a
    new cluster does not have yet.
    """

    def __init__(self, scope: Construct, id: str, props: CiliumProps):
        super().__init__(scope, id)
        self.release = pin(
            Release(
                self,
                "release",
                name="cilium",
                **chart_arguments(self, "cilium", props.config.chart_version, props.config.chart, REPOSITORY),
                namespace="kube-system",
                values=[yaml.safe_dump(TALOS_VALUES, sort_keys=True)],
                wait=True,
                timeout=900,
            ),
            cluster_id("cilium"),
        )
        if props.config.pools:
            chart = TerraformAsset(self, "l2_chart", path=str(L2_CHART), type=AssetType.DIRECTORY)
            values = {
                "pools": {name: list(cidrs) for name, cidrs in sorted(props.config.pools.items())},
                "l2Interfaces": list(props.config.l2_interfaces),
            }
            self.pools = pin(
                Release(
                    self,
                    "pools",
                    name="terravixens-cilium-l2",
                    chart=chart.path,
                    namespace="kube-system",
                    values=[yaml.safe_dump(values, sort_keys=True)],
                    depends_on=[self.release],
                ),
                cluster_id("cilium_l2"),
            )
