"""The real Terraform CLI judges the gitops layer's `etcd_backup_credentials` variable as synthesized (ADR 0059), the
way tests/integration/test_csi_credentials_terraform.py judges the CSI Secret's: hashicorp/kubernetes has no binary
here (ADR 0003), so the variable and the Secret's `data_wo` expression, taken unchanged from the synthesized gitops
stack, feed bpg/proxmox's write-only `proxmox_acme_dns_plugin.data_wo` (same shape: a map of strings) from the
mirror.

Proven: the ephemeral variable reaches a write-only attribute and is refused by an ordinary one; its value is in
neither the saved plan nor `terraform show -json` (so never in state); a value without the two keys is refused by the
variable's own validation. What a real cluster adds: the kubernetes provider writing the Secret, the job reading it.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import pytest

from terravixens.standalone.etcd_backup_credentials import BACKUP_VARIABLE
from tests import support
from tests.site_builders import with_backup
from tests.terraform import mirrored_providers, terraform

pytestmark = pytest.mark.integration

CANARY = "CANARY-etcd-backup-key-3c9a71"
VALUE = json.dumps({"AWS_ACCESS_KEY_ID": "backup", "AWS_SECRET_ACCESS_KEY": CANARY})


def _document(gitops: dict, attribute: str = "data_wo") -> dict:
    secret = gitops["resource"]["kubernetes_secret_v1"]["cluster_etcd_backup_credentials"]
    return {
        "terraform": {"required_providers": {"proxmox": {"source": "bpg/proxmox"}}},
        # Loopback, a port nothing listens on: planning a create asks the API nothing.
        "provider": {"proxmox": [{"endpoint": "https://127.0.0.1:9/", "api_token": "t@pam!t=00000000-0000"}]},
        "variable": {BACKUP_VARIABLE: copy.deepcopy(gitops["variable"][BACKUP_VARIABLE])},
        "resource": {
            "proxmox_acme_dns_plugin": {
                "backup": {
                    "api": "backup",
                    "plugin": "backup",
                    attribute: secret["data_wo"],
                    "data_wo_version": secret["data_wo_revision"],
                }
            }
        },
    }


@pytest.fixture(scope="module")
def gitops() -> dict:
    return support.synth(support.site_from(with_backup(support.example_data())))["gitops-prod"]


@pytest.fixture()
def workdir(gitops, terraform_binary, tmp_path) -> Path:
    if "proxmox" not in mirrored_providers():
        pytest.fail("bpg/proxmox is not in the offline mirror: run `make mirror`")
    (tmp_path / "main.tf.json").write_text(json.dumps(_document(gitops), indent=1))
    init = terraform(terraform_binary, tmp_path, "init", "-input=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    return tmp_path


def test_the_backup_variable_feeds_a_write_only_attribute_only_and_stays_out_of_the_plan(
    gitops, terraform_binary, workdir
):
    valid = terraform(terraform_binary, workdir, "validate", "-json", "-no-color")
    assert json.loads(valid.stdout)["valid"] is True, valid.stdout
    plan = terraform(
        terraform_binary,
        workdir,
        "plan",
        "-input=false",
        "-no-color",
        "-out=saved.tfplan",
        TF_VAR_etcd_backup_credentials=VALUE,
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "1 to add" in plan.stdout and CANARY not in plan.stdout + plan.stderr
    with zipfile.ZipFile(workdir / "saved.tfplan") as saved:
        assert all(CANARY.encode() not in saved.read(name) for name in saved.namelist())
    shown = terraform(terraform_binary, workdir, "show", "-json", "saved.tfplan")
    assert shown.returncode == 0 and CANARY not in shown.stdout
    (workdir / "main.tf.json").write_text(json.dumps(_document(gitops, attribute="data")))
    refused = json.loads(terraform(terraform_binary, workdir, "validate", "-json", "-no-color").stdout)
    assert refused["valid"] is False
    assert any(d["summary"] == "Invalid use of ephemeral value" for d in refused["diagnostics"]), refused


@pytest.mark.parametrize("value", ["not json", "{}", '{"AWS_ACCESS_KEY_ID": "a"}'], ids=["text", "empty", "half"])
def test_a_backup_value_without_both_keys_is_refused_by_the_variable(terraform_binary, workdir, value):
    env = {"TF_VAR_etcd_backup_credentials": value}
    plan = terraform(terraform_binary, workdir, "plan", "-input=false", "-no-color", **env)
    assert plan.returncode == 1
    assert "Give a JSON object with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in " ".join(plan.stderr.split())
