"""The operations' command line: bad input and missing confirmations stop before anything runs, with their exit
codes (docs/commands.md) and no traceback."""

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fake_terraform import OPERATOR_CREDENTIALS

ROOT = Path(__file__).resolve().parent.parent
SITE = str(ROOT / "sites" / "example.yaml")
# The project's Node.js for jsii (tests/conftest.py), so that stderr holds only what terravixens says.
NODE = {name: os.environ[name] for name in ("JSII_NODE", "NODE_OPTIONS") if name in os.environ}


def cli(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "terravixens.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **NODE, **env},
    )


def test_deploy_unknown_layer_is_bad_input(tmp_path):
    result = cli("deploy", "platform-nowhere", "--site", SITE, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "terravixens deploy: unknown layer 'platform-nowhere': use one of hypervisors, platform-prod, gitops-prod"
    )


def test_destroy_without_a_terminal_needs_the_typed_confirmation(tmp_path):
    result = cli("destroy", "hypervisors", "--site", SITE, cwd=tmp_path)
    assert result.returncode == 3
    assert "no terminal to confirm on: pass --confirm homelab/hypervisors" in result.stderr
    wrong = cli("destroy", "hypervisors", "--site", SITE, "--confirm", "homelab/platform-prod", cwd=tmp_path)
    assert wrong.returncode == 3
    assert "confirmation 'homelab/platform-prod' is not 'homelab/hypervisors': nothing was destroyed" in wrong.stderr
    assert not (tmp_path / "cdktf.out").exists() and not (tmp_path / "state-backups").exists()


def test_decommission_unknown_cluster_and_bad_site(tmp_path):
    result = cli("decommission", "staging", "--site", SITE, cwd=tmp_path)
    assert result.returncode == 2 and "unknown cluster 'staging': use one of prod" in result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("site: Not A Name\n")
    bad = cli("deploy", "--site", str(broken), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith(f"{broken}: ") and "Traceback" not in bad.stderr


def test_review_needs_a_base_or_two_directories(tmp_path):
    assert cli("review", cwd=tmp_path).returncode == 2
    result = cli("review", "--before", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "give BASE, or both --before and --after" in result.stderr


def test_drift_exits_1_on_any_error_so_that_2_always_means_drift(tmp_path):
    unknown = cli("drift", "platform-nowhere", "--site", SITE, cwd=tmp_path)
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip() == (
        "terravixens drift: unknown layer 'platform-nowhere': use one of hypervisors, platform-prod, gitops-prod"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("site: Not A Name\n")
    bad = cli("drift", "--site", str(broken), cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.startswith(f"{broken}: ") and "Traceback" not in bad.stderr
    assert not (tmp_path / "cdktf.out").exists()


# ----------------------------------------------------------------------------- through the real entry point
FAKE_TERRAFORM = """#!/bin/sh
# a Terraform that initialises, then hangs in `plan` until it is killed (its pid written for the test to end it)
echo "$@" >> "{log}"
case "$1" in
  version) echo "Terraform v1.11.4"; echo "on linux_amd64"; exit 0;;
  init) exit 0;;
  plan) echo $$ > "{pid}"; exec sleep 60;;
esac
exit 1
"""


def test_a_rule_stopping_synth_is_refused_not_an_import_error(tmp_path):
    """The issue's report, as a user runs it: a valid site (a label value shaped like a bootstrap token) whose synth
    the safety rules stop. Before: ImportError traceback (exit 1 by accident)."""
    site = tmp_path / "site.yaml"
    text = (
        (ROOT / "sites" / "example.yaml")
        .read_text()
        .replace("node.kubernetes.io/pool: general}", "node.kubernetes.io/pool: abcdef.0123456789abcdef}", 1)
    )
    # a public https fleet repository: no Flux git credentials (no secrets file) needed for this deploy
    text = text.replace(
        "url: ssh://git@git.lab.internal/platform/fleet.git",
        "url: https://git.lab.internal/platform/fleet.git\n      git_auth: none",
        1,
    )
    site.write_text(re.sub(r"\n      git_(secret|credentials_revision): [^\n]*", "", text))
    assert cli("validate", str(site), cwd=tmp_path).returncode == 0
    terraform = tmp_path / "terraform"  # nothing may run: synth asks the Terraform CLI nothing (ADR 0057)
    terraform.write_text(FAKE_TERRAFORM.format(log=tmp_path / "terraform.log", pid=tmp_path / "plan.pid"))
    terraform.chmod(0o755)
    result = cli("deploy", "--site", str(site), cwd=tmp_path, TERRAFORM_BINARY_NAME=str(terraform))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert "terravixens deploy: synth stopped by safety rules:" in lines
    assert any(line.startswith("[platform-prod] [TV006 NoSecretLiterals]") for line in lines)
    assert lines[-1] == "stopped at synth: done: nothing; not done: synth, hypervisors, platform-prod, gitops-prod"
    assert not (tmp_path / "terraform.log").exists()


def test_deploy_without_a_terraform_cli_synthesizes_then_is_a_failed_step_not_a_traceback(tmp_path):
    """The app's synth runs no Terraform CLI (the member list is written from Python: cdktf's terraform_data would
    ask `terraform version`, docs/adr/0057); the first Terraform step without one is FAILED, with the way out."""
    result = cli("deploy", "hypervisors", "--site", SITE, cwd=tmp_path, **OPERATOR_CREDENTIALS)
    assert result.returncode == 4 and "Traceback" not in result.stderr and "    at " not in result.stderr
    assert result.stderr.splitlines() == [
        (
            "terravixens deploy: hypervisors: cannot run terraform: No such file or directory; install Terraform "
            ">= 1.11 or set TERRAFORM_BINARY_NAME"
        ),
        "stopped at hypervisors (init): done: synth; not done: hypervisors",
    ]


def test_save_plan_json_onto_an_existing_file_is_bad_input_before_anything_runs(tmp_path):
    existing = tmp_path / "plan.json"
    existing.write_text("kept")
    result = cli("deploy", "hypervisors", "--site", SITE, "--save-plan-json", str(existing), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"terravixens deploy: --save-plan-json {existing}: the file already exists; give "
        f"a new path or remove it first (nothing was run)"
    )
    assert existing.read_text() == "kept" and not (tmp_path / "cdktf.out").exists()


def test_ctrl_c_during_a_step_prints_one_line_and_exits_130(tmp_path):
    """A real SIGINT to a real `terravixens drift` whose Terraform hangs in `plan`."""
    import signal
    import time

    log, pid = tmp_path / "terraform.log", tmp_path / "plan.pid"
    terraform = tmp_path / "terraform"
    terraform.write_text(FAKE_TERRAFORM.format(log=log, pid=pid))
    terraform.chmod(0o755)
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "TERRAFORM_BINARY_NAME": str(terraform),
        **NODE,
        **OPERATOR_CREDENTIALS,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "terravixens.cli", "drift", "hypervisors", "--site", SITE],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not pid.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert pid.exists(), process.communicate()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        if pid.exists() and pid.read_text().strip():
            subprocess.run(["kill", pid.read_text().strip()], capture_output=True)
    assert process.returncode == 130 and "Traceback" not in err, err
    assert err == (
        "terravixens drift: interrupted by SIGINT (terraform plan stopped with its process group) at "
        "hypervisors (plan): done: synth; not done: hypervisors\n"
    )
    assert out.splitlines()[-1].endswith("hypervisors: plan — -lock=false")
