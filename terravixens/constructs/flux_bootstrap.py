"""FluxBootstrap: the SOPS age secret, Flux's git credentials, Flux itself, and the objects that point Flux at the fleet
repository."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from cdktf import AssetType, Fn, TerraformAsset, TerraformVariable, TerraformVariableValidationConfig, Token
from constructs import Construct

from terravixens._bindings.helm.release import Release
from terravixens._bindings.kubernetes.namespace_v1 import NamespaceV1
from terravixens._bindings.kubernetes.secret_v1 import SecretV1
from terravixens.catalogue import FLUX_CREDENTIALS_VARIABLE as CREDENTIALS_VARIABLE
from terravixens.config.model import FluxConfig
from terravixens.constructs.chart_source import chart_arguments
from terravixens.constructs.cilium import Cilium
from terravixens.logical_ids import cluster_id, pin

REPOSITORY = "https://fluxcd-community.github.io/helm-charts"
SYNC_CHART = Path(__file__).resolve().parent.parent / "charts" / "flux-sync"


@dataclass(frozen=True)
class FluxBootstrapProps:
    flux: FluxConfig
    cilium: Cilium


class FluxBootstrap(Construct):
    """Order matters and is explicit: namespace -> sops-age secret -> Flux -> GitRepository/Kustomization, and
    namespace -> git credentials secret -> GitRepository.

    The age key is read by Terraform at apply time from `var.sops_age_key_file` (default from the site file): the
    synthesized JSON holds the path, never the key, and the write-only `data_wo` keeps it out of state and plans.
    Flux's git credentials (`git_auth: secrets_file`) come from `var.flux_git_credentials`, which `terravixens deploy`
    fills from the secrets file for this cluster's gitops layer only: a required, sensitive and ephemeral variable
    (in neither the plan file nor the state) whose only use is the write-only `data_wo` of the Secret the
    GitRepository's `secretRef` names (ADR 0034). Flux starts after Cilium (no pod network before it). The
    GitRepository and Kustomization come from a small chart shipped with terravixens, because `kubernetes_manifest`
    needs Flux's CRDs at plan time, which a new cluster does not have yet.
    """

    def __init__(self, scope: Construct, id: str, props: FluxBootstrapProps):
        super().__init__(scope, id)
        flux = props.flux
        age_key_file = TerraformVariable(
            self,
            "sops_age_key_file",
            type="string",
            default=flux.sops_age_key_file,
            description="Path of the SOPS age private key, read at apply time; its content is never synthesized.",
        )
        age_key_file.override_logical_id("sops_age_key_file")
        namespace = pin(NamespaceV1(self, "namespace", metadata={"name": "flux-system"}), cluster_id("flux_namespace"))
        self.age_secret = pin(
            SecretV1(
                self,
                "sops_age",
                metadata={"name": "sops-age", "namespace": "flux-system"},
                # Write-only (kubernetes provider >= 2.38, Terraform >= 1.11): the key reaches the cluster but never the
                # state or a saved plan. The revision is what tells Terraform to send it again after a rotation.
                data_wo={"age.agekey": Fn.file(Fn.pathexpand(age_key_file.string_value))},
                data_wo_revision=flux.sops_age_key_revision,
                depends_on=[namespace],
            ),
            cluster_id("flux_sops_age"),
        )
        self.git_secret = self._git_credentials(flux, namespace) if flux.git_auth == "secrets_file" else None
        self.release = pin(
            Release(
                self,
                "release",
                name="flux2",
                **chart_arguments(self, "flux2", flux.chart_version, flux.chart, REPOSITORY),
                namespace="flux-system",
                create_namespace=False,
                wait=True,
                depends_on=[self.age_secret, props.cilium.release],
            ),
            cluster_id("flux"),
        )
        chart = TerraformAsset(self, "sync_chart", path=str(SYNC_CHART), type=AssetType.DIRECTORY)
        values = {
            "url": flux.url,
            "branch": flux.branch,
            "path": flux.path,
            "interval": flux.interval,
            "secretRef": flux.git_secret if self.git_secret is not None else "",
            "decryptionSecret": "sops-age",
        }
        self.sync = pin(
            Release(
                self,
                "sync",
                name="terravixens-flux-sync",
                chart=chart.path,
                namespace="flux-system",
                values=[yaml.safe_dump(values, sort_keys=True)],
                depends_on=[self.release, *([self.git_secret] if self.git_secret is not None else [])],
            ),
            cluster_id("flux_sync"),
        )

    def _git_credentials(self, flux: FluxConfig, namespace: NamespaceV1) -> SecretV1:
        """The Secret the GitRepository reads, from the apply-time variable; nothing of it is synthesized."""
        credentials = pin(
            TerraformVariable(
                self,
                CREDENTIALS_VARIABLE,
                type="string",
                sensitive=True,
                nullable=False,
                description="Flux's git credentials: a JSON object of the Secret's keys (identity and known_hosts; "
                "username and password; or bearerToken). Filled by `terravixens deploy --secrets FILE` from "
                "the secrets file's flux.<cluster>; ephemeral: in neither the plan nor the state.",
                validation=[
                    TerraformVariableValidationConfig(
                        condition=f"${{try(length(tomap(jsondecode(var.{CREDENTIALS_VARIABLE}))) > 0, false)}}",
                        error_message='Give a JSON object of the Secret\'s keys, e.g. {"identity": "…", "known_hosts": '
                        '"…"}: terravixens deploy writes it from the secrets file.',
                    )
                ],
            ),
            CREDENTIALS_VARIABLE,
        )
        # Terraform >= 1.10 (cdktf 0.21 has no argument for it): the value is kept out of the plan file and the
        # state, and may only flow into write-only attributes; a saved plan needs it again at apply time.
        credentials.add_override("ephemeral", True)
        return pin(
            SecretV1(
                self,
                "git_credentials",
                metadata={"name": flux.git_secret, "namespace": "flux-system"},
                type="Opaque",
                # Write-only: sent when the Secret is created and again only when the revision changes (the whole data
                # replaced: every key is in data_wo). A revision of at least 1, or the provider writes an empty Secret.
                data_wo=Token.as_string_map(Fn.jsondecode(credentials.string_value)),
                data_wo_revision=flux.git_credentials_revision,
                depends_on=[namespace],
            ),
            cluster_id("flux_git_credentials"),
        )
