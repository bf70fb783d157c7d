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
from terravixens.operations.terraform import Terraform
from tests.fake_terraform import NO_OUTPUTS_WARNING, FakeTerraform


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
