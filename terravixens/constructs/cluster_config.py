"""ClusterConfig: the cluster's identity (machine secrets) and its per-role machine configurations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdktf import TerraformResourceLifecycle
from constructs import Construct

from terravixens._bindings.talos.data_talos_machine_configuration import DataTalosMachineConfiguration
from terravixens._bindings.talos.machine_secrets import MachineSecrets
from terravixens.config.model import Cluster
from terravixens.constructs.build import locate
from terravixens.logical_ids import cluster_id, pin
from terravixens.roles import Role
from terravixens.talos.patches import cluster_patch, control_plane_patch


@dataclass(frozen=True)
class ClusterConfigProps:
    """cluster_name: the Talos/Kubernetes cluster name; cluster: its site entry."""

    cluster_name: str
    cluster: Cluster
    # Lifts prevent_destroy on the machine secrets. Only `terravixens decommission --destroy-secrets` sets it, in a
    # synth of its own, once no node of the cluster is left in the state (ADR 0020); rule TV005 accepts it only here.
    release_secrets: bool = False


class ClusterConfig(Construct):
    """Machine secrets (created once, never replaced) and one machine configuration per role.

    The secrets carry every certificate of the cluster: new secrets would mean a new cluster. They are protected
    with `prevent_destroy`, and their `talos_version` is neither set nor diffed, so a Talos upgrade never mints new
    certificates (the provider replaces the resource when that version goes down).
    """

    def __init__(self, scope: Construct, id: str, props: ClusterConfigProps):
        super().__init__(scope, id)
        locate(self, scope, id)
        self.props = props
        self._client_configuration: dict[str, str] | None = None
        self._machine_configuration: dict[Role, str] = {}
        cluster = props.cluster
        self.secrets = pin(
            MachineSecrets(
                self,
                "secrets",
                lifecycle=TerraformResourceLifecycle(
                    prevent_destroy=not props.release_secrets, ignore_changes=["talos_version"]
                ),
            ),
            cluster_id("secrets"),
        )
        machine_secrets = self.machine_secrets_input()  # read once: the same references for every role
        self.machine_configurations = {
            role: pin(
                DataTalosMachineConfiguration(
                    self,
                    f"machine_configuration_{role}",
                    cluster_name=props.cluster_name,
                    cluster_endpoint=f"https://{cluster.endpoint_vip}:6443",
                    machine_type=role.value,
                    machine_secrets=machine_secrets,
                    # The configuration contract (v1.11), not the version nodes run: the provider generates for it,
                    # and moving it is a decision of its own (ADR 0023).
                    talos_version=cluster.contract,
                    kubernetes_version=cluster.kubernetes_version,
                    # Control planes only: Talos API access for the etcd backup job (ADR 0059) when there is one.
                    config_patches=[
                        cluster_patch(cluster),
                        *filter(None, [control_plane_patch(cluster) if role is Role.CONTROLPLANE else None]),
                    ],
                    docs=False,
                    examples=False,
                ),
                cluster_id(f"machine_configuration_{role}"),
            )
            for role in Role
        }

    def client_configuration(self) -> dict[str, str]:
        """The talosctl client credentials, as references (never values) for any Talos resource.

        The references are read from cdktf once per cluster (each read is a round trip to its Node.js process) and
        shared by every node: a reference renders the same wherever it is used."""
        if self._client_configuration is None:
            client = self.secrets.client_configuration
            self._client_configuration = {
                "ca_certificate": client.ca_certificate,
                "client_certificate": client.client_certificate,
                "client_key": client.client_key,
            }
        return dict(self._client_configuration)

    def machine_configuration(self, role: Role) -> str:
        """The reference to one role's rendered machine configuration, read once per role (see above)."""
        if role not in self._machine_configuration:
            self._machine_configuration[role] = self.machine_configurations[role].machine_configuration
        return self._machine_configuration[role]

    def machine_secrets_input(self) -> dict[str, Any]:
        secrets = self.secrets.machine_secrets
        certs = secrets.certs
        return {
            "certs": {
                "etcd": {"cert": certs.etcd.cert, "key": certs.etcd.key},
                "k8_s": {"cert": certs.k8_s.cert, "key": certs.k8_s.key},
                "k8_s_aggregator": {"cert": certs.k8_s_aggregator.cert, "key": certs.k8_s_aggregator.key},
                "k8_s_serviceaccount": {"key": certs.k8_s_serviceaccount.key},
                "os": {"cert": certs.os.cert, "key": certs.os.key},
            },
            "cluster": {"id": secrets.cluster.id, "secret": secrets.cluster.secret},
            "secrets": {
                "bootstrap_token": secrets.secrets.bootstrap_token,
                "secretbox_encryption_secret": secrets.secrets.secretbox_encryption_secret,
                "aescbc_encryption_secret": secrets.secrets.aescbc_encryption_secret,
            },
            "trustdinfo": {"token": secrets.trustdinfo.token},
        }
