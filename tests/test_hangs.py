"""Every operation stops cleanly when an external command hangs: the documented exit code, one line naming the hung
command, no traceback, and the hung command's whole process group (with the child holding its pipes) gone.

The deadlines are shortened ($TERRAVIXENS_TERRAFORM_TIMEOUT, --timeout, Kubectl.timeout); the hanging tools are
tests/fake_hang.py (terraform, kubectl) and tests/fake_talosctl.py (its `hang` table). The commands run as an
operator runs them (`python -m terravixens.cli`), from a temporary folder, with the example site.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.dead_member import DeadMemberOptions, remove_dead_member
from terravixens.operations.kube import Kubectl
from terravixens.operations.workspace import Workspace
from tests import processes
from tests.fake_terraform import OPERATOR_CREDENTIALS
from tests.processes import hanging_tool
from tests.tools_on_path import CONFIRM, LoggedTerraform, Tools
from tests.upgrade_fakes import FIVE, Fake, site_data

ROOT = Path(__file__).resolve().parent.parent
SITE = str(ROOT / "sites" / "example.yaml")


def cli(
    tmp_path: Path, *arguments: str, hang_on: str = "init", **env: str
) -> tuple[subprocess.CompletedProcess, float]:
    terraform = hanging_tool(tmp_path / "bin", "terraform")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env=dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            TERRAFORM_BINARY_NAME=str(terraform),
            FAKE_HANG_ON=hang_on,
            FAKE_HANG_DIR=str(tmp_path),
            TERRAVIXENS_TERRAFORM_TIMEOUT="2s",
            **OPERATOR_CREDENTIALS,
            **env,
        ),
    )
    return result, time.monotonic() - started


def one_line(stderr: str) -> str:
    """The stop's message (one line), after checking what may follow it: at most the operation's journal line,
    `stopped at <where>: done: …; not done: …` (terravixens.operations.journal)."""
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) in (1, 2), stderr
    if len(lines) == 2:
        assert lines[1].startswith("stopped at ") and "; not done: " in lines[1], stderr
    return lines[0]


@pytest.mark.parametrize(
    "command, layer, code",
    [
        (["deploy", "hypervisors", "--yes"], "hypervisors", ExitCode.FAILED),
        (["destroy", "platform-prod", "--confirm", "homelab/platform-prod"], "platform-prod", ExitCode.FAILED),
        (
            ["restore", "hypervisors", "state-backups/old.tfstate", "--confirm", "homelab/hypervisors"],
            "hypervisors",
            ExitCode.FAILED,
        ),
        (["decommission", "prod", "--confirm", "homelab/prod", "--yes"], "gitops-prod", ExitCode.FAILED),
        (["drift", "platform-prod"], "platform-prod", 1),  # drift: every stop is 1, so that 2 always means drift
    ],
)
def test_a_hung_terraform_stops_the_operation(tmp_path, command, layer, code):
    backup = tmp_path / "state-backups" / "old.tfstate"  # restore reads its backup before anything runs
    backup.parent.mkdir(mode=0o700)
    backup.write_text(
        json.dumps(
            {
                "version": 4,
                "terraform_version": "1.11.4",
                "serial": 3,
                "lineage": "5d1c0e2a-6f0b-4c7e-9a51-0c6b1f3e9d20",
                "outputs": {},
                "resources": [],
            }
        )
    )
    result, elapsed = cli(tmp_path, *command, "--site", SITE)
    assert result.returncode == code
    assert one_line(result.stderr) == (
        f"terravixens {command[0]}: {layer}: terraform init did not finish within 2s ($TERRAVIXENS_TERRAFORM_TIMEOUT): "
        f"stopped with its process group; nothing after it was run"
    )
    assert elapsed < 120
    pids = processes.recorded(tmp_path / "hung")
    assert len(pids) == 2 and processes.all_gone(pids)  # terraform and the child that held its stdout


def test_a_hung_talosctl_stops_the_upgrade(tmp_path):
    fake = Fake(tmp_path, dict.fromkeys(FIVE, "v1.11.5"), hang={"upgrade": ["cp-a"]})
    site_file = tmp_path / "site.yaml"
    site_file.write_text(json.dumps(site_data()))
    result, _ = cli(
        tmp_path,
        "upgrade",
        "prod",
        "--site",
        str(site_file),
        "--talosctl",
        str(fake.path),
        "--talosconfig",
        "talosconfig",
        "--timeout",
        "1s",
    )
    assert result.returncode == ExitCode.FAILED and result.stderr == ""  # the last line says where
    assert result.stdout.splitlines()[-1] == (
        "stopped at cp-a: talosctl upgrade failed (on cp-a: talosctl upgrade did not answer within 2s (timeout 1s): "
        "stopped with its process group); done: none; not touched: cp-b, cp-c, wk-a, wk-b"
    )
    assert processes.all_gone(processes.recorded(Path(f"{fake.scenario}.hung")))


def test_a_hung_talosctl_stops_remove_dead_member_before_anything_is_changed(tmp_path):
    tools = Tools(tmp_path, hang={"etcd": ["*"]})
    result, _ = cli(
        tmp_path,
        "remove-dead-member",
        "prod",
        "cp-a",
        "--site",
        SITE,
        "--talosctl",
        str(tools.talosctl_path),
        "--talosconfig",  # given: the platform layer's output is not read (its terraform init would hang here)
        "talosconfig",
        "--confirm",
        CONFIRM,
        "--probes",
        "2",
        "--probe-window",
        "1s",
        "--timeout",
        "1s",
    )
    assert result.returncode == ExitCode.FAILED
    assert one_line(result.stderr) == (
        "terravixens remove-dead-member: talosctl etcd members did not answer within 2s (timeout 1s): stopped with "
        "its process group; nothing was done"
    )
    assert result.stderr.splitlines()[1] == (
        "stopped at etcd members (etcd): done: synth, probe (silent over 1s); not done: etcd members, state check, "
        "backup, etcd removal, Node deletion, forget the apply"
    )
    assert "cp-a (10.11.1.11) probed 2 times over 1s: no answer" in result.stdout
    assert len(tools.state()["members"]) == 3
    pids = processes.recorded(Path(f"{tools.scenario}.hung"))
    assert len(pids) == 4 and processes.all_gone(pids)  # through cp-b, then through cp-c


def test_a_hung_kubectl_after_the_etcd_step_says_what_is_done(example_site, tmp_path):
    tools = Tools(tmp_path)
    kubectl = hanging_tool(tmp_path / "kbin", "kubectl")
    console = Console(out=io.StringIO())
    os.environ.update(FAKE_HANG_ON="delete node", FAKE_HANG_DIR=str(tmp_path))
    try:
        with pytest.raises(OperationError) as caught:
            remove_dead_member(
                Workspace(example_site, root=tmp_path),
                "prod",
                "cp-a",
                LoggedTerraform(tools),
                tools.talosctl(),
                Kubectl(str(kubectl), timeout=1, grace=1),
                console,
                DeadMemberOptions(confirm=CONFIRM, probes=2, probe_window=0.2),
            )
    finally:
        for name in ("FAKE_HANG_ON", "FAKE_HANG_DIR"):
            os.environ.pop(name)
    assert caught.value.code == ExitCode.FAILED
    assert str(caught.value) == (
        "platform-prod: kubectl delete node did not finish within 1s: stopped (SIGTERM, then SIGKILL to its process "
        "group); Node objects not deleted: cp-a (delete them by hand: kubectl delete node NAME)"
    )
    # the line the command prints next (terravixens.cli): the etcd member is gone, the apply still in the state
    assert re.fullmatch(
        r"stopped at Node deletion: done: synth, probe \(silent over 0\.2s\), etcd members \(cp-a is member "
        r"2a8f0e61c5b7d3f9, through cp-b\), state check \(apply in the state\), backup \(state-backups/homelab/"
        r"platform-prod/\S+-remove-dead-cp-a\.tfstate\), etcd removal \(member 2a8f0e61c5b7d3f9\); not done: Node "
        r"deletion, forget the apply",
        console.journal.line(interrupted=False),
    )
    assert [m["hostname"] for m in tools.state()["members"]] == ["cp-b", "cp-c"]
    pids = processes.recorded(tmp_path / "hung")
    assert len(pids) == 2 and processes.all_gone(pids)


def test_a_hung_etcd_remove_member_says_its_outcome_is_unknown(example_site, tmp_path):
    tools = Tools(tmp_path, hang={"etcd remove-member": ["*"]})
    tf = LoggedTerraform(tools)
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        remove_dead_member(
            Workspace(example_site, root=tmp_path),
            "prod",
            "cp-a",
            tf,
            tools.talosctl(timeout=1),
            tools.kubectl(),
            console,
            DeadMemberOptions(confirm=CONFIRM, probes=2, probe_window=0.2),
        )
    assert caught.value.code == ExitCode.FAILED
    assert str(caught.value) == (
        "talosctl etcd remove-member 2a8f0e61c5b7d3f9 through cp-b failed (talosctl etcd remove-member did not answer "
        "within 2s (timeout 1s): stopped with its process group); whether the member was removed is not known: list "
        "the members (talosctl etcd members) and run the same command again"
    )
    # neither done nor not done in the journal's line: not known, with what to check
    line = console.journal.line(interrupted=False)
    assert line.startswith("stopped at etcd removal (remove-member): done: synth, probe (silent over 0.2s), ")
    assert line.endswith(
        "; not known: etcd removal (list the members (talosctl etcd members) and run the same "
        "command again); not done: Node deletion, forget the apply"
    )
    assert not [c for c in tf.calls if c[1:3] == ("state", "rm")] and not tools.kubectl_log.exists()
    assert processes.all_gone(processes.recorded(Path(f"{tools.scenario}.hung")))
