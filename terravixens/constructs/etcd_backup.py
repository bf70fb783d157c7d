"""EtcdBackupJob: the cluster backs its own etcd up, off the operator's machine (issue 30 item 1, ADR 0059).

Three objects in the gitops layer, all from `clusters.<name>.etcd_backup`:
- the S3 credentials Secret, from `var.etcd_backup_credentials` — required, sensitive and ephemeral, filled by
  `terravixens deploy` from the secrets file's `etcd_backup.<cluster>` for this cluster's gitops layer only — through
  the write-only `data_wo` of kubernetes_secret_v1 (in neither the synthesized JSON, the plan nor the state: the
  path of Flux's credentials and the CSI Secret, ADR 0034, 0044);
- a small chart shipped with terravixens (charts/etcd-backup): the Talos service account (talos.dev/v1alpha1, role
  os:etcd:backup; Talos writes its talosconfig into a Secret of the same name) and the CronJob — siderolabs/
  talos-backup as its init container (snapshot, age, upload), then the AWS CLI applying `keep`. A chart and not
  kubernetes_manifest: the talos.dev CRD exists only once the control planes allow Talos API access, which a plan
  of a new cluster cannot see.
The control planes' side (machine.features.kubernetesTalosAPIAccess) is the platform layer's:
terravixens.talos.patches.control_plane_patch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from cdktf import AssetType, Fn, TerraformAsset, TerraformVariable, TerraformVariableValidationConfig, Token
from constructs import Construct

from terravixens._bindings.helm.release import Release
from terravixens._bindings.kubernetes.namespace_v1 import NamespaceV1
from terravixens._bindings.kubernetes.secret_v1 import SecretV1
from terravixens.catalogue import BACKUP_SECRET_KEYS as SECRET_KEYS
from terravixens.catalogue import BACKUP_VARIABLE
from terravixens.config.etcd_backup import CREDENTIALS_SECRET, JOB_NAME, EtcdBackup
from terravixens.constructs.csi_secret import BUILT_IN_NAMESPACES
from terravixens.logical_ids import cluster_id, pin

CHART = Path(__file__).resolve().parent.parent / "charts" / "etcd-backup"
NAME = JOB_NAME


@dataclass(frozen=True)
class EtcdBackupJobProps:
    cluster_name: str
    backup: EtcdBackup


def chart_values(cluster_name: str, backup: EtcdBackup) -> dict[str, object]:
    """The chart's values: everything but the credentials (a Secret the job reads) and the age identity (never here)."""
    return {
        "name": NAME,
        "cluster": cluster_name,
        "schedule": backup.schedule,
        "endpoint": backup.endpoint,
        "bucket": backup.bucket,
        "prefix": backup.key_prefix(cluster_name),
        "region": backup.region,
        "keep": backup.keep,
        "ageRecipient": backup.age_recipient,
        "credentialsSecret": CREDENTIALS_SECRET,
        "image": backup.image,
        "pruneImage": backup.prune_image,
    }


class EtcdBackupJob(Construct):
    def __init__(self, scope: Construct, id: str, props: EtcdBackupJobProps):
        super().__init__(scope, id)
        backup = props.backup
        credentials = pin(
            TerraformVariable(
                self,
                BACKUP_VARIABLE,
                type="string",
                sensitive=True,
                nullable=False,
                description="The etcd backup job's S3 keys: a JSON object of AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY. Filled by `terravixens deploy --secrets FILE` from the secrets file's "
                "etcd_backup.<cluster>; ephemeral: in neither the plan nor the state.",
                validation=[
                    TerraformVariableValidationConfig(
                        condition=f"${{try(length(setsubtract({json.dumps(list(SECRET_KEYS))}, "
                        f"keys(tomap(jsondecode(var.{BACKUP_VARIABLE}))))) == 0, false)}}",
                        error_message="Give a JSON object with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: "
                        "terravixens deploy writes it from the secrets file.",
                    )
                ],
            ),
            BACKUP_VARIABLE,
        )
        credentials.add_override("ephemeral", True)
        depends: list[SecretV1 | NamespaceV1] = []
        if backup.namespace not in BUILT_IN_NAMESPACES:
            depends.append(
                pin(
                    NamespaceV1(self, "namespace", metadata={"name": backup.namespace}),
                    cluster_id("etcd_backup_namespace"),
                )
            )
        self.secret = pin(
            SecretV1(
                self,
                "credentials",
                metadata={"name": CREDENTIALS_SECRET, "namespace": backup.namespace},
                type="Opaque",
                # Write-only: sent at creation and again only when the revision changes (every key is in data_wo).
                data_wo=Token.as_string_map(Fn.jsondecode(credentials.string_value)),
                data_wo_revision=backup.credentials_revision,
                depends_on=list(depends) or None,
            ),
            cluster_id("etcd_backup_credentials"),
        )
        chart = TerraformAsset(self, "chart", path=str(CHART), type=AssetType.DIRECTORY)
        self.release = pin(
            Release(
                self,
                "release",
                name=NAME,
                chart=chart.path,
                namespace=backup.namespace,
                values=[yaml.safe_dump(chart_values(props.cluster_name, backup), sort_keys=True)],
                depends_on=[self.secret, *depends],
            ),
            cluster_id("etcd_backup"),
        )
