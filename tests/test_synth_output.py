"""Properties of the synthesized files that hold for every stack: relative paths only, explicit backends."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import support

ROOT = Path(__file__).resolve().parent.parent
ABSOLUTE = re.compile(r'"(/(?:root|home|tmp|work|usr|var|opt|etc)/[^"]*)"')


@pytest.mark.parametrize("stack", ["hypervisors", "platform-prod", "gitops-prod"])
def test_no_absolute_path_in_any_stack(example_synth, stack):
    text = json.dumps(example_synth[stack])
    assert ABSOLUTE.findall(text) == []


@pytest.mark.parametrize("stack", ["hypervisors", "platform-prod", "gitops-prod"])
def test_each_stack_declares_its_own_relative_local_backend(example_synth, stack):
    backend = example_synth[stack]["terraform"]["backend"]
    assert backend == {"local": {"path": f"../../../state/{stack}.tfstate"}}


def test_s3_backend_one_key_per_layer_with_locking_and_encryption():
    data = support.example_data()
    data["state"] = {"backend": "s3", "s3": {"endpoint": "https://127.0.0.1:9000", "bucket": "tfstate"}}
    stacks = support.synth(support.site_from(data))
    keys = {name: stack["terraform"]["backend"]["s3"]["key"] for name, stack in stacks.items()}
    assert keys == {name: f"terravixens/homelab/{name}.tfstate" for name in stacks}
    assert all(stack["terraform"]["backend"]["s3"]["use_lockfile"] is True for stack in stacks.values())
    assert all(stack["terraform"]["backend"]["s3"]["encrypt"] is True for stack in stacks.values())
    assert all("kms_key_id" not in stack["terraform"]["backend"]["s3"] for stack in stacks.values())
    remote = stacks["gitops-prod"]["data"]["terraform_remote_state"]["platform"]
    assert remote["backend"] == "s3" and remote["config"]["key"] == "terravixens/homelab/platform-prod.tfstate"
    assert remote["config"]["encrypt"] is True


def test_s3_backend_with_a_kms_key():
    data = support.example_data()
    key = "arn:aws:kms:us-east-1:000000000000:key/example"
    data["state"] = {
        "backend": "s3",
        "s3": {"endpoint": "https://127.0.0.1:9000", "bucket": "tfstate", "kms_key_id": key},
    }
    stacks = support.synth(support.site_from(data))
    assert {stack["terraform"]["backend"]["s3"]["kms_key_id"] for stack in stacks.values()} == {key}
    assert stacks["gitops-prod"]["data"]["terraform_remote_state"]["platform"]["config"]["kms_key_id"] == key


def test_sops_age_key_goes_through_the_write_only_attribute(example_synth):
    secret = example_synth["gitops-prod"]["resource"]["kubernetes_secret_v1"]["cluster_flux_sops_age"]
    assert "data" not in secret
    assert secret["data_wo"] == {"age.agekey": "${file(pathexpand(var.sops_age_key_file))}"}
    assert secret["data_wo_revision"] == 1


def test_sops_age_key_revision_comes_from_the_site():
    data = support.example_data()
    data["clusters"]["prod"]["flux"]["sops_age_key_revision"] = 3
    secret = support.synth(support.site_from(data))["gitops-prod"]["resource"]["kubernetes_secret_v1"]
    assert secret["cluster_flux_sops_age"]["data_wo_revision"] == 3


def test_gitops_stack_reads_cluster_credentials_from_platform_state(example_synth):
    kubernetes = example_synth["gitops-prod"]["provider"]["kubernetes"][0]
    assert kubernetes["host"] == "${data.terraform_remote_state.platform.outputs.kubernetes_client.host}"
    assert example_synth["gitops-prod"]["data"]["terraform_remote_state"]["platform"]["config"] == {
        "path": "../../../state/platform-prod.tfstate"
    }


def test_main_synthesizes_the_example_site_like_cdktf_synth(tmp_path, example_synth):
    """main.py is what `cdktf synth` runs, with the interpreter flags cdktf.json gives it (`python -O`): with
    CDKTF_OUTDIR set it writes every stack there, the same JSON as a synth without -O."""
    words = json.loads((ROOT / "cdktf.json").read_text())["app"].split()
    assert words[0] == ".venv/bin/python"  # the project's environment, no pipenv needed (ADR 0042)
    flags = [word for word in words[1:] if word.startswith("-")]
    env = dict(os.environ, CDKTF_OUTDIR=str(tmp_path), TERRAVIXENS_SITE=str(ROOT / "sites" / "example.yaml"))
    result = subprocess.run(
        [sys.executable, *flags, "main.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "stacks").iterdir()) == ["gitops-prod", "hypervisors", "platform-prod"]
    for stack in (tmp_path / "stacks").iterdir():
        assert ABSOLUTE.findall((stack / "cdk.tf.json").read_text()) == []
        assert json.loads((stack / "cdk.tf.json").read_text()) == example_synth[stack.name]


def test_main_prints_site_errors_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("site: Bad_Name\nproxmox: {endpoint: https://127.0.0.1:8006/}\nhypervisors: {}\n")
    env = dict(os.environ, CDKTF_OUTDIR=str(tmp_path / "out"), TERRAVIXENS_SITE=str(bad))
    result = subprocess.run([sys.executable, "main.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{bad}: 1 problem in the site file" in result.stderr
    assert "site: 'Bad_Name' is not a DNS-safe name" in result.stderr
