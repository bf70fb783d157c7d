"""L1 GitOps: Cilium and Flux on a cluster whose platform stack is applied.

A separate stack because the Helm and Kubernetes providers need the cluster's credentials while Terraform plans:
in the platform stack they would be unknown until the kubeconfig exists (see docs/adr/0007-gitops-stack.md).
The credentials are read at plan time from the platform stack's outputs (its state), never synthesized.
"""

from __future__ import annotations

from cdktf import Fn

from terravixens._bindings.helm.provider import HelmProvider
from terravixens._bindings.kubernetes.provider import KubernetesProvider
from terravixens.constructs.cilium import Cilium, CiliumProps
from terravixens.constructs.csi_secret import CsiSecret, CsiSecretProps
from terravixens.constructs.etcd_backup import EtcdBackupJob, EtcdBackupJobProps
from terravixens.constructs.flux_bootstrap import FluxBootstrap, FluxBootstrapProps
from terravixens.stacks.backend import remote_state
from terravixens.stacks.base import LayerStack


class GitopsStack(LayerStack):
    def build(self) -> None:
        site, cluster_name = self.site, self.cluster_name
        cluster = site.clusters[cluster_name]
        # its `after` is its platform layer, whose state it reads (terravixens.layers, ADR 0007)
        platform = remote_state(self, "platform", site.state, site.site, self.platform_layer)
        client = platform.get("kubernetes_client")
        credentials = {
            "host": Fn.lookup(client, "host"),
            "cluster_ca_certificate": Fn.base64decode(Fn.lookup(client, "ca_certificate")),
            "client_certificate": Fn.base64decode(Fn.lookup(client, "client_certificate")),
            "client_key": Fn.base64decode(Fn.lookup(client, "client_key")),
        }
        KubernetesProvider(self, "kubernetes", **credentials)
        HelmProvider(self, "helm", kubernetes=credentials)
        self.cilium = Cilium(self, "cilium", CiliumProps(config=cluster.cilium))
        if cluster.flux is not None:
            self.flux = FluxBootstrap(self, "flux", FluxBootstrapProps(flux=cluster.flux, cilium=self.cilium))
        if cluster.csi is not None:
            self.csi = CsiSecret(self, "csi", CsiSecretProps(spec=cluster.csi))
        if cluster.etcd_backup is not None:
            self.etcd_backup = EtcdBackupJob(
                self, "etcd_backup", EtcdBackupJobProps(cluster_name=cluster_name, backup=cluster.etcd_backup)
            )

    @property
    def platform_layer(self) -> str:
        """The platform layer this one is applied after and whose outputs it reads."""
        if self.layer.after is None:
            raise ValueError(
                f"layer {self.layer.name!r} names no platform layer to read its cluster's credentials from"
            )
        return self.layer.after
