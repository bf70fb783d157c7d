"""Every provider binding is generated from the committed schemas (ADR 0012): none comes from a prebuilt package."""

import importlib.util
import json
from pathlib import Path

from cdktf import App, TerraformStack

from terravixens._bindings.kubernetes.provider import KubernetesProvider
from terravixens._bindings.kubernetes.secret_v1 import SecretV1

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "terravixens" / "schemas"
BINDINGS = ROOT / "terravixens" / "_bindings"


def test_every_provider_in_cdktf_json_has_generated_bindings():
    constraints = json.loads((ROOT / "cdktf.json").read_text())["terraformProviders"]
    names = [constraint.partition("@")[0].split("/")[1] for constraint in constraints]
    assert names == ["proxmox", "talos", "helm", "kubernetes"]
    for name in names:
        assert (BINDINGS / name / "__init__.py").exists(), f"terravixens/_bindings/{name}: run `make setup`"


def test_prebuilt_provider_packages_are_gone():
    """Importing the prebuilt kubernetes package alone took about 7 s (its jsii assembly is the whole provider)."""
    assert importlib.util.find_spec("cdktf_cdktf_provider_helm") is None
    assert importlib.util.find_spec("cdktf_cdktf_provider_kubernetes") is None


def test_secret_write_only_attributes_as_kubernetes_2_38_0_declares_them():
    """From the provider's source at v2.38.0 (resource_kubernetes_secret_v1.go): `data_wo` is an optional write-only
    map of strings, not sensitive (write-only values never reach state or plans); `data_wo_revision` an optional
    number (Terraform re-sends `data_wo` when it grows). binary_data_wo likewise."""
    schema = json.loads((SCHEMAS / "kubernetes.json").read_text())
    secret = schema["provider_schemas"]["registry.terraform.io/hashicorp/kubernetes"]["resource_schemas"][
        "kubernetes_secret_v1"
    ]["block"]["attributes"]
    for name in ("data_wo", "binary_data_wo"):
        assert secret[name] == {
            "description_kind": "plain",
            "optional": True,
            "type": ["map", "string"],
            "write_only": True,
        }
        assert secret[f"{name}_revision"] == {"description_kind": "plain", "optional": True, "type": "number"}


def test_generated_secret_binding_writes_the_write_only_attributes(tmp_path):
    app = App(outdir=str(tmp_path))
    stack = TerraformStack(app, "bindings")
    KubernetesProvider(stack, "kubernetes")
    SecretV1(
        stack,
        "secret",
        metadata={"name": "sops-age", "namespace": "flux-system"},
        data_wo={"age.agekey": "${file(var.key)}"},
        data_wo_revision=1,
    )
    app.synth()
    document = json.loads((tmp_path / "stacks" / "bindings" / "cdk.tf.json").read_text())
    body = document["resource"]["kubernetes_secret_v1"]["secret"]
    assert body["data_wo"] == {"age.agekey": "${file(var.key)}"}
    assert body["data_wo_revision"] == 1
    assert "data" not in body
    assert document["terraform"]["required_providers"]["kubernetes"] == {
        "source": "hashicorp/kubernetes",
        "version": "2.38.0",
    }
