"""`terravixens decommission`: the order of the resets, the settings each one runs with (read from the real synth),
Node objects deleted after each reset through kubectl (a fake on PATH), the secrets last and only when asked.
Terraform is tests/fake_terraform.py: the Talos resources have no provider binary here (ADR 0003)."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest

from terravixens.operations import ExitCode, OperationError
from terravixens.operations.console import Console
from terravixens.operations.decommission import DecommissionOptions, decommission
from terravixens.operations.destroy import DestroyOptions, destroy
from terravixens.operations.workspace import Workspace
from tests.fake_terraform import APPLY, FakeTerraform, platform_state

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


def fake(gitops: dict | None = None) -> FakeTerraform:
    return FakeTerraform(
        {
            "platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a"),
            "gitops-prod": gitops or {},
        }
    )


def console() -> Console:
    return Console(out=io.StringIO())


def test_decommission_resets_workers_then_control_planes_one_by_one_the_last_non_graceful(
    example_site, tmp_path, kubectl_log
):
    tf, out = fake(), console()
    ws = Workspace(example_site, root=tmp_path)
    options = DecommissionOptions(confirm="homelab/prod", yes=True, destroy_secrets=True)
    assert decommission(ws, "prod", tf, options, console=out) == ExitCode.OK

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
    lines = kubectl_log.read_text().splitlines()
    assert [line.split(" ")[3:5] for line in lines[::2]] == [
        ["node", "wk-a"],
        ["node", "wk-b"],
        ["node", "cp-b"],
        ["node", "cp-c"],
    ]
    assert set(lines[1::2]) == {"600"}  # the kubeconfig kubectl read was private
    assert not Path(lines[0].split(" ")[1]).exists()  # and is gone
    text = out.out.getvalue()
    assert "reset the last control plane cp-a (non-graceful)" in text and "(1 waived)" in text
    assert "[PG003 ControlPlaneRemains] (waived)" in text and "[PG004 ClusterIdentityKept] (waived)" in text
    # cdktf.out is back to the normal synth: prevent_destroy on the secrets, normal resets.
    stack = json.loads((ws.stack_dir("platform-prod") / "cdk.tf.json").read_text())
    assert stack["resource"]["talos_machine_secrets"]["cluster_secrets"]["lifecycle"]["prevent_destroy"] is True
    assert {b["on_destroy"]["graceful"] for b in stack["resource"][APPLY].values()} == {True}
    backups = list((tmp_path / "state-backups" / "homelab" / "platform-prod").glob("*-decommission.tfstate"))
    assert len(backups) == 6 and {stat.S_IMODE(p.stat().st_mode) for p in backups} == {0o600}


def test_secrets_kept_without_the_flag_and_the_vms_deleted_with_theirs(example_site, tmp_path, kubectl_log):
    tf, out = fake(), console()
    options = DecommissionOptions(confirm="homelab/prod", yes=True, delete_vms=True)
    decommission(Workspace(example_site, root=tmp_path), "prod", tf, options, console=out)
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
