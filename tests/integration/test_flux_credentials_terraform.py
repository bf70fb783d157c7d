"""The real Terraform CLI (>= 1.11) judges the gitops layer's `flux_git_credentials` variable as synthesized (ADR 0034).

hashicorp/kubernetes has no binary here (ADR 0003), so its `kubernetes_secret_v1.data_wo` cannot be planned. What
Terraform itself decides about the variable can be proven with a provider that has a write-only `map(string)`
attribute of the same shape: bpg/proxmox's `proxmox_acme_dns_plugin.data_wo` (with `data_wo_version`), built in
the offline mirror. The variable block and the `data_wo` expression are taken from the synthesized gitops stack
unchanged; only the resource they feed differs. Proven here:

- the ephemeral variable is accepted by a write-only attribute and refused by an ordinary one (so it can reach
  neither the state nor a non-write-only argument);
- its value is in neither the saved plan file nor `terraform show -json` of it (the plan guard's input);
- a saved plan needs it again at apply time (terravixens passes the same environment to plan and apply);
- a value that is not a JSON object of strings is refused by the variable's validation, before anything runs.

What a real cluster adds (not proven here): the kubernetes provider writing the Secret from `data_wo` when the
revision is at least 1 and again only when it changes (hashicorp/terraform-provider-kubernetes v2.38.0 source), and
Flux reading it.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import pytest

from tests.terraform import mirrored_providers, terraform

pytestmark = pytest.mark.integration

CANARY = "CANARY-flux-credential-5d1e3b7a9c"
VALUE = json.dumps(
    {
        "identity": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{CANARY}\n-----END OPENSSH PRIVATE KEY-----\n",
        "known_hosts": "git.lab.internal ssh-ed25519 AAAA",
        "password": "${not-a-template}",
    }
)


def _document(gitops: dict, attribute: str = "data_wo") -> dict:
    variable = copy.deepcopy(gitops["variable"]["flux_git_credentials"])
    secret = gitops["resource"]["kubernetes_secret_v1"]["cluster_flux_git_credentials"]
    return {
        "terraform": {"required_providers": {"proxmox": {"source": "bpg/proxmox"}}},
        # Loopback, a port nothing listens on: planning a create asks the API nothing; an apply would fail to connect.
        "provider": {"proxmox": [{"endpoint": "https://127.0.0.1:9/", "api_token": "t@pam!t=00000000-0000"}]},
        "variable": {"flux_git_credentials": variable},
        "resource": {
            "proxmox_acme_dns_plugin": {
                "flux": {
                    "api": "flux",
                    "plugin": "flux",
                    attribute: secret["data_wo"],
                    "data_wo_version": secret["data_wo_revision"],
                }
            }
        },
    }


@pytest.fixture()
def workdir(example_synth, terraform_binary, tmp_path) -> Path:
    if "proxmox" not in mirrored_providers():
        pytest.fail("bpg/proxmox is not in the offline mirror: run `make mirror`")
    (tmp_path / "main.tf.json").write_text(json.dumps(_document(example_synth["gitops-prod"]), indent=1))
    init = terraform(terraform_binary, tmp_path, "init", "-input=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    return tmp_path


def test_the_variable_feeds_a_write_only_attribute_and_nothing_else(example_synth, terraform_binary, workdir):
    valid = terraform(terraform_binary, workdir, "validate", "-json", "-no-color")
    assert json.loads(valid.stdout)["valid"] is True, valid.stdout
    (workdir / "main.tf.json").write_text(json.dumps(_document(example_synth["gitops-prod"], attribute="data")))
    refused = terraform(terraform_binary, workdir, "validate", "-json", "-no-color")
    report = json.loads(refused.stdout)
    assert report["valid"] is False
    assert any(
        d["summary"] == "Invalid use of ephemeral value" and 'not valid for "data"' in d["detail"]
        for d in report["diagnostics"]
    ), report


def test_the_value_is_in_no_plan_and_needed_again_to_apply(terraform_binary, workdir):
    plan = terraform(
        terraform_binary,
        workdir,
        "plan",
        "-input=false",
        "-no-color",
        "-out=saved.tfplan",
        TF_VAR_flux_git_credentials=VALUE,
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "1 to add" in plan.stdout and CANARY not in plan.stdout + plan.stderr
    with zipfile.ZipFile(workdir / "saved.tfplan") as saved:
        assert all(CANARY.encode() not in saved.read(name) for name in saved.namelist())
    shown = terraform(terraform_binary, workdir, "show", "-json", "saved.tfplan")
    assert shown.returncode == 0 and '"resource_changes"' in shown.stdout
    assert CANARY not in shown.stdout
    without = terraform(terraform_binary, workdir, "apply", "-input=false", "-no-color", "saved.tfplan")
    assert without.returncode == 1
    assert (
        'The ephemeral input variable "flux_git_credentials" was set during the plan phase, and so must also be '
        "set during the apply phase."
    ) in " ".join(without.stderr.split())
    assert not (workdir / "terraform.tfstate").exists() or CANARY not in (workdir / "terraform.tfstate").read_text()


@pytest.mark.parametrize("value", ["not json", "{}", '["identity"]'], ids=["text", "empty", "list"])
def test_a_value_that_is_no_json_object_is_refused_by_the_variable(terraform_binary, workdir, value):
    plan = terraform(terraform_binary, workdir, "plan", "-input=false", "-no-color", TF_VAR_flux_git_credentials=value)
    assert plan.returncode == 1
    assert "Give a JSON object of the Secret's keys" in " ".join(plan.stderr.split())
    missing = terraform(terraform_binary, workdir, "plan", "-input=false", "-no-color")
    assert missing.returncode == 1 and "No value for required variable" in missing.stderr
