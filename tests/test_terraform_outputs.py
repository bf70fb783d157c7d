"""A layer's outputs as real Terraform answers them (no provider needed: `terraform output` reads the local state).

Terraform 1.11 answers `terraform output -raw NAME` on a state without any output — a layer never applied, or
destroyed — with a colour warning "No outputs found" on stdout and exit 0; on a state with other outputs, with
`Error: Output "NAME" not found` and exit 1. The first once reached talosctl as its configuration (`check` printed
"talosconfig: not YAML"); every reader goes through `Terraform.output` now, and the fake Terraform answers an empty
state with the same bytes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from terravixens.operations.etcd import talosconfig_of
from terravixens.operations.kube import kubeconfig_of
from terravixens.operations.observe import layer_output
from terravixens.operations.steps import state_addresses
from terravixens.operations.terraform import Terraform
from terravixens.operations.workspace import Workspace
from tests.fake_terraform import NO_OUTPUTS_WARNING, NO_STATE_FILE_ERROR, FakeTerraform


def _terraform() -> Terraform:
    return Terraform(binary="terraform", timeout=120)


def test_a_state_without_outputs_has_no_talosconfig_or_kubeconfig(tmp_path: Path) -> None:
    tf = _terraform()
    raw = tf.run(tmp_path, "output", "-raw", "kubeconfig")
    assert raw.returncode == 0 and "No outputs found" in raw.stdout  # what Terraform itself says: not a value
    answer = tf.output(tmp_path, "kubeconfig")
    assert (answer.returncode, answer.stdout) == (1, "")
    assert answer.stderr == 'Error: Output "kubeconfig" not found (the state has no outputs)'
    assert kubeconfig_of(tf, tmp_path) is None
    assert talosconfig_of(tf, tmp_path) is None
    assert layer_output(tf, tmp_path, "talosconfig") is None


def test_the_fake_answers_an_empty_state_with_terraforms_own_bytes(tmp_path: Path) -> None:
    real = _terraform().run(tmp_path, "output", "-raw", "talosconfig")
    fake = FakeTerraform({}).run(tmp_path, "output", "-raw", "talosconfig")
    assert (fake.returncode, fake.stdout) == (real.returncode, real.stdout) == (0, NO_OUTPUTS_WARNING)


def test_a_state_with_other_outputs_answers_not_found_and_the_value_of_one_it_has(tmp_path: Path) -> None:
    (tmp_path / "main.tf.json").write_text(json.dumps({"output": {"other": {"value": "a value"}}}))
    tf = _terraform()
    applied = subprocess.run(
        ["terraform", "apply", "-auto-approve", "-input=false", "-no-color"],
        cwd=tmp_path,
        env=tf.environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    missing = tf.output(tmp_path, "kubeconfig")
    assert missing.returncode == 1 and 'Output "kubeconfig" not found' in missing.stderr
    assert kubeconfig_of(tf, tmp_path) is None and layer_output(tf, tmp_path, "kubeconfig") is None
    assert tf.output(tmp_path, "other").stdout == "a value"


def test_a_layer_never_applied_has_an_empty_state_list(tmp_path: Path) -> None:
    """`terraform state list` without a state file is exit 1 ("No state file was found!"): an empty state to the
    operations (decommission's gitops check, remove-dead-member's state step), not a failure. The fake says the same
    for a layer it holds no state of."""
    tf = _terraform()
    raw = tf.run(tmp_path, "state", "list")
    # (a CLI configuration warning of this machine's environment may come first)
    assert raw.returncode == 1 and raw.stdout == "" and raw.stderr.endswith(NO_STATE_FILE_ERROR)
    fake = FakeTerraform({}).run(tmp_path, "state", "list")
    assert (fake.returncode, fake.stdout, fake.stderr) == (1, "", NO_STATE_FILE_ERROR)
    assert (tf.state_list(tmp_path).returncode, tf.state_list(tmp_path).stdout) == (0, "")


def test_state_addresses_reads_a_real_state(tmp_path: Path, example_site) -> None:
    ws = Workspace(example_site, root=tmp_path)
    layer = ws.stack_dir("hypervisors")
    layer.mkdir(parents=True)
    tf = _terraform()
    assert state_addresses(tf, ws, "hypervisors") == []
    (layer / "main.tf.json").write_text(json.dumps({"resource": {"terraform_data": {"marker": {"input": "x"}}}}))
    applied = subprocess.run(
        ["terraform", "apply", "-auto-approve", "-input=false", "-no-color"],
        cwd=layer,
        env=tf.environment(layer),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert state_addresses(tf, ws, "hypervisors") == ["terraform_data.marker"]
