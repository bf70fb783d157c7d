"""Terraform template sequences from user text never reach Terraform (docs/adr/0016), proved with the real CLI.

A canary file under tmp_path stands for /proc/self/environ (which holds the Proxmox token and S3 keys during a
deploy): its content must never show up in a plan, a state or an output.

1. Without terravixens' checks the attack works: `terraform plan` of a JSON string `${file("<canary>")}` prints
   the canary (this is what makes the other tests able to fail).
2. A site file carrying it (label, bridge comment, taint, Flux branch) is refused by `terravixens validate` and by
   `cdktf synth`'s entry point, with the file, line and field: no JSON is written.
3. A library user's stack carrying it is stopped by rule TV007 at synth.
4. The escape TV007 recommends works: `$${file(...)}` and `%%{...}` stay literal through `validate` and `plan`, and
   the canary is not read.
Offline only (Terraform's built-in terraform_data: no provider, no network).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cdktf import App, DataResource, LocalBackend, TerraformOutput, TerraformStack

from terravixens.logical_ids import pin
from terravixens.rules import apply_rules
from tests import support
from tests.terraform import terraform

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CANARY = "canary-3f9e1c-never-print-me"


@pytest.fixture()
def canary(tmp_path) -> Path:
    path = tmp_path / "environ"
    path.write_text(CANARY)
    return path


def _plan(binary: str, workdir: Path, document: dict) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "main.tf.json").write_text(json.dumps(document))
    init = terraform(binary, workdir, "init", "-backend=false", "-input=false", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    validate = terraform(binary, workdir, "validate", "-no-color")
    assert validate.returncode == 0, validate.stdout + validate.stderr
    return terraform(binary, workdir, "plan", "-input=false", "-no-color", "-out=plan.bin")


def _show(binary: str, workdir: Path) -> dict:
    shown = terraform(binary, workdir, "show", "-json", "plan.bin")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _data(input_value: str) -> dict:
    return {
        "resource": {"terraform_data": {"label": {"input": input_value}}},
        "output": {"label": {"value": "${terraform_data.label.input}"}},
    }


def test_without_the_checks_terraform_reads_the_file(terraform_binary, tmp_path, canary):
    plan = _plan(terraform_binary, tmp_path / "raw", _data(f'${{file("{canary}")}}'))
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert CANARY in plan.stdout  # the attack of issue 7, reproduced


def _site_with(canary: Path, change) -> dict:
    data = support.loopback_data()
    change(data, f'${{file("{canary}")}}')
    return data


SITE_CHANGES = {
    "label": (
        lambda d, v: d["clusters"]["prod"]["workers"]["wk-a"]["labels"].update(pool=v),
        "clusters.prod.workers.wk-a.labels.pool",
    ),
    "bridge comment": (
        lambda d, v: d["hypervisors"]["pve1"]["bridges"]["vmbr1"].update(comment=v),
        "hypervisors.pve1.bridges.vmbr1.comment",
    ),
    "taint": (
        lambda d, v: d["clusters"]["prod"]["workers"]["wk-b"].update(taints=[{"key": "k", "value": v}]),
        "clusters.prod.workers.wk-b.taints.0.value",
    ),
    "flux branch": (lambda d, v: d["clusters"]["prod"]["flux"].update(branch=v), "clusters.prod.flux.branch"),
}


@pytest.mark.parametrize("name", sorted(SITE_CHANGES))
def test_a_site_carrying_it_is_refused_before_any_json(tmp_path, canary, name):
    change, field = SITE_CHANGES[name]
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(_site_with(canary, change), sort_keys=False))
    line = next(number for number, text in enumerate(site.read_text().splitlines(), 1) if "${file(" in text)
    env = dict(os.environ, TERRAVIXENS_SITE=str(site))
    validate = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "validate", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert validate.returncode == 2, validate.stdout + validate.stderr
    assert f"  - line {line}, {field}: " in validate.stderr
    assert "holds '${': Terraform would evaluate it as a template" in validate.stderr
    outdir = tmp_path / "cdktf.out"
    synth = subprocess.run(
        [
            sys.executable,
            "-c",
            (f"import sys; from terravixens.synth import synth_main; sys.exit(synth_main({str(outdir)!r}))"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert synth.returncode == 2, synth.stdout + synth.stderr
    assert not outdir.exists()
    for output in (validate.stdout, validate.stderr, synth.stdout, synth.stderr):
        assert CANARY not in output


def _library_stack(outdir: Path, text: str) -> App:
    app = App(outdir=str(outdir))
    stack = TerraformStack(app, "library")
    LocalBackend(stack, path="library.tfstate")
    label = pin(DataResource(stack, "label", input={"label": text}), "label")
    pin(TerraformOutput(stack, "label_out", value=label.input), "label")
    apply_rules(stack)
    return app


def test_a_library_stack_carrying_it_is_stopped_by_tv007(tmp_path, canary):
    app = _library_stack(tmp_path / "out", f'node label ${{file("{canary}")}}')
    with pytest.raises(RuntimeError) as stopped:
        app.synth()
    assert "[TV007 NoTemplateSequences] terraform_data.label input.label: 'node label ${file(" in str(stopped.value)
    assert not (tmp_path / "out" / "stacks" / "library" / "cdk.tf.json").exists()


def test_the_escape_tv007_recommends_keeps_the_literal(terraform_binary, tmp_path, canary):
    literal = 'node label $${file("' + str(canary) + '")} and %%{ if true }x%%{ endif }'
    app = _library_stack(tmp_path / "out", literal)
    app.synth()  # TV007 lets escaped sequences pass
    stack = json.loads((tmp_path / "out" / "stacks" / "library" / "cdk.tf.json").read_text())
    del stack["terraform"]["backend"]
    plan = _plan(terraform_binary, tmp_path / "escaped", stack)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    expected = 'node label ${file("' + str(canary) + '")} and %{ if true }x%{ endif }'
    outputs = _show(terraform_binary, tmp_path / "escaped")["planned_values"]["outputs"]
    assert outputs["label"]["value"] == {"label": expected}
    assert CANARY not in plan.stdout + plan.stderr
