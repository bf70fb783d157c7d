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
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TERRAVIXENS_CACHE", Path.home() / ".cache" / "terravixens"))
MIRROR = CACHE / "mirror" / "registry.terraform.io"
BUILTIN_TYPES = {"terraform_remote_state", "terraform_data"}


def mirrored_providers() -> set[str]:
    """Local provider names (proxmox, talos, …) with a binary in the filesystem mirror."""
    return {path.name for path in MIRROR.glob("*/*") if any(path.glob("*/*/terraform-provider-*"))}


def provider_of(block_type: str) -> str:
    return block_type.split("_", 1)[0]


def projection(stack: dict, available: set[str]) -> tuple[dict, set[str]]:
    """The stack restricted to `available` providers, and the addresses that were dropped."""
    result = copy.deepcopy(stack)
    dropped: set[str] = set()
    for kind, prefix in (("resource", ""), ("data", "data.")):
        for block_type in list(result.get(kind, {})):
            if block_type in BUILTIN_TYPES or provider_of(block_type) in available:
                continue
            dropped.update(f"{prefix}{block_type}.{name}" for name in result[kind].pop(block_type))
        if kind in result and not result[kind]:
            del result[kind]
    for name in list(result.get("provider", {})):
        if name not in available:
            del result["provider"][name]
    if result.get("provider") == {}:
        del result["provider"]
    required = result.get("terraform", {}).get("required_providers", {})
    for name in list(required):
        if name not in available:
            del required[name]
    for name, output in list(result.get("output", {}).items()):
        if any(address.split(".", 1)[-1] in json.dumps(output) for address in dropped):
            del result["output"][name]
            dropped.add(f"output.{name}")
    for kind in ("resource", "data"):
        for items in result.get(kind, {}).values():
            for body in items.values():
                if "depends_on" in body:
                    body["depends_on"] = [d for d in body["depends_on"] if d.removeprefix("data.") not in
                                          {a.removeprefix("data.") for a in dropped}]
    return result, dropped


def terraform(binary: str, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CLI_CONFIG_FILE=str(CACHE / "terraform.rc"), CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1")
    return subprocess.run([binary, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def validate(binary: str, document: dict, workdir: Path) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cdk.tf.json").write_text(json.dumps(document, indent=1))
    init = terraform(binary, workdir, "init", "-backend=false", "-input=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    result = terraform(binary, workdir, "validate", "-json", "-no-color")
    return json.loads(result.stdout)


def problems(report: dict) -> list[str]:
    return [f"{d['severity']}: {d['summary']} — {d.get('detail', '')} @ {d.get('address', d.get('range', {}).get('filename', ''))}"
            for d in report.get("diagnostics", [])]


EXPECTED_DROPPED = {
    # Blocks of providers with no binary here (talos, helm, kubernetes): see the module docstring and ADR 0003.
    "hypervisors": set(),
    "platform-prod": {
        "talos_machine_secrets.cluster_secrets", "talos_machine_bootstrap.cluster_bootstrap",
        "talos_cluster_kubeconfig.cluster_kubeconfig",
        "data.talos_machine_configuration.cluster_machine_configuration_controlplane",
        "data.talos_machine_configuration.cluster_machine_configuration_worker",
        "data.talos_client_configuration.cluster_talosconfig", "data.talos_cluster_health.cluster_health",
        *(f"talos_machine_configuration_apply.node_{n}_apply" for n in ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")),
        "output.kubeconfig", "output.kubernetes_client", "output.talosconfig", "output.health_checked",
    },
    "gitops-prod": {
        "helm_release.cluster_cilium", "helm_release.cluster_cilium_l2", "helm_release.cluster_flux",
        "helm_release.cluster_flux_sync", "kubernetes_namespace_v1.cluster_flux_namespace",
        "kubernetes_secret_v1.cluster_flux_sops_age",
    },
}


def test_mirror_has_the_buildable_providers():
    pins = json.loads((ROOT / "providers.json").read_text())["providers"]
    buildable = {name for name, pin in pins.items() if pin["binary"].startswith("built")}
    assert buildable <= mirrored_providers(), "run `make providers`"


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
    assert any('No argument or block type is named "vlan_awareness"' in d.get("detail", "")
               for d in report["diagnostics"]), problems(report)


def test_validate_rejects_a_wrong_nested_vm_attribute(example_synth, terraform_binary, tmp_path):
    """A misspelt attribute inside a nested VM block (disk) is refused too."""
    document, _ = projection(example_synth["platform-prod"], mirrored_providers())
    vm = document["resource"]["proxmox_virtual_environment_vm"]["node_cp-a_vm"]
    vm["disk"][0]["sizee"] = vm["disk"][0].pop("size")
    report = validate(terraform_binary, document, tmp_path / "broken-vm")
    assert report["valid"] is False
    assert any("sizee" in d.get("detail", "") for d in report["diagnostics"]), problems(report)
