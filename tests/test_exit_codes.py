"""Every command's documented exit codes, walked: each code a command declares (terravixens.cli.COMMANDS) is produced
by a real run of that command (`cli.main`, in this process) with the meaning the one table gives it
(terravixens.exitcodes), never a traceback — and docs/commands.md and each `--help` say the same as the table.

Terraform is tests/fake_terraform.py behind the command line's one seam (`cli._terraform`); talosctl and kubectl are
fakes on PATH: tests/fake_talosctl.py (talosctl's own output formats and errors) and a kubectl script, as
tests/tools_on_path.py's Tools sets them up, and tests/upgrade_fakes.py's Fake for upgrade. What a real cluster adds
is in tests/integration/.
Ctrl-C is simulated by the fake raising KeyboardInterrupt in the middle of a step, which is what Python (and the
runner, for SIGTERM/SIGHUP) does to the main thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from terravixens import cli, runner
from terravixens.exitcodes import ExitCode, MonitorExit, epilog, markdown, meaning
from terravixens.operations.terraform import Result
from tests import cli_lab, etcd_tool, support
from tests.cli_lab import (
    GITOPS,
    PLANS,
    SNAPSHOT,
    TOKEN_LIKE,
    Lab,
    Scripted,
    cluster_fakes,
    gitops,
    given,
    kept_snapshots,
    platform,
    upgrade_site,
    without,
    without_node,
)
from tests.cluster_fakes import Cluster
from tests.fake_terraform import APPLY, VM, FakeTerraform
from tests.tools_on_path import DISASTER, Tools
from tests.upgrade_fakes import FIVE, IMAGES, ISCSI, Fake, site_data, with_extensions

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "commands.md"
BEGIN, END = "<!-- exit-codes:begin -->", "<!-- exit-codes:end -->"
# A command with no journal, interrupted (terravixens.runner.interrupted_line of a plain Ctrl-C)
NOTHING_STARTED = "interrupted by SIGINT; nothing after it was started; the lines above say what is done"


# ------------------------------------------------------------------------------------------------------- docs
def documented() -> str:
    return "\n".join(f"{BEGIN}\n{markdown([(c.name, c.codes) for c in cli.COMMANDS])}\n{END}".splitlines())


def test_docs_exit_codes_are_the_table():
    """docs/commands.md#exit-codes is rendered from terravixens.exitcodes and the command table; rewrite it with
    TERRAVIXENS_UPDATE_DOCS=1 pipenv run pytest tests/test_exit_codes.py -k docs."""
    text = DOCS.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"{DOCS}: one {BEGIN} … {END} block"
    found = text[text.index(BEGIN) : text.index(END) + len(END)]
    if os.environ.get("TERRAVIXENS_UPDATE_DOCS") and found != documented():
        DOCS.write_text(text.replace(found, documented()))
        found = documented()
    assert found == documented()
    for table in (ExitCode, MonitorExit):
        for code in table:
            assert f"| {int(code)} | `{code.name}` | {meaning(code)} |" in found


def test_docs_name_no_other_exit_code_table():
    """Outside the generated block, docs/commands.md points at it instead of keeping its own lists of codes."""
    text = DOCS.read_text()
    outside = text[: text.index(BEGIN)] + text[text.index(END) :]
    assert not re.search(r"^\| (exit )?code \| (name \| )?meaning \|$", outside, re.M)
    assert "Exit codes (deploy, destroy" not in outside


@pytest.mark.parametrize("entry", cli.COMMANDS, ids=lambda c: c.name)
def test_each_help_lists_its_codes_with_their_meaning(entry, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([*entry.name.split(), "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert (
        text.split("exit codes (docs/commands.md#exit-codes):\n", 1)[1].rstrip("\n")
        == epilog(entry.codes).split("\n", 1)[1]
    )
    for code, _ in entry.codes:
        assert re.search(rf"^  {int(code):<4}{code.name} ", text, re.M), (entry.name, code)
        assert " ".join(meaning(code).split()[:4]) in " ".join(text.split())


def test_one_table_every_code_means_one_thing():
    """A number means the same whichever command returns it (upgrade's old 1 = stopped, 3 = refused are gone)."""
    for entry in cli.COMMANDS:
        for code, _ in entry.codes:
            assert type(code) in (ExitCode, MonitorExit) or entry.name == "spec get", entry.name
    assert [(c.name, int(c)) for c in ExitCode] == [
        ("OK", 0),
        ("REFUSED", 1),
        ("BAD_INPUT", 2),
        ("DECLINED", 3),
        ("FAILED", 4),
        ("BACKUP_FAILED", 5),
        ("CHECK_FAILED", 6),
        ("INTERRUPTED", 130),
    ]
    assert [(c.name, int(c)) for c in MonitorExit] == [("IN_SYNC", 0), ("ERROR", 1), ("FOUND", 2)]
    for table in (ExitCode, MonitorExit):  # one name per code: no alias (TERRAFORM_FAILED was one) hides in a table
        assert list(table.__members__) == [code.name for code in table], table


# ---------------------------------------------------------------------------------------------------- harness
lab = cli_lab.lab  # the fixture


def _applied(tf: FakeTerraform) -> bool:
    return any(call[1] == "apply" for call in tf.calls)


# --------------------------------------------------------------------------------------------- the cases
CASES: dict[tuple[str, str, int], list[Callable[[Lab], None]]] = {}


def case(command: str, code: ExitCode | MonitorExit):
    def register(function: Callable[[Lab], None]) -> Callable[[Lab], None]:
        CASES.setdefault((command, type(code).__name__, int(code)), []).append(function)
        return function

    return register


# deploy ---------------------------------------------------------------------------------------------------
@case("deploy", ExitCode.OK)
def deploy_applies(lab: Lab) -> None:
    lab.tools()
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(without("wk-b")), tf=tf)
    assert ran.code == ExitCode.OK and ran.out.splitlines()[-1] == "deployed: platform-prod"
    assert tf.applied == [
        [f"delete {APPLY}.node_wk-b_apply", f"delete {VM}.node_wk-b_vm", "update terraform_data.cluster_membership"]
    ]


@case("deploy", ExitCode.REFUSED)
def deploy_guard_refuses(lab: Lab) -> None:
    """Every control plane of today replaced by a new one in one site change: no sequence keeps one of today's, so
    the plan is judged as it is (PG002 and PG003)."""
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(_control_planes_replaced), tf=tf)
    assert ran.code == ExitCode.REFUSED and not _applied(tf)
    assert "[PG002 OneControlPlaneLeavesPerApply]" in ran.out and "[PG003 ControlPlaneRemains]" in ran.out
    assert ran.err.splitlines() == [
        "terravixens deploy: platform-prod: plan refused by the guard (2 problems); nothing was applied",
        "stopped at platform-prod (guard): done: synth; not done: platform-prod",
    ]


def _control_planes_replaced(data: dict) -> None:
    prod = data["clusters"]["prod"]
    cp_d = json.loads(json.dumps(prod["control_planes"]["cp-c"]))
    cp_d.update(vm_id=1104)
    cp_d["networks"].update(
        maintenance_ip="10.0.0.54", vlans={111: {"address": "10.11.1.14/24", "gateway": "10.11.1.1"}}
    )
    prod["control_planes"] = {"cp-d": cp_d}


def _scale_in_tools(lab: Lab, **scenario) -> Tools:
    """talosctl answering for every control plane (etcd snapshots genuine), kubectl recording."""
    return lab.tools(unreachable=[], etcd_snapshot=etcd_tool.fake_talosctl_setup(), **scenario)


THREE_TO_ONE = without(control_planes=("cp-b", "cp-c"))


@case("deploy", ExitCode.OK)
def deploy_scale_in_dry_run(lab: Lab) -> None:
    tools = _scale_in_tools(lab)
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--dry-run", "--site", lab.site(THREE_TO_ONE), tf=tf)
    assert ran.code == ExitCode.OK and not _applied(tf) and tools.log() == []
    assert "  1/2 control plane cp-b leaves (etcd 3 → 2 members)" in ran.out.splitlines()
    assert ran.out.splitlines()[-1] == "dry run: nothing applied (platform-prod planned)"


@case("deploy", ExitCode.FAILED)
def deploy_scale_in_health_fails_after_a_step(lab: Lab) -> None:
    """This Terraform's reset leaves cp-b in etcd: talosctl health (etcd members vs control planes) fails after the
    step; the step is applied, the next one not."""
    _scale_in_tools(lab)
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(THREE_TO_ONE), tf=tf)
    assert ran.code == ExitCode.FAILED and tf.applied == [
        [f"delete {APPLY}.node_cp-b_apply", f"delete {VM}.node_cp-b_vm"]
    ]
    assert ran.err.startswith("terravixens deploy: platform-prod: talosctl health after step 1/2 failed (")
    assert "; step 1/2 (cp-b leaves) is applied. Run `terravixens deploy` again once fixed" in ran.err
    assert ran.err.splitlines()[-1] == (
        "stopped at platform-prod step 1/2: cp-b leaves (health): done: synth, platform-prod: cluster check; "
        "not done: platform-prod step 1/2: cp-b leaves, platform-prod step 2/2: cp-c leaves"
    )


@case("deploy", ExitCode.BACKUP_FAILED)
def deploy_scale_in_without_a_verified_snapshot(lab: Lab) -> None:
    lab.tools(unreachable=[], etcd_snapshot=etcd_tool.fake_talosctl_setup("cut"))  # every snapshot cut short
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(THREE_TO_ONE), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED and not _applied(tf)
    assert "terravixens deploy: platform-prod: no verified etcd snapshot before scale-in step 1/2, cp-b leaves" in (
        ran.err
    )


@case("deploy", ExitCode.BAD_INPUT)
def deploy_scale_in_without_a_talosconfig(lab: Lab) -> None:
    tools = _scale_in_tools(lab)
    tf = platform()
    tf.states["platform-prod"].pop("talos_machine_secrets.cluster_secrets")  # no talosconfig output
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(THREE_TO_ONE), tf=tf)
    assert ran.code == ExitCode.BAD_INPUT and not _applied(tf) and tools.log() == []
    assert "platform-prod has no talosconfig output (not applied, or its state is elsewhere): give one with " in (
        ran.err
    )


@case("deploy", ExitCode.BAD_INPUT)
def deploy_plan_json_onto_an_existing_file(lab: Lab) -> None:
    existing = lab.folder / "plan.json"
    existing.write_text("someone's file")
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--save-plan-json", str(existing), "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BAD_INPUT and ran.out == ""
    assert ran.err.strip() == (
        f"terravixens deploy: --save-plan-json {existing}: the file already exists; give a new "
        f"path or remove it first (nothing was run)"
    )
    assert tf.calls == [] and not (lab.folder / "cdktf.out").exists() and existing.read_text() == "someone's file"


@case("deploy", ExitCode.BAD_INPUT)
def deploy_plan_json_per_layer_onto_an_existing_file(lab: Lab) -> None:
    (lab.folder / "plan-platform-prod.json").write_text("")
    ran = lab.run("deploy", "hypervisors", "platform-prod", "--save-plan-json", "plan.json", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and "--save-plan-json plan-platform-prod.json: the file already" in ran.err


@case("deploy", ExitCode.BAD_INPUT)
def deploy_plan_json_into_a_file_as_folder(lab: Lab) -> None:
    (lab.folder / "file").write_text("")
    ran = lab.run("deploy", "--save-plan-json", "file/plan.json", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and "is not a folder this user can write into" in ran.err


@case("deploy", ExitCode.DECLINED)
def deploy_without_a_terminal(lab: Lab) -> None:
    tf = platform()
    ran = lab.run("deploy", "platform-prod", "--site", lab.site(without("wk-b")), tf=tf)
    assert ran.code == ExitCode.DECLINED and not _applied(tf)
    assert ran.err.splitlines() == [
        "terravixens deploy: platform-prod: no terminal to confirm on and no --yes: nothing was applied",
        "stopped at platform-prod (confirm): done: synth; not done: platform-prod",
    ]


@case("deploy", ExitCode.FAILED)
def deploy_apply_fails(lab: Lab) -> None:
    tf = platform(fail={"apply": 1})
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(without("wk-b")), tf=tf)
    assert ran.code == ExitCode.FAILED
    assert "terravixens deploy: platform-prod: terraform apply failed (exit 1); the state before it is in " in ran.err
    assert ran.err.splitlines()[-1] == "stopped at platform-prod (apply): done: synth; not done: platform-prod"


@case("deploy", ExitCode.BACKUP_FAILED)
def deploy_backup_fails(lab: Lab) -> None:
    tf = platform(fail={"state pull": 1})
    ran = lab.run("deploy", "platform-prod", "--yes", "--site", lab.site(without("wk-b")), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED and not _applied(tf)
    assert "terravixens deploy: platform-prod: terraform state pull failed" in ran.err
    assert ran.err.splitlines()[-1] == "stopped at platform-prod (backup): done: synth; not done: platform-prod"


@case("deploy", ExitCode.INTERRUPTED)
def deploy_interrupted(lab: Lab) -> None:
    tf = platform(interrupt={"apply": 1})
    ran = lab.run("deploy", "hypervisors", "platform-prod", "--yes", "--site", lab.site(without("wk-b")), tf=tf)
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err.splitlines() == [
        (
            "terravixens deploy: interrupted by SIGINT at platform-prod (apply): done: synth, hypervisors "
            "(no changes); not done: platform-prod"
        )
    ]


@case("deploy", ExitCode.CHECK_FAILED)
def deploy_then_check_finds_a_problem(lab: Lab) -> None:
    fakes, site = cluster_fakes(lab, without_node("wk-b"))
    lab.monkeypatch.setenv("KUBECTL", str(fakes.kubectl_path))
    tf = platform()
    tf.outputs = {
        "platform-prod": {"talosconfig": fakes.talosconfig.read_text(), "kubeconfig": fakes.kubeconfig.read_text()}
    }
    ran = lab.run(
        "deploy",
        "platform-prod",
        "gitops-prod",
        "--yes",
        "--check",
        "--check-wait",
        "0",
        "--talosctl",
        str(fakes.talosctl_path),
        "--site",
        site,
        tf=tf,
    )
    assert ran.code == ExitCode.CHECK_FAILED
    assert (
        "  nodes: problem — no Kubernetes Node wk-b (site node wk-b, 10.11.1.22): its kubelet has not registered: "
        "`talosctl -n 10.11.1.22 logs kubelet`"
    ) in ran.out.splitlines()
    assert ran.err.splitlines() == [
        (
            "terravixens deploy: check prod: 1 problem (nodes); ok: talos, services, cilium, l2, flux, logs, "
            "certificates: what was applied stays applied; fix what the lines above say, then `terravixens check prod`"
        ),
        (
            "stopped at the end: done: synth, platform-prod (no changes), gitops-prod (no changes), check prod "
            "(problems); not done: nothing"
        ),
    ]


# check ----------------------------------------------------------------------------------------------------
@case("check", MonitorExit.IN_SYNC)
def check_passes(lab: Lab) -> None:
    fakes, site = cluster_fakes(lab)
    ran = lab.run("check", "prod", *given(fakes), "--site", site)
    assert ran.code == MonitorExit.IN_SYNC and ran.err == ""
    assert ran.out.splitlines()[-1] == (
        "check prod: every check passed (talos, services, nodes, cilium, l2, flux, logs, certificates)"
    )


@case("check", MonitorExit.FOUND)
def check_finds_a_problem(lab: Lab) -> None:
    fakes, site = cluster_fakes(lab, without_node("wk-b"))
    ran = lab.run("check", "prod", *given(fakes), "--json", "--site", site)
    assert ran.code == MonitorExit.FOUND and json.loads(ran.out)["result"] == "problems"


@case("check", MonitorExit.ERROR)
def check_cannot_look(lab: Lab) -> None:
    tf = platform()
    tf.outputs = {"platform-prod": {"talosconfig": None, "kubeconfig": None}}  # its platform layer has no outputs
    ran = lab.run("check", "prod", "--site", lab.site(), tf=tf)
    assert ran.code == MonitorExit.ERROR and ran.err == ""
    assert ran.out.splitlines()[-1] == (
        "check prod: not checked: talos, services, nodes, cilium, l2, flux, logs, certificates; ok: none"
    )


@case("check", MonitorExit.ERROR)
def check_unknown_cluster(lab: Lab) -> None:
    ran = lab.run("check", "qa", "--site", lab.site())
    assert ran.code == MonitorExit.ERROR and "unknown cluster 'qa': use one of prod" in ran.err


@case("check", MonitorExit.ERROR)
def check_bad_since(lab: Lab) -> None:
    ran = lab.run("check", "prod", "--since", "yesterday", "--site", lab.site())
    assert ran.code == MonitorExit.ERROR and "--since 'yesterday': give a duration back from now" in ran.err


@case("check", ExitCode.INTERRUPTED)
def check_interrupted(lab: Lab) -> None:
    ran = lab.run("check", "prod", "--site", lab.site(), tf=platform(interrupt={"output": 1}))
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err == "terravixens check: interrupted by SIGINT at check prod: done: synth; not done: check prod\n"


# destroy --------------------------------------------------------------------------------------------------
@case("destroy", ExitCode.OK)
def destroy_a_layer(lab: Lab) -> None:
    tf = gitops()
    ran = lab.run("destroy", "gitops-prod", "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.OK and tf.applied == [["delete helm_release.cluster_flux"]]
    assert ran.out.splitlines()[-1].startswith("destroyed gitops-prod; restore the state with: terravixens restore")


@case("destroy", ExitCode.REFUSED)
def destroy_a_platform_layer(lab: Lab) -> None:
    tf = platform()
    ran = lab.run("destroy", "platform-prod", "--confirm", "homelab/platform-prod", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.REFUSED and not _applied(tf)
    assert "A platform layer is torn down with `terravixens decommission CLUSTER`" in ran.err
    assert re.search(
        r"^stopped at destroy platform-prod \(plan\): done: synth, checks, backup \(state-backups/homelab/"
        r"platform-prod/\S+-before-destroy\.tfstate\); not done: destroy platform-prod$",
        ran.err,
        re.M,
    )


@case("destroy", ExitCode.BAD_INPUT)
def destroy_unknown_layer(lab: Lab) -> None:
    ran = lab.run("destroy", "platform-nowhere", "--confirm", "homelab/platform-nowhere", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT
    assert ran.err.strip() == (
        "terravixens destroy: unknown layer 'platform-nowhere': use one of hypervisors, platform-prod, gitops-prod"
    )


@case("destroy", ExitCode.DECLINED)
def destroy_unconfirmed(lab: Lab) -> None:
    ran = lab.run("destroy", "gitops-prod", "--site", lab.site())
    assert ran.code == ExitCode.DECLINED
    assert ran.err.strip() == "terravixens destroy: no terminal to confirm on: pass --confirm homelab/gitops-prod"


@case("destroy", ExitCode.FAILED)
def destroy_apply_fails(lab: Lab) -> None:
    tf = gitops(fail={"apply": 1})
    ran = lab.run("destroy", "gitops-prod", "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.FAILED and "gitops-prod: terraform apply failed (exit 1)" in ran.err


@case("destroy", ExitCode.BACKUP_FAILED)
def destroy_backup_fails(lab: Lab) -> None:
    tf = gitops(fail={"state pull": 1})
    ran = lab.run("destroy", "gitops-prod", "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED and not _applied(tf)
    assert ran.err.splitlines()[-1] == "stopped at backup: done: synth, checks; not done: backup, destroy gitops-prod"


@case("destroy", ExitCode.INTERRUPTED)
def destroy_interrupted(lab: Lab) -> None:
    tf = gitops(interrupt={"apply": 1})
    ran = lab.run("destroy", "gitops-prod", "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.INTERRUPTED
    assert re.fullmatch(
        r"terravixens destroy: interrupted by SIGINT at destroy gitops-prod \(apply\): done: synth, "
        r"checks, backup "
        r"\(state-backups/homelab/gitops-prod/\S+-before-destroy\.tfstate\); not done: destroy "
        r"gitops-prod\n",
        ran.err,
    )


# restore --------------------------------------------------------------------------------------------------
@case("restore", ExitCode.OK)
def restore_a_backup(lab: Lab) -> None:
    tf = gitops()
    ran = lab.run(
        "restore", "gitops-prod", lab.backup(), "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf
    )
    assert ran.code == ExitCode.OK and tf.pushed["gitops-prod"]["lineage"] == "lineage-gitops-prod"
    assert "gitops-prod: restore — state of serial 1 (0 resources) pushed" in ran.out


@case("restore", ExitCode.BAD_INPUT)
def restore_another_lineage(lab: Lab) -> None:
    tf = gitops()
    ran = lab.run(
        "restore",
        "gitops-prod",
        lab.backup(lineage="other"),
        "--confirm",
        "homelab/gitops-prod",
        "--site",
        lab.site(),
        tf=tf,
    )
    assert ran.code == ExitCode.BAD_INPUT and "lineage other is not the layer's (lineage-gitops-prod)" in ran.err
    assert "gitops-prod" not in tf.pushed


@case("restore", ExitCode.BAD_INPUT)
def restore_not_a_state(lab: Lab) -> None:
    ran = lab.run("restore", "gitops-prod", lab.site(), "--confirm", "homelab/gitops-prod", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and ": not a Terraform state (no lineage and serial)" in ran.err
    assert not (lab.folder / "cdktf.out").exists()  # before anything ran


@case("restore", ExitCode.DECLINED)
def restore_unconfirmed(lab: Lab) -> None:
    ran = lab.run("restore", "gitops-prod", lab.backup(), "--confirm", "homelab/hypervisors", "--site", lab.site())
    assert ran.code == ExitCode.DECLINED and "is not 'homelab/gitops-prod'" in ran.err


@case("restore", ExitCode.FAILED)
def restore_push_fails(lab: Lab) -> None:
    tf = gitops(fail={"state push": 1})
    ran = lab.run(
        "restore", "gitops-prod", lab.backup(), "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf
    )
    assert ran.code == ExitCode.FAILED and "gitops-prod: terraform state push failed" in ran.err
    assert ran.err.splitlines()[-1] == "stopped at restore gitops-prod: done: synth; not done: restore gitops-prod"


@case("restore", ExitCode.BACKUP_FAILED)
def restore_backup_of_the_current_state_fails(lab: Lab) -> None:
    tf = gitops(fail={"state pull": 1})
    ran = lab.run(
        "restore", "gitops-prod", lab.backup(), "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf
    )
    assert ran.code == ExitCode.BACKUP_FAILED and "gitops-prod" not in tf.pushed


@case("restore", ExitCode.INTERRUPTED)
def restore_interrupted(lab: Lab) -> None:
    tf = gitops(interrupt={"state push": 1})
    ran = lab.run(
        "restore", "gitops-prod", lab.backup(), "--confirm", "homelab/gitops-prod", "--site", lab.site(), tf=tf
    )
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err == (
        "terravixens restore: interrupted by SIGINT at restore gitops-prod: done: synth; not done: "
        "restore gitops-prod\n"
    )


# decommission ---------------------------------------------------------------------------------------------
DECOMMISSION = ("decommission", "prod", "--confirm", "homelab/prod")
RESETS = (
    "reset workers wk-a, wk-b, reset control plane cp-b, reset control plane cp-c, reset the last control plane cp-a"
)
# the snapshot before the first reset, through cp-b (cp-a, 10.11.1.11, does not answer in Tools)
SNAPSHOT_DONE = r"etcd snapshot \(etcd-snapshots/homelab/prod/prod_\S+_cp-b_decommission\.snapshot\)"


@case("decommission", ExitCode.OK)
def decommission_a_cluster(lab: Lab) -> None:
    lab.tools()
    tf = platform()
    ran = lab.run(*DECOMMISSION, "--yes", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.OK and len(tf.applied) == 5
    assert ran.out.splitlines()[-1] == "decommissioned prod: 7 resources left in platform-prod"


@case("decommission", ExitCode.REFUSED)
def decommission_with_gitops_left(lab: Lab) -> None:
    tf = platform()
    tf.states["gitops-prod"] = json.loads(json.dumps(GITOPS))
    ran = lab.run(*DECOMMISSION, "--yes", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.REFUSED and not _applied(tf)
    assert ran.err.splitlines() == [
        (
            "terravixens decommission: gitops-prod still has resources: destroy it first (terravixens destroy "
            "gitops-prod); nothing was changed"
        ),
        "stopped at checks: done: synth; not done: checks, etcd snapshot, prepare, the resets",
    ]


@case("decommission", ExitCode.BAD_INPUT)
def decommission_unknown_cluster(lab: Lab) -> None:
    ran = lab.run("decommission", "staging", "--confirm", "homelab/staging", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and ran.err.strip() == (
        "terravixens decommission: unknown cluster 'staging': use one of prod"
    )


@case("decommission", ExitCode.DECLINED)
def decommission_step_unconfirmed(lab: Lab) -> None:
    lab.tools()
    tf = platform()
    ran = lab.run(*DECOMMISSION, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.DECLINED and not _applied(tf)
    assert re.fullmatch(
        rf"stopped at prepare \(confirm\): done: synth, checks, {SNAPSHOT_DONE}; not done: prepare, {RESETS}",
        ran.err.splitlines()[-1],
    )


@case("decommission", ExitCode.FAILED)
def decommission_reset_fails(lab: Lab) -> None:
    lab.tools()
    tf = platform(fail={"apply": 3})
    ran = lab.run(*DECOMMISSION, "--yes", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.FAILED and "platform-prod: terraform apply failed (exit 1)" in ran.err
    assert re.fullmatch(
        rf"stopped at reset control plane cp-b \(apply\): done: synth, checks, {SNAPSHOT_DONE}, prepare, reset workers "
        rf"wk-a, wk-b; not done: reset control plane cp-b, reset control plane cp-c, reset the last control plane cp-a",
        ran.err.splitlines()[-1],
    )


@case("decommission", ExitCode.BACKUP_FAILED)
def decommission_backup_fails(lab: Lab) -> None:
    lab.tools()
    tf = platform(fail={"state pull": 1})
    ran = lab.run(*DECOMMISSION, "--yes", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED and not _applied(tf)


@case("decommission", ExitCode.BACKUP_FAILED)
def decommission_snapshot_fails(lab: Lab) -> None:
    tools = lab.tools(etcd_snapshot=etcd_tool.fake_talosctl_setup("flip"))
    tf = platform()
    ran = lab.run(*DECOMMISSION, "--yes", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED and not _applied(tf)
    assert ran.err.splitlines()[-2:] == [
        (
            "terravixens decommission: platform-prod: no verified etcd snapshot before decommission (3 control planes "
            "tried); nothing was changed. Fix what the lines above say, or — knowing the risk — pass --no-snapshot "
            "REASON"
        ),
        f"stopped at etcd snapshot (snapshot): done: synth, checks; not done: etcd snapshot, prepare, {RESETS}",
    ]
    assert [line.split()[1] for line in tools.log() if " etcd snapshot " in line] == [
        "10.11.1.11",
        "10.11.1.12",
        "10.11.1.13",
    ]


@case("decommission", ExitCode.INTERRUPTED)
def decommission_interrupted(lab: Lab) -> None:
    lab.tools()
    tf = platform(interrupt={"apply": 2})
    ran = lab.run(*DECOMMISSION, "--yes", "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.INTERRUPTED
    assert re.fullmatch(
        rf"terravixens decommission: interrupted by SIGINT at reset workers wk-a, wk-b \(apply\): done: "
        rf"synth, checks, {SNAPSHOT_DONE}, prepare; not done: {RESETS}\n",
        ran.err,
    )
    # cdktf.out is back to the normal synth even so (the decommission settings never stay there)
    stack = json.loads((lab.folder / "cdktf.out" / "stacks" / "platform-prod" / "cdk.tf.json").read_text())
    assert {body["on_destroy"]["graceful"] for body in stack["resource"][APPLY].values()} == {True}


# remove-dead-member ---------------------------------------------------------------------------------------
# cp-a (10.11.1.11) does not answer (talosctl's own unreachable error); cp-b and cp-c list the three members. The
# probes are shortened to 2 over 1s.
DEAD = ("remove-dead-member", "prod", "cp-a")
PROBES = ("--probes", "2", "--probe-window", "1s")
CONFIRMED = (*DEAD, "--confirm", "homelab/prod/cp-a", *PROBES)
# the talosconfig is the platform layer's output (no --talosconfig), read right after synth
BEFORE_ETCD = "synth, talosconfig, probe (silent over 1s), etcd members (cp-a is member 2a8f0e61c5b7d3f9, through cp-b)"
BACKED_UP = r"backup \(state-backups/homelab/platform-prod/\S+-remove-dead-cp-a\.tfstate\)"
IRREVERSIBLE = "etcd removal, Node deletion, forget the apply"


def _members(tools: Tools) -> list[str]:
    return [member["hostname"] for member in tools.state()["members"]]


def _etcd_untouched(tools: Tools, tf: Scripted) -> None:
    assert _members(tools) == ["cp-a", "cp-b", "cp-c"]
    assert not [call for call in tools.log() if "remove-member" in call] and not tools.kubectl_log.exists()
    assert f"{APPLY}.node_cp-a_apply" in tf.states["platform-prod"]


@case("remove-dead-member", ExitCode.OK)
def dead_member_removed(lab: Lab) -> None:
    tools = lab.tools()
    tf = platform()
    ran = lab.run(*CONFIRMED, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.OK and ran.err == ""
    assert "talosctl 10.11.1.12 etcd remove-member 2a8f0e61c5b7d3f9" in tools.log()
    snapshot = next(line for line in tools.log() if " etcd snapshot " in line)  # right before, through cp-b
    assert tools.log().index(snapshot) + 1 == tools.log().index(
        "talosctl 10.11.1.12 etcd remove-member 2a8f0e61c5b7d3f9"
    )
    assert snapshot.startswith("talosctl 10.11.1.12 etcd snapshot ")
    assert _members(tools) == ["cp-b", "cp-c"] and f"{APPLY}.node_cp-a_apply" not in tf.states["platform-prod"]
    assert tools.kubectl_log.read_text().split()[2:5] == ["delete", "node", "cp-a"]
    assert ran.out.splitlines()[-1].startswith("next: remove cp-a from clusters.prod.control_planes in the site file")


@case("remove-dead-member", ExitCode.REFUSED)
def dead_member_answers(lab: Lab) -> None:
    tools = lab.tools()
    ran = lab.run(
        "remove-dead-member",
        "prod",
        "cp-b",
        "--confirm",
        "homelab/prod/cp-b",
        *PROBES,
        "--site",
        lab.site(),
        tf=platform(),
    )
    assert ran.code == ExitCode.REFUSED
    assert ran.err.splitlines() == [
        (
            "terravixens remove-dead-member: cp-b (10.11.1.12) answered probe 1 of 2 (at 0s of 1s): it is alive. "
            "Remove it the normal way (take it out of the site file and deploy; its reset leaves etcd gracefully); if "
            "its etcd is broken while Talos answers, pass --force; nothing was done"
        ),
        (
            f"stopped at probe: done: synth, talosconfig; not done: probe, etcd members, state check, backup, "
            f"{IRREVERSIBLE}"
        ),
    ]
    assert tools.log() == ["talosctl 10.11.1.12 version"] and len(_members(tools)) == 3


@case("remove-dead-member", ExitCode.BAD_INPUT)
def dead_member_is_a_worker(lab: Lab) -> None:
    ran = lab.run("remove-dead-member", "prod", "wk-a", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and "'wk-a' is not a control plane of prod in the site file" in ran.err


@case("remove-dead-member", ExitCode.DECLINED)
def dead_member_without_a_terminal_or_confirm(lab: Lab) -> None:
    tools = lab.tools()
    ran = lab.run(*DEAD, *PROBES, "--site", lab.site())
    assert ran.code == ExitCode.DECLINED and ran.out == ""
    assert ran.err == (
        "terravixens remove-dead-member: no terminal to confirm on: pass --confirm homelab/prod/cp-a; "
        "nothing was done\n"
    )
    assert tools.log() == [] and not (lab.folder / "cdktf.out").exists()  # not even a synth


@case("remove-dead-member", ExitCode.FAILED)
def dead_member_remove_member_fails(lab: Lab) -> None:
    tools = lab.tools(fail={"etcd remove-member": ["10.11.1.12"]})
    tf = platform()
    ran = lab.run(*CONFIRMED, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.FAILED
    message, line = ran.err.splitlines()
    assert message == (
        "terravixens remove-dead-member: talosctl etcd remove-member 2a8f0e61c5b7d3f9 through cp-b "
        "failed (exit 1: error: etcd on 10.11.1.12 failed: rpc error: code = Unavailable); etcd is "
        "unchanged"
    )
    assert re.fullmatch(
        rf"stopped at etcd removal \(remove-member\): done: {re.escape(BEFORE_ETCD)}, state check \(apply in the "
        rf"state\), {BACKED_UP}; not done: {IRREVERSIBLE}",
        line,
    )
    assert tools.log()[-1] == "talosctl 10.11.1.12 etcd remove-member 2a8f0e61c5b7d3f9"
    assert _members(tools) == ["cp-a", "cp-b", "cp-c"] and f"{APPLY}.node_cp-a_apply" in tf.states["platform-prod"]


@case("remove-dead-member", ExitCode.BACKUP_FAILED)
def dead_member_backup_fails(lab: Lab) -> None:
    tools = lab.tools()
    tf = platform(fail={"state pull": 1})
    ran = lab.run(*CONFIRMED, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED
    assert ran.err.splitlines()[-1] == (
        f"stopped at backup: done: {BEFORE_ETCD}, state check (apply in the state); not done: backup, {IRREVERSIBLE}"
    )
    _etcd_untouched(tools, tf)


@case("remove-dead-member", ExitCode.BACKUP_FAILED)
def dead_member_snapshot_fails(lab: Lab) -> None:
    tools = lab.tools(etcd_snapshot=etcd_tool.fake_talosctl_setup("cut"))
    tf = platform()
    ran = lab.run(*CONFIRMED, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED
    message, line = ran.err.splitlines()
    assert message.startswith(
        "terravixens remove-dead-member: platform-prod: no verified etcd snapshot before the removal of cp-a (3 "
        "control planes tried); nothing was changed."
    )
    assert re.fullmatch(
        rf"stopped at etcd removal \(snapshot\): done: {re.escape(BEFORE_ETCD)}, state check \(apply in the state\), "
        rf"{BACKED_UP}; not done: {IRREVERSIBLE}",
        line,
    )
    # through the live control planes first, the dead one last
    assert [line.split()[1] for line in tools.log() if " etcd snapshot " in line] == [
        "10.11.1.12",
        "10.11.1.13",
        "10.11.1.11",
    ]
    _etcd_untouched(tools, tf)


@case("remove-dead-member", ExitCode.INTERRUPTED)
def dead_member_interrupted_before_etcd(lab: Lab) -> None:
    tools = lab.tools()
    tf = platform(interrupt={"state list": 1})
    ran = lab.run(*CONFIRMED, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err == (
        f"terravixens remove-dead-member: interrupted by SIGINT at state check: done: "
        f"{BEFORE_ETCD}; not done: state check, backup, {IRREVERSIBLE}\n"
    )
    _etcd_untouched(tools, tf)


@case("remove-dead-member", ExitCode.INTERRUPTED)
def dead_member_interrupted_during_the_removal(lab: Lab) -> None:
    """Ctrl-C while `etcd remove-member` runs: it may have reached etcd, so its outcome is said to be not known."""
    from terravixens.talosctl import Talosctl

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    tools = lab.tools()
    lab.monkeypatch.setattr(Talosctl, "etcd_remove_member", interrupted)
    tf = platform()
    ran = lab.run(*CONFIRMED, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.INTERRUPTED
    assert re.fullmatch(
        rf"terravixens remove-dead-member: interrupted by SIGINT at etcd removal \(remove-member\): done: "
        rf"{re.escape(BEFORE_ETCD)}, "
        rf"state check \(apply in the state\), {BACKED_UP}; not known: etcd removal \(list the members \(talosctl etcd "
        rf"members\) and run the same command again\); not done: Node deletion, forget the apply\n",
        ran.err,
    )
    assert f"{APPLY}.node_cp-a_apply" in tf.states["platform-prod"] and not tools.kubectl_log.exists()


# maintain -------------------------------------------------------------------------------------------------
def _maintain_world(lab: Lab, change: Callable[[dict], None] | None = None):
    """A three-host site on the fake Proxmox VE with its cluster fakes (tests/maintenance_fakes.World); the API's
    credentials and CA in the environment, as an operator exports them for bpg/proxmox."""
    from tests.maintenance_fakes import World

    world = World(lab.folder / "world", change)
    for key, value in world.server.provider_env().items():
        lab.monkeypatch.setenv(key, value)
    lab.monkeypatch.delenv("PROXMOX_VE_API_TOKEN", raising=False)
    return world


def _maintain(world, hypervisor: str = "pve1", *extra: str) -> tuple[str, ...]:
    return (
        "maintain",
        hypervisor,
        "--site",
        str(world.site_path),
        "--talosctl",
        str(world.cluster.talosctl_path),
        "--kubectl",
        str(world.cluster.kubectl_path),
        "--talosconfig",
        str(world.cluster.talosconfig),
        "--kubeconfig",
        str(world.cluster.kubeconfig),
        "--timeout",
        "20s",
        "--drain-timeout",
        "10s",
        "--check-wait",
        "0",
        *extra,
    )


def _majority_on_pve1(data: dict) -> None:
    planes = data["clusters"]["prod"]["control_planes"]
    planes["cp-b"]["hypervisor"] = planes["cp-c"]["hypervisor"] = "pve1"
    data["clusters"]["prod"]["placement"] = {"allow_control_plane_majority_on": "pve1", "reason": "one host for now"}


@case("maintain", ExitCode.OK)
def maintain_dry_run(lab: Lab) -> None:
    ran = lab.run("maintain", "pve2", "--dry-run", "--site", lab.site())
    assert ran.code == ExitCode.OK and ran.err == ""
    assert ran.out.splitlines()[1].startswith("  prod/wk-b (worker, vm 1202, 10.11.1.22): health")


@case("maintain", ExitCode.OK)
def maintain_then_done(lab: Lab) -> None:
    world = _maintain_world(lab)
    try:
        ran = lab.run(*_maintain(world, "pve2", "--confirm", "homelab/pve2"))
        assert ran.code == ExitCode.OK, ran.err
        assert "patch it and reboot it, then run `bin/terravixens maintain pve2 --done`" in ran.out
        ran = lab.run(*_maintain(world, "pve2", "--done"))
        assert ran.code == ExitCode.OK, ran.err
        assert "check prod: every check passed" in ran.out
    finally:
        world.stop()


@case("maintain", ExitCode.REFUSED)
def maintain_would_lose_quorum(lab: Lab) -> None:
    ran = lab.run("maintain", "pve1", "--confirm", "homelab/pve1", "--site", lab.site(_majority_on_pve1))
    assert ran.code == ExitCode.REFUSED
    assert ran.err.startswith("terravixens maintain: prod: emptying pve1 shuts down cp-a, cp-b, cp-c: 0 of 3 etcd")
    assert ran.err.rstrip().endswith("; nothing was changed")


@case("maintain", ExitCode.BAD_INPUT)
def maintain_unknown_hypervisor(lab: Lab) -> None:
    ran = lab.run("maintain", "pve9", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT
    assert ran.err.startswith("terravixens maintain: unknown hypervisor 'pve9': use one of pve1, pve2")


@case("maintain", ExitCode.DECLINED)
def maintain_not_confirmed(lab: Lab) -> None:
    world = _maintain_world(lab)
    try:
        ran = lab.run(*_maintain(world))
        assert ran.code == ExitCode.DECLINED
        assert ran.err.splitlines() == [
            "terravixens maintain: no terminal to confirm on: pass --confirm homelab/pve1",
            "stopped at prod/wk-a: done: placement; not done: prod/wk-a, prod/cp-a, guest tools, guest nest1, the host",
        ]
        assert world.talos_calls("shutdown") == []
    finally:
        world.stop()


@case("maintain", ExitCode.BACKUP_FAILED)
def maintain_snapshot_does_not_verify(lab: Lab) -> None:
    world = _maintain_world(lab)
    try:
        world.cluster.talos(lambda state: state.update(etcd_snapshot=etcd_tool.fake_talosctl_setup("flip")))
        ran = lab.run(*_maintain(world, "pve1", "--confirm", "homelab/pve1"))
        assert ran.code == ExitCode.BACKUP_FAILED
        assert ran.err.splitlines()[-1] == (
            "stopped at prod/cp-a (snapshot): done: placement, prod/wk-a; not done: prod/cp-a, guest tools, guest "
            "nest1, the host"
        )
        assert world.talos_calls("shutdown") == [world.cluster.address("wk-a")]  # cp-a: not shut down
    finally:
        world.stop()


@case("maintain", ExitCode.FAILED)
def maintain_drain_blocked(lab: Lab) -> None:
    world = _maintain_world(lab)
    try:
        world.cluster.kube(lambda state: state.update(blocked_evictions=["web-2"]))
        ran = lab.run(*_maintain(world, "pve1", "--confirm", "homelab/pve1"))
        assert ran.code == ExitCode.FAILED
        assert "kubectl drain wk-a failed" in ran.err and world.talos_calls("shutdown") == []
    finally:
        world.stop()


@case("maintain", ExitCode.CHECK_FAILED)
def maintain_done_check_finds_a_problem(lab: Lab) -> None:
    from tests import kube_objects as k

    world = _maintain_world(lab)
    try:
        assert lab.run(*_maintain(world, "pve3", "--confirm", "homelab/pve3")).code == ExitCode.OK
        world.cluster.objects(
            "kustomizations.kustomize.toolkit.fluxcd.io",
            [k.kustomization(ready="False", reason="BuildFailed", message="kustomize build failed")],
        )
        ran = lab.run(*_maintain(world, "pve3", "--done"))
        assert ran.code == ExitCode.CHECK_FAILED
        assert "every node is back; fix what the lines above say" in ran.err
        assert all(status == "running" for status in world.machines.statuses().values())
    finally:
        world.stop()


@case("maintain", ExitCode.INTERRUPTED)
def maintain_interrupted(lab: Lab) -> None:
    from terravixens.proxmox_api import ProxmoxApi

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    lab.monkeypatch.setattr(ProxmoxApi, "guests", interrupted)
    given = lab.folder / "config"
    given.write_text("context: prod\n")
    ran = lab.run("maintain", "pve2", "--site", lab.site(), "--talosconfig", str(given), "--kubeconfig", str(given))
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err.splitlines()[-1] == (
        "terravixens maintain: interrupted by SIGINT at placement (proxmox): done: nothing; not done: placement, "
        "prod/wk-b, prod/cp-b, the host"
    )


# renew-credentials ----------------------------------------------------------------------------------------
class _Renewable:
    """tests/renewal_fakes.RenewableTerraform, told to fail (exit 1) or be interrupted at a command."""

    @staticmethod
    def make(fail: str | None = None, interrupt: str | None = None, **certificates: float):
        from tests.renewal_fakes import RenewableTerraform

        class Scripted(RenewableTerraform):
            def run(self, workdir: Path, *args: str) -> Result:
                if fail and " ".join(args).startswith(fail):
                    return Result(1, "", f"Error: {fail} failed (scripted by the test)")
                return super().run(workdir, *args)

            def run_json(self, workdir: Path, *args: str, on_message=None) -> Result:
                if interrupt and " ".join(args).startswith(interrupt):
                    raise KeyboardInterrupt
                if fail and " ".join(args).startswith(fail):
                    return Result(1, "", f"Error: {fail} failed (scripted by the test)")
                return super().run_json(workdir, *args, on_message=on_message)

        return Scripted(**certificates)


def _renew(lab: Lab, *extra: str) -> tuple[tuple[str, ...], Cluster]:
    site = lab.site()
    (lab.folder / "fakes").mkdir(exist_ok=True)
    cluster = Cluster(lab.folder / "fakes", support.site_from(json.loads(Path(site).read_text())))
    argv = (
        "renew-credentials",
        "prod",
        "--site",
        site,
        "--talosctl",
        str(cluster.talosctl_path),
        "--kubectl",
        str(cluster.kubectl_path),
        "--timeout",
        "30s",
        *extra,
    )
    return argv, cluster


@case("renew-credentials", ExitCode.OK)
def renew_credentials_renewed(lab: Lab) -> None:
    argv, _ = _renew(lab, "--yes")
    tf = _Renewable.make()
    ran = lab.run(*argv, tf=tf)
    assert ran.code == ExitCode.OK, ran.err
    assert tf.renewals == ["kubeconfig"] and "check prod: every check passed" in ran.out
    assert (lab.folder / "credentials" / "homelab" / "prod" / "kubeconfig").stat().st_mode & 0o777 == 0o600


@case("renew-credentials", ExitCode.OK)
def renew_credentials_dry_run(lab: Lab) -> None:
    argv, _ = _renew(lab, "--dry-run")
    tf = _Renewable.make(talos_days=10)
    ran = lab.run(*argv, tf=tf)
    assert ran.code == ExitCode.OK and tf.renewals == [] and "dry run — nothing applied" in ran.out


@case("renew-credentials", ExitCode.REFUSED)
def renew_credentials_more_than_credentials(lab: Lab) -> None:
    argv, _ = _renew(lab, "--yes")
    tf = _Renewable.make()
    tf.states["platform-prod"][f"{VM}.node_wk-c_vm"] = {"values": {"name": "wk-c"}, "depends_on": []}
    ran = lab.run(*argv, tf=tf)
    assert ran.code == ExitCode.REFUSED and tf.renewals == []
    assert f"not a credential: {VM}.node_wk-c_vm: delete" in ran.out
    assert (
        ran.err.splitlines()[-1] == "stopped at platform-prod (plan): done: synth; not done: platform-prod, "
        "credentials, check prod"
    )


@case("renew-credentials", ExitCode.BAD_INPUT)
def renew_credentials_unknown_cluster(lab: Lab) -> None:
    ran = lab.run("renew-credentials", "staging", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT
    assert ran.err == "terravixens renew-credentials: unknown cluster 'staging': use one of prod\n"


@case("renew-credentials", ExitCode.DECLINED)
def renew_credentials_not_confirmed(lab: Lab) -> None:
    argv, _ = _renew(lab)
    tf = _Renewable.make()
    ran = lab.run(*argv, tf=tf)
    assert ran.code == ExitCode.DECLINED and tf.renewals == []
    assert "no terminal to confirm on and no --yes: nothing was applied" in ran.err


@case("renew-credentials", ExitCode.FAILED)
def renew_credentials_apply_fails(lab: Lab) -> None:
    argv, _ = _renew(lab, "--yes")
    ran = lab.run(*argv, tf=_Renewable.make(fail="apply"))
    assert ran.code == ExitCode.FAILED and "platform-prod: terraform apply failed (exit 1)" in ran.err
    assert not (lab.folder / "credentials").exists()


@case("renew-credentials", ExitCode.BACKUP_FAILED)
def renew_credentials_backup_fails(lab: Lab) -> None:
    argv, _ = _renew(lab, "--yes")
    tf = _Renewable.make(fail="state pull")
    ran = lab.run(*argv, tf=tf)
    assert ran.code == ExitCode.BACKUP_FAILED and tf.renewals == []
    assert "platform-prod: terraform state pull failed" in ran.err


@case("renew-credentials", ExitCode.CHECK_FAILED)
def renew_credentials_check_finds_a_problem(lab: Lab) -> None:
    from tests import kube_objects as k

    argv, cluster = _renew(lab, "--yes")
    cluster.objects("daemonsets.apps", [k.daemonset("cilium", desired=5, ready=3)])
    ran = lab.run(*argv, tf=_Renewable.make())
    assert ran.code == ExitCode.CHECK_FAILED and "the new credentials are written" in ran.err
    assert (lab.folder / "credentials" / "homelab" / "prod" / "talosconfig").exists()


@case("renew-credentials", ExitCode.INTERRUPTED)
def renew_credentials_interrupted(lab: Lab) -> None:
    argv, _ = _renew(lab, "--yes")
    tf = _Renewable.make(interrupt="plan")
    ran = lab.run(*argv, tf=tf)
    assert ran.code == ExitCode.INTERRUPTED and tf.renewals == []
    assert ran.err.splitlines()[-1].startswith("terravixens renew-credentials: interrupted by SIGINT at platform-prod")


# snapshot -------------------------------------------------------------------------------------------------
# cp-a (10.11.1.11) does not answer (Tools): the snapshot comes through cp-b. The talosconfig is the platform layer's.
@case("snapshot", ExitCode.OK)
def snapshot_taken(lab: Lab) -> None:
    tools = lab.tools()
    ran = lab.run(*SNAPSHOT, "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.OK and ran.err == ""
    [kept] = kept_snapshots(lab)
    assert (
        kept.name.endswith("_cp-b_manual.snapshot") and kept.read_bytes() == etcd_tool.genuine_snapshot().read_bytes()
    )
    lines = ran.out.splitlines()
    assert lines[-3] == f"snapshot: etcd-snapshots/homelab/prod/{kept.name}"
    assert lines[-2].startswith("verified by etcd's own checks (size, sha256, bbolt, etcd): revision 24")
    assert lines[-1] == "retention (--keep 10): kept 1; removed 0"
    assert [line.split()[1] for line in tools.log() if " etcd snapshot " in line] == ["10.11.1.11", "10.11.1.12"]


@case("snapshot", ExitCode.OK)
def snapshot_list(lab: Lab) -> None:
    lab.tools()
    assert lab.run(*SNAPSHOT, "--site", lab.site(), tf=platform()).code == ExitCode.OK
    ran = lab.run(*SNAPSHOT, "--list", "--site", lab.site())
    [kept] = kept_snapshots(lab)
    assert (
        ran.code == ExitCode.OK and ran.out.splitlines()[0] == "etcd-snapshots/homelab/prod/: 1 snapshot, oldest first"
    )
    # the genuine snapshot's size varies with how its embedded etcd laid out its pages (7 or 9 pages of 4 KiB)
    size = f"{etcd_tool.genuine_snapshot().stat().st_size / 1000:.1f}"
    assert ran.out.splitlines()[2].split()[2:] == ["cp-b", "manual", size, "kB", "etcd", kept.name]


@case("snapshot", ExitCode.BAD_INPUT)
def snapshot_unknown_cluster(lab: Lab) -> None:
    ran = lab.run("snapshot", "staging", "--site", lab.site())
    assert (
        ran.code == ExitCode.BAD_INPUT
        and ran.err == "terravixens snapshot: unknown cluster 'staging': use one of prod\n"
    )


@case("snapshot", ExitCode.BAD_INPUT)
def snapshot_list_with_keep(lab: Lab) -> None:
    ran = lab.run(*SNAPSHOT, "--list", "--keep", "3", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT
    assert ran.err == "terravixens snapshot: --keep applies when a snapshot is taken; --list only lists\n"


@case("snapshot", ExitCode.BAD_INPUT)
def snapshot_into_a_linked_folder(lab: Lab) -> None:
    """Issue 26, item 5: a symbolic link where the snapshot folder should be is exit 2 before any synth or talosctl
    call (b4ffe4b asked every control plane, then exited 5)."""
    tools = lab.tools()
    elsewhere = lab.folder / "elsewhere"
    elsewhere.mkdir()
    (lab.folder / "etcd-snapshots").symlink_to(elsewhere)
    tf = platform()
    ran = lab.run(*SNAPSHOT, "--site", lab.site(), tf=tf)
    assert ran.code == ExitCode.BAD_INPUT and tools.log() == [] and tf.calls == []
    assert ran.err == (
        "terravixens snapshot: etcd-snapshots: not a folder (a symbolic link or a file): snapshots are kept only in "
        "real 0700 folders; move it away; nothing was done\n"
    )
    assert list(elsewhere.iterdir()) == []


@case("snapshot", ExitCode.BAD_INPUT)
def snapshot_with_a_nested_manifest(lab: Lab) -> None:
    """Issue 26, item 5: a deeply nested manifest crashed `snapshot --list`, and `snapshot` after storing the new
    one, with a RecursionError traceback (b4ffe4b): an input error in one line, before anything runs."""
    tools = lab.tools()
    folder = lab.folder / "etcd-snapshots" / "homelab" / "prod"
    folder.mkdir(parents=True, mode=0o700)
    (folder / "prod_20250101T000000.000000Z_cp-a_manual.snapshot").write_bytes(b"x")
    (folder / "prod_20250101T000000.000000Z_cp-a_manual.json").write_text("[" * 100_000 + "]" * 100_000)
    for argv in ((*SNAPSHOT, "--list"), (*SNAPSHOT, "--list", "--json"), SNAPSHOT):
        ran = lab.run(*argv, "--site", lab.site(), tf=platform())
        assert ran.code == ExitCode.BAD_INPUT and ran.out == "" and len(ran.err.splitlines()) == 1, ran.err
        assert ran.err.startswith(
            "terravixens snapshot: etcd-snapshots/homelab/prod/prod_20250101T000000.000000Z_cp-a_manual.json: not a "
            "snapshot manifest ((file): is nested more than 16 levels deep"
        )
    assert tools.log() == [] and kept_snapshots(lab) == [folder / "prod_20250101T000000.000000Z_cp-a_manual.snapshot"]


@case("snapshot", ExitCode.FAILED)
def snapshot_terraform_init_fails(lab: Lab) -> None:
    tools = lab.tools()
    ran = lab.run(*SNAPSHOT, "--site", lab.site(), tf=platform(fail={"init": 1}))
    assert ran.code == ExitCode.FAILED and "platform-prod: terraform init failed" in ran.err
    assert ran.err.splitlines()[-1] == "stopped at talosconfig (init): done: synth; not done: talosconfig, snapshot"
    assert tools.log() == [] and kept_snapshots(lab) == []


@case("snapshot", ExitCode.BACKUP_FAILED)
def snapshot_does_not_verify(lab: Lab) -> None:
    lab.tools(etcd_snapshot=etcd_tool.fake_talosctl_setup("flip"))
    ran = lab.run(*SNAPSHOT, "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.BACKUP_FAILED and kept_snapshots(lab) == []
    assert ran.err.splitlines() == [
        (
            "terravixens snapshot: platform-prod: no verified etcd snapshot of prod (3 control planes tried, each said "
            "why above); nothing was kept"
        ),
        "stopped at snapshot: done: synth, talosconfig; not done: snapshot",
    ]


@case("snapshot", ExitCode.INTERRUPTED)
def snapshot_interrupted(lab: Lab) -> None:
    from terravixens.talosctl import Talosctl

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    lab.tools()
    lab.monkeypatch.setattr(Talosctl, "etcd_snapshot", interrupted)
    ran = lab.run(*SNAPSHOT, "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.INTERRUPTED and kept_snapshots(lab) == []
    assert ran.err == (
        "terravixens snapshot: interrupted by SIGINT at snapshot: done: synth, talosconfig; not done: snapshot\n"
    )


# restore-etcd ---------------------------------------------------------------------------------------------
# Every control plane answers; etcd has lost quorum (tests/tools_on_path.py's DISASTER) unless said otherwise.
RESTORE = ("restore-etcd", "prod", "--from", "db.snapshot", "--poll", "1s")
RESTORE_UNITS = "reset cp-a, reset cp-b, reset cp-c, etcd Preparing, bootstrap cp-a, health"


def _disaster(lab: Lab, **scenario) -> Tools:
    lab.snapshot()
    return lab.tools(
        **{
            "unreachable": [],
            "etcd_service": json.loads(json.dumps(DISASTER)),
            "etcd_tool": str(etcd_tool.binary()),
            **scenario,
        }
    )


def _resets(tools: Tools) -> list[str]:
    return [line.split()[1] for line in tools.log() if " reset " in line]


@case("restore-etcd", ExitCode.OK)
def restore_etcd_done(lab: Lab) -> None:
    tools = _disaster(lab)
    ran = lab.run(*RESTORE, "--confirm", "homelab/prod", "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.OK and ran.err == ""
    assert _resets(tools) == ["10.11.1.11", "10.11.1.12", "10.11.1.13"]
    [bootstrap] = [line for line in tools.log() if " bootstrap " in line]  # the private copy of db.snapshot
    assert bootstrap.startswith("talosctl 10.11.1.11 bootstrap --recover-from=") and "/.restore-" in bootstrap
    assert tools.state()["recovered"]["sha256"] == hashlib.sha256((lab.folder / "db.snapshot").read_bytes()).hexdigest()
    assert ran.out.splitlines()[-1].startswith(
        "restored etcd of prod from db.snapshot (etcd's own checks: revision 24, 20 keys); next: `terravixens deploy "
        "platform-prod`"
    )


@case("restore-etcd", ExitCode.REFUSED)
def restore_etcd_over_a_working_etcd(lab: Lab) -> None:
    tools = _disaster(lab, etcd_service={})
    ran = lab.run(*RESTORE, "--confirm", "homelab/prod", "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.REFUSED and _resets(tools) == []
    message, line = ran.err.splitlines()
    assert message.startswith("terravixens restore-etcd: etcd of prod works: 3 members listed through cp-a.")
    assert line == (
        "stopped at confirmation: done: verify (verified), synth, talosconfig, etcd check (answers through cp-a); "
        f"not done: confirmation, {RESTORE_UNITS}"
    )


@case("restore-etcd", ExitCode.REFUSED)
def restore_etcd_from_another_etcd(lab: Lab) -> None:
    """Issue 26, item 3: another etcd's genuine snapshot, refused before any talosctl call."""
    tools = _disaster(lab)
    lab.snapshot(etcd_tool.foreign_snapshot().read_bytes())
    ran = lab.run(*RESTORE, "--confirm", "homelab/prod", "--site", lab.site())
    assert ran.code == ExitCode.REFUSED and tools.log() == [] and ran.out == ""
    message, line = ran.err.splitlines()
    assert message.startswith(
        "terravixens restore-etcd: --from db.snapshot: it is not this cluster's etcd: its members db-1 "
        "(https://10.20.0.5:2380) are none of prod's control planes (cp-a, cp-b, cp-c)"
    )
    assert message.endswith("pass --force-foreign-snapshot db-1; nothing was done")
    assert line.startswith("stopped at verify: done: nothing; not done: verify, synth,")


@case("restore-etcd", ExitCode.BAD_INPUT)
def restore_etcd_from_a_db_copy_without_the_flag(lab: Lab) -> None:
    lab.snapshot(etcd_tool.genuine_snapshot().read_bytes()[:-32])
    ran = lab.run(*RESTORE, "--confirm", "homelab/prod", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and ran.out == ""
    assert ran.err.startswith(
        f"terravixens restore-etcd: --from db.snapshot: {etcd_tool.genuine_snapshot().stat().st_size - 32} bytes, "
        "no etcd digest at its end (a snapshot from "
    )
    assert ran.err.splitlines()[-1].startswith("stopped at verify: done: nothing; not done: verify, synth,")


@case("restore-etcd", ExitCode.BAD_INPUT)
def restore_etcd_no_snapshot_without_force(lab: Lab) -> None:
    ran = lab.run(*RESTORE, "--no-snapshot", "no time for one now", "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT
    assert ran.err.startswith("terravixens restore-etcd: --no-snapshot goes with --force: ")


@case("restore-etcd", ExitCode.DECLINED)
def restore_etcd_without_a_terminal_or_confirm(lab: Lab) -> None:
    tools = _disaster(lab)
    ran = lab.run(*RESTORE, "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.DECLINED and _resets(tools) == []
    assert ran.err.splitlines() == [
        "terravixens restore-etcd: no terminal to confirm on: pass --confirm homelab/prod",
        (
            "stopped at confirmation: done: verify (verified), synth, talosconfig, etcd check (no leader); not done: "
            f"confirmation, {RESTORE_UNITS}"
        ),
    ]


@case("restore-etcd", ExitCode.FAILED)
def restore_etcd_reset_fails(lab: Lab) -> None:
    tools = _disaster(lab, fail={"reset": ["10.11.1.12"]})
    ran = lab.run(*RESTORE, "--confirm", "homelab/prod", "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.FAILED and _resets(tools) == ["10.11.1.11", "10.11.1.12"]
    assert ran.err.splitlines()[-1] == (
        "stopped at reset cp-b (reset): done: verify (verified), synth, talosconfig, etcd check (no leader), "
        "confirmation, reset cp-a; not done: reset cp-b, reset cp-c, etcd Preparing, bootstrap cp-a, health"
    )


@case("restore-etcd", ExitCode.BACKUP_FAILED)
def restore_etcd_forced_without_a_fresh_snapshot(lab: Lab) -> None:
    tools = _disaster(lab, etcd_service={}, etcd_snapshot=etcd_tool.fake_talosctl_setup("flip"))
    ran = lab.run(*RESTORE, "--force", "--confirm", "homelab/prod", "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.BACKUP_FAILED and _resets(tools) == []
    assert ran.err.splitlines()[-1] == (
        "stopped at snapshot: done: verify (verified), synth, talosconfig, etcd check (answers through cp-a), "
        f"confirmation; not done: snapshot, {RESTORE_UNITS}"
    )


@case("restore-etcd", ExitCode.INTERRUPTED)
def restore_etcd_interrupted_during_the_bootstrap(lab: Lab) -> None:
    from terravixens.talosctl import Talosctl

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    _disaster(lab)
    lab.monkeypatch.setattr(Talosctl, "bootstrap_recover", interrupted)
    ran = lab.run(*RESTORE, "--confirm", "homelab/prod", "--site", lab.site(), tf=platform())
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err == (
        "terravixens restore-etcd: interrupted by SIGINT at bootstrap cp-a (bootstrap): done: verify (verified), "
        "synth, talosconfig, etcd check (no leader), confirmation, reset cp-a, reset cp-b, reset cp-c, etcd Preparing "
        "(every control plane, after 2 polls); not known: bootstrap cp-a (look at etcd on it (talosctl service etcd): "
        "Running means the restore was accepted — do not bootstrap again; Preparing means it was not: run the same "
        "command again); not done: health\n"
    )


# drift ----------------------------------------------------------------------------------------------------
@case("drift", MonitorExit.IN_SYNC)
def drift_in_sync(lab: Lab) -> None:
    ran = lab.run("drift", "platform-prod", "--terraform-only", "--site", lab.site(), tf=platform())
    assert ran.code == MonitorExit.IN_SYNC and ran.out.splitlines()[-1] == "no drift"


@case("drift", MonitorExit.FOUND)
def drift_found(lab: Lab) -> None:
    tf = platform()
    ran = lab.run("drift", "platform-prod", "--terraform-only", "--site", lab.site(without("wk-b")), tf=tf)
    assert ran.code == MonitorExit.FOUND and ran.out.splitlines()[-1] == "drift in: platform-prod"
    assert not _applied(tf)


@case("drift", MonitorExit.ERROR)
def drift_plan_fails(lab: Lab) -> None:
    ran = lab.run("drift", "--site", lab.site(), tf=platform(fail={"plan": 2}))
    assert ran.code == MonitorExit.ERROR and "platform-prod: terraform plan failed (exit 1)" in ran.err
    assert ran.err.splitlines()[-1] == (
        "stopped at platform-prod (plan): done: synth, hypervisors (in sync); not done: platform-prod, gitops-prod"
    )


@case("drift", MonitorExit.ERROR)
def drift_unknown_layer(lab: Lab) -> None:
    ran = lab.run("drift", "platform-nowhere", "--site", lab.site())
    assert ran.code == MonitorExit.ERROR and "unknown layer 'platform-nowhere'" in ran.err


@case("drift", ExitCode.INTERRUPTED)
def drift_interrupted(lab: Lab) -> None:
    ran = lab.run("drift", "--site", lab.site(), tf=platform(interrupt={"plan": 1}))
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err == (
        "terravixens drift: interrupted by SIGINT at hypervisors (plan): done: synth; not done: "
        "hypervisors, platform-prod, gitops-prod\n"
    )


# upgrade --------------------------------------------------------------------------------------------------
@case("upgrade", ExitCode.OK)
def upgrade_done(lab: Lab) -> None:
    fake = Fake(lab.folder, dict.fromkeys(FIVE, "v1.11.5"))
    ran = lab.run("upgrade", "prod", "--talosctl", str(fake.path), "--site", upgrade_site(lab))
    assert ran.code == ExitCode.OK and fake.upgraded() == FIVE


@case("upgrade", ExitCode.REFUSED)
def upgrade_downgrade_refused(lab: Lab) -> None:
    fake = Fake(lab.folder, {**dict.fromkeys(FIVE, "v1.11.6"), "wk-b": "v1.12.0"})
    ran = lab.run("upgrade", "prod", "--talosctl", str(fake.path), "--site", upgrade_site(lab))
    assert ran.code == ExitCode.REFUSED and fake.upgraded() == []
    assert ran.out.splitlines()[-1].startswith("refused: wk-b runs v1.12.0, newer than the target v1.11.6")


@case("upgrade", ExitCode.BAD_INPUT)
def upgrade_unknown_cluster(lab: Lab) -> None:
    ran = lab.run("upgrade", "staging", "--site", upgrade_site(lab))
    assert ran.code == ExitCode.BAD_INPUT and ran.err.strip() == "unknown cluster 'staging': use one of prod"


@case("upgrade", ExitCode.BAD_INPUT)
def upgrade_without_a_talosconfig(lab: Lab) -> None:
    """None given, no ./talosconfig, and no platform layer deployed from this folder to read one from."""
    ran = lab.run("upgrade", "prod", "--site", upgrade_site(lab, talosconfig=False))
    assert ran.code == ExitCode.BAD_INPUT and ran.err.startswith("terravixens upgrade: no talosconfig: none given")


@case("upgrade", ExitCode.FAILED)
def upgrade_stops_on_an_unhealthy_cluster(lab: Lab) -> None:
    fake = Fake(lab.folder, dict.fromkeys(FIVE, "v1.11.5"), breaks_on_upgrade=["cp-a"])
    ran = lab.run("upgrade", "prod", "--talosctl", str(fake.path), "--site", upgrade_site(lab))
    assert ran.code == ExitCode.FAILED and fake.upgraded() == ["cp-a"]
    assert ran.out.splitlines()[-1].startswith("stopped at cp-a: health check after upgrading cp-a failed")


@case("upgrade", ExitCode.BACKUP_FAILED)
def upgrade_without_a_verified_snapshot(lab: Lab) -> None:
    """An extension roll-out: every control plane streams a cut snapshot, so cp-a is not touched."""
    fake = Fake(lab.folder, dict.fromkeys(FIVE, "v1.11.6"), images=IMAGES, snapshot_damage="cut")
    site = upgrade_site(lab, data=with_extensions(site_data(), ISCSI))
    ran = lab.run("upgrade", "prod", "--talosctl", str(fake.path), "--site", site)
    assert ran.code == ExitCode.BACKUP_FAILED and fake.upgraded() == []
    assert ran.out.splitlines()[-1].startswith(
        "stopped at cp-a: platform-prod: no verified etcd snapshot before the upgrade of cp-a (3 control planes tried)"
    )


@case("upgrade", ExitCode.INTERRUPTED)
def upgrade_interrupted(lab: Lab) -> None:
    """Ctrl-C while cp-a's `talosctl upgrade` runs: Talos may already be upgrading it (the note of its 130)."""
    from terravixens.talosctl import Talosctl

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    fake = Fake(lab.folder, dict.fromkeys(FIVE, "v1.11.5"))
    lab.monkeypatch.setattr(Talosctl, "upgrade", interrupted)
    ran = lab.run("upgrade", "prod", "--talosctl", str(fake.path), "--site", upgrade_site(lab))
    assert ran.code == ExitCode.INTERRUPTED
    assert ran.err == (
        "terravixens upgrade: interrupted by SIGINT during talosctl upgrade of cp-a; done: none; not "
        "touched: cp-b, cp-c, wk-a, wk-b; an upgrade Talos already started goes on inside the node: run "
        "the same command again to check health and resume\n"
    )


# review ---------------------------------------------------------------------------------------------------
def _stacks_dir(lab: Lab, name: str) -> str:
    folder = lab.folder / name / "stacks" / "hypervisors"
    folder.mkdir(parents=True)
    (folder / "cdk.tf.json").write_text(json.dumps({"resource": {}}))
    return str(lab.folder / name)


@case("review", ExitCode.OK)
def review_two_directories(lab: Lab) -> None:
    output = lab.folder / "review.md"
    ran = lab.run(
        "review", "--before", _stacks_dir(lab, "a"), "--after", _stacks_dir(lab, "b"), "--output", str(output)
    )
    assert ran.code == ExitCode.OK and "No stack changes." in ran.out and output.read_text() == ran.out


@case("review", ExitCode.REFUSED)
def review_strict_flags_a_code_change(lab: Lab) -> None:
    """A change to the library (no site entry names it) that touches every node's VM: flagged, and --strict exits
    REFUSED. A real review: a clone of this repository at HEAD against its edited working tree."""
    clone = lab.folder / "repo"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(clone)], check=True, timeout=120)
    (clone / "terravixens" / "_bindings").symlink_to(ROOT / "terravixens" / "_bindings")
    node = clone / "terravixens" / "constructs" / "talos_node.py"
    node.write_text(node.read_text().replace('"Talos node managed by terravixens"', '"Talos node, edited"'))
    lab.monkeypatch.chdir(clone)
    ran = lab.run("review", "HEAD", "--strict")
    assert ran.code == ExitCode.REFUSED
    assert "5 addresses of nodes the change does not name: cp-a, cp-b, cp-c, wk-a, wk-b" in ran.out


@case("review", ExitCode.BAD_INPUT)
def review_output_onto_an_existing_file(lab: Lab) -> None:
    output = lab.folder / "review.md"
    output.write_text("last week's review")
    ran = lab.run(
        "review", "--before", _stacks_dir(lab, "a"), "--after", _stacks_dir(lab, "b"), "--output", str(output)
    )
    assert ran.code == ExitCode.BAD_INPUT and ran.out == "" and output.read_text() == "last week's review"
    assert ran.err.strip() == (
        f"terravixens review: --output {output}: the file already exists; give a new path or "
        f"remove it first (nothing was run)"
    )


@case("review", ExitCode.BAD_INPUT)
def review_without_a_base(lab: Lab) -> None:
    ran = lab.run("review")
    assert ran.code == ExitCode.BAD_INPUT and "give BASE (a git ref), or --before DIR --after DIR" in ran.err


@case("review", ExitCode.INTERRUPTED)
def review_interrupted(lab: Lab) -> None:
    def interrupted(*_):
        raise KeyboardInterrupt

    lab.monkeypatch.setattr("terravixens.operations.review.review_dirs", interrupted)
    ran = lab.run("review", "--before", "a", "--after", "b")
    assert ran.code == ExitCode.INTERRUPTED and ran.err == f"terravixens review: {NOTHING_STARTED}\n"


# site, plan and spec commands -----------------------------------------------------------------------------
def _interrupt_site_loading(lab: Lab) -> None:
    def interrupted(*_):
        raise KeyboardInterrupt

    lab.monkeypatch.setattr(cli, "load_site", interrupted)  # the one wrapper's, for the commands given the site
    lab.monkeypatch.setattr("terravixens.operations.validate.load_checked", interrupted)  # validate loads its own


@case("validate", ExitCode.OK)
def validate_ok(lab: Lab) -> None:
    ran = lab.run("validate", "--site", lab.site())
    assert ran.code == ExitCode.OK and ": ok — site 'homelab', 3 hypervisors, 1 clusters, 5 nodes" in ran.out


@case("validate", ExitCode.BAD_INPUT)
def validate_bad_site(lab: Lab) -> None:
    ran = lab.run("validate", "--site", lab.site(lambda d: d.update(site="Not A Name")))
    assert ran.code == ExitCode.BAD_INPUT and "1 problem in the site file" in ran.err


@case("validate", ExitCode.INTERRUPTED)
def validate_interrupted(lab: Lab) -> None:
    _interrupt_site_loading(lab)
    ran = lab.run("validate", "--site", "whatever.yaml")
    assert ran.code == ExitCode.INTERRUPTED and ran.err == f"terravixens validate: {NOTHING_STARTED}\n"


@case("stacks", ExitCode.OK)
def stacks_ok(lab: Lab) -> None:
    ran = lab.run("stacks", "--site", lab.site())
    assert ran.code == ExitCode.OK and ran.out.split() == ["hypervisors", "platform-prod", "gitops-prod"]


@case("stacks", ExitCode.BAD_INPUT)
def stacks_missing_site(lab: Lab) -> None:
    ran = lab.run("stacks", "--site", "missing.yaml")
    assert ran.code == ExitCode.BAD_INPUT and "missing.yaml" in ran.err


@case("stacks", ExitCode.INTERRUPTED)
def stacks_interrupted(lab: Lab) -> None:
    _interrupt_site_loading(lab)
    assert lab.run("stacks", "--site", "whatever.yaml").code == ExitCode.INTERRUPTED


@case("show", ExitCode.OK)
def show_ok(lab: Lab) -> None:
    ran = lab.run("show", "--site", lab.site(), "--format", "json")
    assert ran.code == ExitCode.OK and [n["name"] for n in json.loads(ran.out)["nodes"]] == [
        "cp-a",
        "cp-b",
        "cp-c",
        "wk-a",
        "wk-b",
    ]


@case("show", ExitCode.BAD_INPUT)
def show_bad_site(lab: Lab) -> None:
    ran = lab.run("show", "--site", lab.site(lambda d: d.update(site="Not A Name")))
    assert ran.code == ExitCode.BAD_INPUT and "1 problem in the site file" in ran.err and ran.out == ""


@case("show", ExitCode.INTERRUPTED)
def show_interrupted(lab: Lab) -> None:
    _interrupt_site_loading(lab)
    ran = lab.run("show", "--site", "whatever.yaml")
    assert ran.code == ExitCode.INTERRUPTED and ran.err == f"terravixens show: {NOTHING_STARTED}\n"


@case("plan-guard", ExitCode.OK)
def plan_guard_ok(lab: Lab) -> None:
    ran = lab.run("plan-guard", str(PLANS / "hand-ok-staged-change.json"), "--site", lab.site())
    assert ran.code == ExitCode.OK and "hand-ok-staged-change.json: ok" in ran.out


@case("plan-guard", ExitCode.REFUSED)
def plan_guard_refuses(lab: Lab) -> None:
    ran = lab.run("plan-guard", str(PLANS / "hand-pg002-two-control-planes-leave.json"), "--site", lab.site())
    assert ran.code == ExitCode.REFUSED and ran.err.splitlines()[-1].endswith(": refused, 1 problem")


@case("plan-guard", ExitCode.BAD_INPUT)
def plan_guard_not_a_plan(lab: Lab) -> None:
    ran = lab.run("plan-guard", lab.site(), "--site", lab.site())
    assert ran.code == ExitCode.BAD_INPUT and "problem in the plan" in ran.err


@case("plan-guard", ExitCode.INTERRUPTED)
def plan_guard_interrupted(lab: Lab) -> None:
    _interrupt_site_loading(lab)
    assert lab.run("plan-guard", "plan.json").code == ExitCode.INTERRUPTED


@case("schema export", ExitCode.OK)
def schema_export_ok(lab: Lab) -> None:
    ran = lab.run("schema", "export", "--out", str(lab.folder / "schemas"))
    assert ran.code == ExitCode.OK and len(list((lab.folder / "schemas").glob("*.json"))) >= 3


@case("schema export", ExitCode.INTERRUPTED)
def schema_export_interrupted(lab: Lab) -> None:
    def interrupted(*_):
        raise KeyboardInterrupt

    lab.monkeypatch.setattr("terravixens.standalone.schemas.export", interrupted)
    assert lab.run("schema", "export", "--out", str(lab.folder)).code == ExitCode.INTERRUPTED


@case("completion", ExitCode.OK)
def completion_script(lab: Lab) -> None:
    ran = lab.run("completion", "bash")
    assert ran.code == ExitCode.OK and ran.err == "" and "complete -o filenames -F _terravixens_complete" in ran.out


@case("completion", ExitCode.INTERRUPTED)
def completion_interrupted(lab: Lab) -> None:
    def interrupted(*_):
        raise KeyboardInterrupt

    lab.monkeypatch.setattr("terravixens.completion.script", interrupted)
    assert lab.run("completion", "fish").code == ExitCode.INTERRUPTED


@case("spec validate", ExitCode.OK)
def spec_validate_ok(lab: Lab) -> None:
    ran = lab.run("spec", "validate", str(ROOT / "sites" / "specs"))
    assert ran.code == ExitCode.OK and ": ok — " in ran.out


@case("spec validate", ExitCode.BAD_INPUT)
def spec_validate_nothing_given(lab: Lab) -> None:
    ran = lab.run("spec", "validate")
    assert ran.code == ExitCode.BAD_INPUT and "give a spec file or folder" in ran.err


@case("spec validate", ExitCode.INTERRUPTED)
def spec_validate_interrupted(lab: Lab) -> None:
    def interrupted(*_):
        raise KeyboardInterrupt

    lab.monkeypatch.setattr("terravixens.standalone.validate.validate", interrupted)
    assert lab.run("spec", "validate", "x").code == ExitCode.INTERRUPTED


def _standalone_args(lab: Lab, verb: str) -> list[str]:
    """push resolves the spec (the secrets file's keys); handoff needs the site only."""
    from tests import spec_support

    site = ["--site", str(ROOT / "sites" / "standalone.yaml")]
    if verb == "handoff":
        return site
    return [*site, "--secrets", str(spec_support.write_secrets(lab.folder / "agent-secrets.yaml"))]


@case("spec push", ExitCode.OK)
@case("spec handoff", ExitCode.OK)
def spec_push_ok(lab: Lab) -> None:
    """The agent's answer mapped to 0 (the real round trips on loopback: tests/test_spec_push.py)."""
    from terravixens.operations.spec_push import Outcome

    result = {"schema_version": 1, "identity": "dns1", "ok": True, "changed": 0, "seconds": 0.1, "sections": []}
    lab.monkeypatch.setattr("terravixens.operations.spec_push.push", lambda *a, **k: Outcome(result))
    lab.monkeypatch.setattr("terravixens.operations.spec_push.handoff", lambda *a, **k: Outcome(result))
    for verb in ("push", "handoff"):
        ran = lab.run("spec", verb, "dns1", *_standalone_args(lab, verb))
        assert ran.code == ExitCode.OK and f"spec {verb} dns1: in line with its spec, nothing to do" in ran.out


@case("spec push", ExitCode.BAD_INPUT)
@case("spec handoff", ExitCode.BAD_INPUT)
def spec_push_unknown_node(lab: Lab) -> None:
    for verb in ("push", "handoff"):
        ran = lab.run("spec", verb, "dns9", *_standalone_args(lab, verb))
        assert ran.code == ExitCode.BAD_INPUT and "'dns9' is not a standalone node of" in ran.err


@case("spec push", ExitCode.FAILED)
@case("spec handoff", ExitCode.FAILED)
def spec_push_unreachable(lab: Lab) -> None:
    """Nothing listens on the port: ssh exits 255, one line says what is not done."""
    from tests.loopback import free_port

    port = str(free_port("127.0.0.1"))
    for verb in ("push", "handoff"):
        ran = lab.run("spec", verb, "dns1", *_standalone_args(lab, verb), "--address", "127.0.0.1", "--port", port)
        assert ran.code == ExitCode.FAILED and f"spec {verb} dns1: not done — " in ran.out
        assert "ssh exit 255: " in ran.out and "Connection refused" in ran.out


@case("spec serve", ExitCode.INTERRUPTED)
def spec_serve_stopped_with_ctrl_c(lab: Lab) -> None:
    """A server's normal end: Ctrl-C stops it (130, never a traceback); SIGTERM ends it by that signal after a
    graceful shutdown, which is what systemd expects of a service."""
    import signal

    from tests import spec_support

    site, secrets = spec_support.standalone_copy(lab.folder)
    server = spec_support.start_server(site, secrets, lab.folder / "serve.log", host="127.0.0.9")
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(timeout=30) == ExitCode.INTERRUPTED
    lines = server.log_text().splitlines()  # its JSON log, and stderr
    assert "Traceback" not in server.log_text() and lines[-1] == f"terravixens spec serve: {NOTHING_STARTED}"
    assert json.loads([line for line in lines if line.startswith("{")][-1])["event"] == "stopped"
    # SIGTERM (systemd's stop): not turned into Ctrl-C (cli.Command.signals), the server stops gracefully and the
    # process then ends by that signal, which systemd counts as a clean stop
    server = spec_support.start_server(site, secrets, lab.folder / "serve-term.log", host="127.0.0.9")
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == -signal.SIGTERM
    lines = server.log_text().splitlines()
    assert "Traceback" not in server.log_text() and not [line for line in lines if "interrupted" in line]
    # uvicorn's graceful shutdown ran to its end (its last line), then the signal ended the process
    assert json.loads(lines[-1]) | {"ts": ""} == {
        "ts": "",
        "event": "server",
        "level": "info",
        "message": f"Finished server process [{server.process.pid}]",
    }


@case("spec serve", ExitCode.BAD_INPUT)
def spec_serve_without_secrets(lab: Lab) -> None:
    lab.monkeypatch.delenv("TERRAVIXENS_SECRETS", raising=False)
    ran = lab.run("spec", "serve")
    assert ran.code == ExitCode.BAD_INPUT and "give the secrets file" in ran.err


def _declared() -> set[tuple[str, str, int]]:
    """Every (command, table, code) the command table declares; `spec get` has its own table, walked code by code
    in tests/test_spec_client.py."""
    return {
        (entry.name, type(code).__name__, int(code))
        for entry in cli.COMMANDS
        if entry.name != "spec get"
        for code, _ in entry.codes
    }


def test_every_declared_code_has_a_case_and_no_case_is_undeclared():
    """The cases here and the rule-stop cases below, together, produce every declared code and no other."""
    rule_stops = {(name, "MonitorExit" if name == "drift" else "ExitCode", 1) for name in RULE_STOPS}
    assert set(CASES) | rule_stops == _declared()


@pytest.mark.parametrize("function", [f for functions in CASES.values() for f in functions], ids=lambda f: f.__name__)
def test_each_code_is_produced_with_its_meaning(function, lab):
    function(lab)


# ----------------------------------------------------------------------------------- a rule stopping synth
RULE_STOPS = {
    "deploy": (
        ("deploy", "--yes"),
        ("stopped at synth: done: nothing; not done: synth, hypervisors, platform-prod, gitops-prod"),
    ),
    "destroy": (
        ("destroy", "gitops-prod", "--confirm", "homelab/gitops-prod"),
        "stopped at synth: done: nothing; not done: synth, checks, backup, destroy gitops-prod",
    ),
    "restore": (
        ("restore", "gitops-prod", "BACKUP", "--confirm", "homelab/gitops-prod"),
        "stopped at synth: done: nothing; not done: synth, restore gitops-prod",
    ),
    "drift": (("drift",), "stopped at synth: done: nothing; not done: synth, hypervisors, platform-prod, gitops-prod"),
    "decommission": (
        (*DECOMMISSION, "--yes"),
        ("stopped at synth: done: nothing; not done: synth, checks, etcd snapshot, prepare, the resets"),
    ),
    # its synth comes right after the confirmation: a rule stop calls nothing, etcd untouched
    "remove-dead-member": (
        CONFIRMED,
        (
            "stopped at synth: done: nothing; not done: synth, talosconfig, probe, etcd members, state check, backup, "
            f"{IRREVERSIBLE}"
        ),
    ),
    # without --talosconfig: synth comes first, to read the platform layer's talosconfig output
    "snapshot": (("snapshot", "prod"), "stopped at synth: done: nothing; not done: synth, talosconfig, snapshot"),
    "restore-etcd": (
        ("restore-etcd", "prod", "--from", "SNAPSHOT", "--confirm", "homelab/prod"),
        (
            "stopped at synth: done: verify (verified); not done: synth, talosconfig, etcd check, confirmation, reset "
            "cp-a, reset cp-b, reset cp-c, etcd Preparing, bootstrap cp-a, health"
        ),
    ),
}


@pytest.mark.parametrize("operation", RULE_STOPS)
def test_a_safety_rule_stopping_synth_gives_its_message_and_the_documented_code(operation, lab):
    """A valid site (validate accepts it) whose synth TV006 stops: a label value shaped like a bootstrap token.
    Before: every operation died with an ImportError traceback (exit 1 by accident)."""
    assert lab.run("validate", "--site", lab.token_site()).code == ExitCode.OK
    tools = lab.tools()
    argv, last_line = RULE_STOPS[operation]
    tf = gitops()
    given = {"BACKUP": lab.backup, "SNAPSHOT": lab.snapshot}
    ran = lab.run(*(given[word]() if word in given else word for word in argv), "--site", lab.token_site(), tf=tf)
    expected = MonitorExit.ERROR if operation == "drift" else ExitCode.REFUSED
    assert ran.code == expected and cli.command(operation).returns(expected)
    lines = ran.err.splitlines()
    assert lines[0] == f"terravixens {operation}: synth stopped by safety rules:"
    assert lines[1].startswith(
        "[platform-prod] [TV006 NoSecretLiterals] stack 'platform-prod' contains a Kubernetes bootstrap token in "
    )
    assert "read it at apply time (file(), a variable or an environment variable) instead" in lines[1]
    assert lines[-1] == last_line
    assert "CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS" not in ran.err  # turning the rules off is never the advice
    assert tf.calls == [] and TOKEN_LIKE not in ran.err + ran.out
    assert tools.log() == [] and len(_members(tools)) == 3  # no talosctl call: no probe, no `etcd remove-member`


def test_review_reads_a_rule_stop_from_its_synth_process():
    """review synthesizes in child processes (BASE runs the code as it was): their rule stop is REFUSED with the
    messages, whatever else the child printed; any other failure stays BAD_INPUT."""
    from terravixens.operations import OperationError
    from terravixens.operations.review import finish_synth

    script = (
        "import sys; print('noise', file=sys.stderr); raise RuntimeError('Validation failed: Encountered "
        'Annotations with level "ERROR":\\n[platform-prod] [TV006 NoSecretLiterals] a token\\n\\nEither fix '
        "the issues above, or set the environment variable CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS to ignore "
        "these annotations.')"
    )
    for code, expected, text in (
        (
            script,
            ExitCode.REFUSED,
            ("synth at HEAD stopped by safety rules:\n[platform-prod] [TV006 NoSecretLiterals] a token"),
        ),
        ("raise SystemExit(3)", ExitCode.BAD_INPUT, "synth at HEAD failed:"),
    ):
        started: Future[runner.Ran] = Future()
        started.set_result(runner.run([sys.executable, "-c", code], timeout=60))
        with pytest.raises(OperationError) as caught:
            finish_synth(started, "at HEAD", Path("/nonexistent"))
        assert caught.value.code == expected and str(caught.value).startswith(text)
        assert str(caught.value).strip() == text or expected == ExitCode.BAD_INPUT


def test_review_synth_past_its_deadline_is_bad_input_with_the_runner_reason():
    """A synth that never ends is stopped at its deadline by the bounded runner; review says so (BAD_INPUT)."""
    from terravixens.operations import OperationError
    from terravixens.operations.review import finish_synth

    started: Future[runner.Ran] = Future()
    started.set_result(runner.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5, label="synth"))
    with pytest.raises(OperationError) as caught:
        finish_synth(started, "at HEAD", Path("/nonexistent"))
    assert caught.value.code == ExitCode.BAD_INPUT
    assert str(caught.value).startswith("synth at HEAD failed:\nsynth did not finish within 0.5s: stopped")
