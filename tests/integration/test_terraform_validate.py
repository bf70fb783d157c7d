"""The real Terraform CLI and the real providers judge the synthesized JSON: `init` from the offline mirror only,
then `validate`.

Only providers the Go module proxy serves can be built here (providers.json): today bpg/proxmox. siderolabs/talos,
hashicorp/helm and hashicorp/kubernetes have no binary on this machine, so each stack is validated as its
*projection* onto the providers in the mirror: every block of an available provider is kept exactly as
synthesized, blocks of missing providers (and outputs or depends_on entries that name them) are dropped. Which
blocks were dropped is asserted too, so that a new provider in the mirror makes these tests stricter, not silent.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.terraform import mirrored_providers, problems, projection, validate

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


EXPECTED_DROPPED = {
    # Blocks of providers with no binary here (talos, helm, kubernetes): see the module docstring and ADR 0003.
    "hypervisors": set(),
    "platform-prod": {
        "talos_machine_secrets.cluster_secrets",
        "talos_machine_bootstrap.cluster_bootstrap",
        "talos_cluster_kubeconfig.cluster_kubeconfig",
        "data.talos_machine_configuration.cluster_machine_configuration_controlplane",
        "data.talos_machine_configuration.cluster_machine_configuration_worker",
        "data.talos_client_configuration.cluster_talosconfig",
        "data.talos_cluster_health.cluster_health",
        *(f"talos_machine_configuration_apply.node_{n}_apply" for n in ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")),
        "output.kubeconfig",
        "output.kubernetes_client",
        "output.talosconfig",
        "output.health_checked",
    },
    "gitops-prod": {
        "helm_release.cluster_cilium",
        "helm_release.cluster_cilium_l2",
        "helm_release.cluster_flux",
        "helm_release.cluster_flux_sync",
        "kubernetes_namespace_v1.cluster_flux_namespace",
        "kubernetes_secret_v1.cluster_flux_sops_age",
        "kubernetes_secret_v1.cluster_flux_git_credentials",
    },
}


def test_mirror_has_the_buildable_providers():
    pins = json.loads((ROOT / "providers.json").read_text())["providers"]
    buildable = {name for name, pin in pins.items() if pin["binary"].startswith("built")}
    assert buildable <= mirrored_providers(), "run `make mirror`"


@pytest.mark.parametrize("stack", ["hypervisors", "platform-prod", "gitops-prod"])
def test_terraform_validates_every_stack(example_synth, terraform_binary, tmp_path, stack):
    if mirrored_providers() - {"proxmox"}:
        pytest.fail("more providers are mirrored than EXPECTED_DROPPED assumes: update it to validate them too")
    document, dropped = projection(example_synth[stack], mirrored_providers())
    assert dropped == EXPECTED_DROPPED[stack]
    report = validate(terraform_binary, document, tmp_path / stack)
    assert report["valid"] is True, problems(report)
    # Warnings too: a deprecated resource name or attribute is fixed before it is removed upstream.
    assert problems(report) == []


def test_validate_rejects_a_wrong_attribute_name(example_synth, terraform_binary, tmp_path):
    """The check can fail: a misspelt bridge attribute is reported by the real provider schema."""
    document = copy.deepcopy(example_synth["hypervisors"])
    bridge = document["resource"]["proxmox_network_linux_bridge"]["hv_pve1_bridge_vmbr1"]
    bridge["vlan_awareness"] = bridge.pop("vlan_aware")
    report = validate(terraform_binary, document, tmp_path / "broken")
    assert report["valid"] is False
    assert any(
        'No argument or block type is named "vlan_awareness"' in d.get("detail", "") for d in report["diagnostics"]
    ), problems(report)


def test_validate_rejects_a_wrong_nested_vm_attribute(example_synth, terraform_binary, tmp_path):
    """A misspelt attribute inside a nested VM block (disk) is refused too."""
    document, _ = projection(example_synth["platform-prod"], mirrored_providers())
    vm = document["resource"]["proxmox_virtual_environment_vm"]["node_cp-a_vm"]
    vm["disk"][0]["sizee"] = vm["disk"][0].pop("size")
    report = validate(terraform_binary, document, tmp_path / "broken-vm")
    assert report["valid"] is False
    assert any("sizee" in d.get("detail", "") for d in report["diagnostics"]), problems(report)
