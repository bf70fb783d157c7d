"""`terravixens decommission`: a verified etcd snapshot before the first reset, the order of the resets, the settings
each one runs with (read from the real synth), Node objects deleted after each reset through kubectl (the real one
against a real kube-apiserver, tests/control_plane.py, in the main case; a fake on PATH in the others, which do not
look at Nodes), the secrets last and only when asked. Terraform is tests/fake_terraform.py: the Talos resources have no
provider binary here (ADR 0003); talosctl is tests/fake_talosctl.py streaming a genuine snapshot
(tests/etcd_tool.py)."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest

from terravixens.etcd_snapshots import no_snapshot_reason
from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.decommission import DecommissionOptions, decommission
from terravixens.operations.destroy import DestroyOptions, destroy
from terravixens.operations.etcd import SnapshotPolicy
from terravixens.operations.workspace import Workspace
from tests import etcd_tool, support
from tests.control_plane import recorded_calls
from tests.fake_terraform import APPLY, FakeTerraform, platform_state
from tests.kube_objects import node_names, put_site_nodes
from tests.tools_on_path import Tools

FAKE_KUBECTL = """#!/bin/sh
# fake kubectl: records its arguments and whether the kubeconfig it was given is private
echo "$@" >> "{log}"
stat -c '%a' "$2" >> "{log}"
"""


@pytest.fixture()
def kubectl_log(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "kubectl.log"
    script = folder / "kubectl"
    script.write_text(FAKE_KUBECTL.format(log=log))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.fixture()
def real_kubectl(tmp_path, monkeypatch, kube):
    """The real kubectl first on PATH (its calls recorded in bin/kubectl-calls), and a Ready Node for every node of
    the example site in the real API server."""
    folder = tmp_path / "bin"
    folder.mkdir()
    kube.recording_kubectl(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    put_site_nodes(kube, support.site_from(support.example_data()))
    return folder


def fake(gitops: dict | None = None) -> FakeTerraform:
    return FakeTerraform(
        {
            "platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a"),
            "gitops-prod": gitops or {},
        }
    )


def console() -> Console:
    return Console(out=io.StringIO())


@pytest.fixture()
def talos(tmp_path) -> Tools:
    """The fake talosctl (every control plane answers; `etcd snapshot` streams a genuine snapshot)."""
    folder = tmp_path / "talos"
    folder.mkdir()
    return Tools(folder, unreachable=[])


def options(talos: Tools, **changes) -> DecommissionOptions:
    return DecommissionOptions(**{"confirm": "homelab/prod", "yes": True, "talosctl": talos.talosctl(), **changes})


class Logged(FakeTerraform):
    """The fake Terraform, its plans and applies also written into the talosctl fake's log (their order)."""

    def __init__(self, talos: Tools, states: dict[str, dict[str, dict]]):
        super().__init__(states)
        self.talos = talos

    def run(self, workdir, *args):
        self.talos.record("terraform", *args)
        return super().run(workdir, *args)

    def run_json(self, workdir, *args, on_message=None):
        self.talos.record("terraform", *args[:1])
        return super().run_json(workdir, *args, on_message=on_message)


def snapshots(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "etcd-snapshots" / "homelab" / "prod").glob("*.snapshot"))


def test_decommission_resets_workers_then_control_planes_one_by_one_the_last_non_graceful(
    example_site, tmp_path, real_kubectl, talos, kube
):
    tf, out = fake(), console()
    tf.kubeconfig = kube.kubeconfig_text()
    ws = Workspace(example_site, root=tmp_path)
    assert decommission(ws, "prod", tf, options(talos, destroy_secrets=True), console=out) == ExitCode.OK

    prepare, *resets, secrets = tf.applied
    assert prepare == [f"update {APPLY}.node_{n}_apply" for n in ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")]
    assert resets == [
        [f"delete {APPLY}.node_wk-a_apply", f"delete {APPLY}.node_wk-b_apply"],
        [f"delete {APPLY}.node_cp-b_apply"],
        [f"delete {APPLY}.node_cp-c_apply"],
        [
            "delete talos_cluster_kubeconfig.cluster_kubeconfig",
            "delete talos_machine_bootstrap.cluster_bootstrap",
            f"delete {APPLY}.node_cp-a_apply",
        ],
    ]
    # The talos provider resets with the on_destroy in state: the prepare step put the decommission settings there.
    assert tf.reset_with == {
        f"{APPLY}.node_cp-a_apply": {"reset": True, "graceful": False, "reboot": True},
        **{
            f"{APPLY}.node_{n}_apply": {"reset": True, "graceful": True, "reboot": True}
            for n in ("cp-b", "cp-c", "wk-a", "wk-b")
        },
    }
    assert secrets == ["delete talos_machine_secrets.cluster_secrets"]
    # VMs stay (in maintenance mode) without --delete-vms, and so does the membership record.
    assert sorted(tf.states["platform-prod"]) == sorted(
        [f"proxmox_virtual_environment_vm.node_{n}_vm" for n in ("cp-a", "cp-b", "cp-c", "wk-a", "wk-b")]
        + ["terraform_data.cluster_membership"]
    )
    # Node objects: workers after their reset, then each control plane but the last (the API goes with it).
    calls = recorded_calls(real_kubectl)
    assert [call[2:5] for call in calls] == [
        ["delete", "node", "wk-a"],
        ["delete", "node", "wk-b"],
        ["delete", "node", "cp-b"],
        ["delete", "node", "cp-c"],
    ]
    assert node_names(kube) == ["cp-a"]  # the API server's own answer: the last one's goes with the cluster
    modes = (real_kubectl / "kubectl-calls.modes").read_text().split()
    assert set(modes[::2]) == {"600"}  # the kubeconfig kubectl read was private
    assert not Path(calls[0][1]).exists()  # and is gone
    text = out.out.getvalue()
    assert "reset the last control plane cp-a (non-graceful)" in text and "(1 waived)" in text
    assert "[PG003 ControlPlaneRemains] (waived)" in text and "[PG004 ClusterIdentityKept] (waived)" in text
    # cdktf.out is back to the normal synth: prevent_destroy on the secrets, normal resets.
    stack = json.loads((ws.stack_dir("platform-prod") / "cdk.tf.json").read_text())
    assert stack["resource"]["talos_machine_secrets"]["cluster_secrets"]["lifecycle"]["prevent_destroy"] is True
    assert {b["on_destroy"]["graceful"] for b in stack["resource"][APPLY].values()} == {True}
    backups = list((tmp_path / "state-backups" / "homelab" / "platform-prod").glob("*-decommission.tfstate"))
    assert len(backups) == 6 and {stat.S_IMODE(p.stat().st_mode) for p in backups} == {0o600}


def test_secrets_kept_without_the_flag_and_the_vms_deleted_with_theirs(example_site, tmp_path, kubectl_log, talos):
    tf, out = fake(), console()
    decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos, delete_vms=True), console=out)
    assert sorted(tf.states["platform-prod"]) == ["talos_machine_secrets.cluster_secrets"]
    assert "secrets — kept (prevent_destroy); --destroy-secrets removes them, last" in out.out.getvalue()


def test_gitops_layer_must_go_first(example_site, tmp_path, kubectl_log):
    tf = fake(gitops={"helm_release.cluster_flux": {"values": {}, "depends_on": []}})
    with pytest.raises(OperationError) as caught:
        decommission(
            Workspace(example_site, root=tmp_path),
            "prod",
            tf,
            DecommissionOptions(confirm="homelab/prod", yes=True),
            console=console(),
        )
    assert caught.value.code == ExitCode.REFUSED
    assert str(caught.value).startswith("gitops-prod still has resources: destroy it first")
    assert tf.applied == []


def test_typed_confirmation_is_the_site_and_cluster(example_site, tmp_path):
    tf = fake()
    with pytest.raises(OperationError) as caught:
        decommission(
            Workspace(example_site, root=tmp_path),
            "prod",
            tf,
            DecommissionOptions(confirm="homelab/platform-prod"),
            console=console(),
        )
    assert caught.value.code == ExitCode.DECLINED and tf.calls == []


def test_plain_destroy_of_a_platform_layer_points_to_decommission(example_site, tmp_path):
    tf = fake()
    with pytest.raises(OperationError) as caught:
        destroy(
            Workspace(example_site, root=tmp_path),
            "platform-prod",
            tf,
            DestroyOptions(confirm="homelab/platform-prod"),
            console(),
        )
    assert caught.value.code == ExitCode.REFUSED
    assert "A platform layer is torn down with `terravixens decommission CLUSTER`" in str(caught.value)
    assert tf.applied == []
    assert list((tmp_path / "state-backups" / "homelab" / "platform-prod").glob("*-before-destroy.tfstate"))


# ------------------------------------------------------------------------------------------------- etcd snapshot
def test_one_verified_snapshot_before_the_first_reset_through_the_platform_layers_talosconfig(
    example_site, tmp_path, kubectl_log, talos
):
    tf, out = Logged(talos, fake().states), console()
    assert decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=out) == 0
    log = talos.log()
    taken = [line for line in log if " etcd snapshot " in line]
    assert [line.rsplit(" ", 1)[0] for line in taken] == ["talosctl 10.11.1.11 etcd snapshot"]  # one, through cp-a
    # after the checks (and the talosconfig output they allow), before the first plan: nothing was changed yet
    assert log.index(taken[0]) < log.index("terraform plan") and "terraform apply" not in log[: log.index(taken[0])]
    assert log[log.index(taken[0]) - 1] == "terraform output -raw talosconfig"
    [kept] = snapshots(tmp_path)
    assert kept.name.endswith("_cp-a_decommission.snapshot")
    assert kept.read_bytes() == etcd_tool.genuine_snapshot().read_bytes()
    [config] = {call[1] for call in talos.state()["calls"] if call[0] == "--talosconfig"}
    assert Path(config).parent.name.startswith("terravixens-talosconfig-") and not Path(config).exists()
    assert f"etcd snapshot (etcd-snapshots/homelab/prod/{kept.name})" in out.journal.done
    assert f"platform-prod: snapshot — etcd-snapshots/homelab/prod/{kept.name} through cp-a, before decommission" in (
        out.out.getvalue()
    )


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_no_verified_snapshot_changes_nothing(example_site, tmp_path, kubectl_log, damage):
    folder = tmp_path / "talos"
    folder.mkdir()
    talos = Tools(folder, unreachable=[], etcd_snapshot=etcd_tool.fake_talosctl_setup(damage))
    tf, out = fake(), console()
    with pytest.raises(OperationError) as caught:
        decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=out)
    assert caught.value.code == ExitCode.BACKUP_FAILED
    assert str(caught.value).startswith(
        "platform-prod: no verified etcd snapshot before decommission (3 control planes"
    )
    assert tf.applied == [] and not [call for call in tf.calls if call[1] == "plan"] and snapshots(tmp_path) == []
    assert out.journal.line(interrupted=False) == (
        "stopped at etcd snapshot (snapshot): done: synth, checks; not done: etcd snapshot, prepare, reset workers "
        "wk-a, wk-b, reset control plane cp-b, reset control plane cp-c, reset the last control plane cp-a"
    )


def test_no_snapshot_with_a_reason_goes_on_and_says_why(example_site, tmp_path, kubectl_log, talos):
    tf, out = fake(), console()
    policy = SnapshotPolicy(skip_reason=no_snapshot_reason("the cluster holds nothing worth keeping"))
    ws = Workspace(example_site, root=tmp_path)
    assert decommission(ws, "prod", tf, options(talos, snapshot=policy), console=out) == ExitCode.OK
    assert talos.log() == [] and snapshots(tmp_path) == []
    assert (
        "platform-prod: snapshot — skipped before decommission: the cluster holds nothing worth keeping (--no-snapshot)"
        in out.out.getvalue()
    )
    assert "etcd snapshot (skipped (--no-snapshot))" in out.journal.done


def test_a_rerun_snapshots_through_a_control_plane_still_to_be_reset(example_site, tmp_path, kubectl_log):
    """A decommission stopped after cp-b's reset (workers and cp-b gone from the state: cp-b is in maintenance mode)
    runs again while cp-a does not answer: the snapshot comes through cp-c; cp-b, already reset, is tried last."""
    folder = tmp_path / "talos"
    folder.mkdir()
    talos = Tools(folder, unreachable=["10.11.1.11"])
    tf, out = (
        FakeTerraform({"platform-prod": platform_state(["cp-a", "cp-c"], [], "cp-a"), "gitops-prod": {}}),
        console(),
    )
    assert decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=out) == 0
    calls = [line.rsplit(" ", 1)[0] for line in talos.log() if " etcd snapshot " in line]
    assert calls == ["talosctl 10.11.1.11 etcd snapshot", "talosctl 10.11.1.13 etcd snapshot"]
    [kept] = snapshots(tmp_path)
    assert kept.name.endswith("_cp-c_decommission.snapshot")


def test_no_snapshot_when_every_control_plane_is_already_reset(example_site, tmp_path, kubectl_log, talos):
    state = platform_state([], ["wk-a"], "cp-a")
    tf, out = FakeTerraform({"platform-prod": state, "gitops-prod": {}}), console()
    decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=out)
    assert talos.log() == [] and "etcd snapshot (none: no control plane left)" in out.journal.done


def test_a_first_run_refuses_a_cluster_that_is_not_converged(example_site, tmp_path, kubectl_log, talos):
    """Every node's apply is in the state, plus one of a node the site no longer has (wk-c): the prepare plan would
    delete it, which is not an on_destroy change — deploy first. Nothing is applied."""
    state = platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b", "wk-c"], "cp-a")
    tf = FakeTerraform({"platform-prod": state, "gitops-prod": {}})
    with pytest.raises(OperationError) as caught:
        decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=console())
    assert caught.value.code == ExitCode.REFUSED
    assert str(caught.value) == (
        "platform-prod is not converged: the plan would also change proxmox_virtual_environment_vm.node_wk-c_vm, "
        f"{APPLY}.node_wk-c_apply, terraform_data.cluster_membership; deploy it first (terravixens deploy "
        "platform-prod), then decommission"
    )
    assert tf.applied == []


def test_a_rerun_prepares_only_the_applies_left(example_site, tmp_path, kubectl_log, talos):
    """A decommission stopped after the workers and cp-b were reset (their applies gone from the state, the site still
    naming them): an untargeted plan would create them again, as a real Terraform would. The re-run's prepare step
    targets the applies left, changes only their on_destroy, and the teardown goes on; nothing is created."""
    state = platform_state(["cp-a", "cp-c"], [], "cp-a")
    tf = FakeTerraform({"platform-prod": state, "gitops-prod": {}})
    out = console()
    assert decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=out) == 0
    plans = [call for call in tf.calls if call[:2] == ("platform-prod", "plan")]
    assert [a for a in plans[0] if a.startswith("-target=")] == [
        f"-target={APPLY}.node_cp-a_apply",
        f"-target={APPLY}.node_cp-c_apply",
    ]
    assert not [change for done in tf.applied for change in done if change.startswith("create ")]
    assert tf.applied[0] == [f"update {APPLY}.node_cp-a_apply", f"update {APPLY}.node_cp-c_apply"]


def test_a_gitops_layer_never_applied_is_no_obstacle(example_site, tmp_path, kubectl_log, talos):
    """No gitops state file at all (the layer was never applied): `terraform state list` exits 1 "No state file was
    found!", which is an empty layer, not a failure; the decommission goes on."""
    tf = FakeTerraform({"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")})
    assert decommission(Workspace(example_site, root=tmp_path), "prod", tf, options(talos), console=console()) == 0
    assert ("gitops-prod", "state", "list") in tf.calls
