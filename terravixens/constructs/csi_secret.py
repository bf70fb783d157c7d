"""CsiSecret: the Secret a cluster's CSI driver reads its storage credentials from (ADR 0044).

The same path as Flux's git credentials (FluxBootstrap, ADR 0034): `var.csi_credentials` is required, sensitive and
ephemeral (in neither the plan file nor the state), `terravixens deploy` fills it from the secrets file's
`csi.<cluster>` for this cluster's gitops layer only, and its one use is the write-only `data_wo` of the Secret. The
synthesized JSON holds the variable's name, never a value.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdktf import Fn, TerraformResource, TerraformVariable, TerraformVariableValidationConfig, Token
from constructs import Construct

from terravixens._bindings.kubernetes.namespace_v1 import NamespaceV1
from terravixens._bindings.kubernetes.secret_v1 import SecretV1
from terravixens.catalogue import CSI_VARIABLE
from terravixens.config.storage import CsiSecret as CsiSecretSpec
from terravixens.logical_ids import cluster_id, pin

# Namespaces every cluster has: never created (nor deleted) by the gitops layer.
BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@dataclass(frozen=True)
class CsiSecretProps:
    spec: CsiSecretSpec


class CsiSecret(Construct):
    def __init__(self, scope: Construct, id: str, props: CsiSecretProps):
        super().__init__(scope, id)
        spec = props.spec
        credentials = pin(
            TerraformVariable(
                self,
                CSI_VARIABLE,
                type="string",
                sensitive=True,
                nullable=False,
                description="The CSI driver's Secret: a JSON object of its keys. Filled by `terravixens deploy "
                "--secrets FILE` from the secrets file's csi.<cluster>; ephemeral: in neither the plan nor the state.",
                validation=[
                    TerraformVariableValidationConfig(
                        condition=f"${{try(length(tomap(jsondecode(var.{CSI_VARIABLE}))) > 0, false)}}",
                        error_message="Give a JSON object of the Secret's keys, e.g. "
                        '{"username": "…", "password": "…"}: terravixens deploy writes it from the secrets file.',
                    )
                ],
            ),
            CSI_VARIABLE,
        )
        credentials.add_override("ephemeral", True)
        depends_on: list[TerraformResource] = []
        if spec.namespace not in BUILT_IN_NAMESPACES:
            depends_on.append(
                pin(NamespaceV1(self, "namespace", metadata={"name": spec.namespace}), cluster_id("csi_namespace"))
            )
        self.secret = pin(
            SecretV1(
                self,
                "secret",
                metadata={"name": spec.name, "namespace": spec.namespace},
                type="Opaque",
                # Write-only: sent at creation and again only when the revision changes (every key is in data_wo).
                data_wo=Token.as_string_map(Fn.jsondecode(credentials.string_value)),
                data_wo_revision=spec.credentials_revision,
                depends_on=depends_on or None,
            ),
            cluster_id("csi_credentials"),
        )
