"""`terravixens deploy` with a stand-in for Terraform (tests/fake_terraform.py) where the talos provider is needed:
the guard stops a plan before anything is applied, and the Node objects of nodes that left the site are deleted
after their reset — by the real kubectl (on PATH, its calls recorded) in a real kube-apiserver
(tests/control_plane.py). The real CLI path is proven in tests/integration/test_operations.py."""

from __future__ import annotations

import copy
import io
import os

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.workspace import Workspace
from tests import support
from tests.control_plane import recorded_calls
from tests.fake_terraform import APPLY, VM, FakeTerraform, platform_state
from tests.kube_objects import node_names, put_site_nodes


@pytest.fixture()
def kubectl_log(tmp_path, monkeypatch, kube):
    """The real kubectl first on PATH, recording its calls into bin/kubectl-calls."""
    folder = tmp_path / "bin"
    folder.mkdir()
    kube.recording_kubectl(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder / "kubectl-calls"


def site_without(*workers: str, control_planes: tuple[str, ...] = ()):
    data = support.example_data()
    for name in workers:
        del data["clusters"]["prod"]["workers"][name]
    for name in control_planes:
        del data["clusters"]["prod"]["control_planes"][name]
    return support.site_from(data)


def fake() -> FakeTerraform:
    return FakeTerraform({"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")})


def test_a_node_that_left_is_reset_then_its_node_object_deleted(tmp_path, kubectl_log, kube):
    assert put_site_nodes(kube, support.site_from(support.example_data())) == ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]
    tf, out = fake(), Console(out=io.StringIO())
    tf.kubeconfig = kube.kubeconfig_text()
    code = deploy(Workspace(site_without("wk-b"), root=tmp_path), ["platform-prod"], tf, DeployOptions(yes=True), out)
    assert code == ExitCode.OK
    assert tf.applied == [
        [f"delete {APPLY}.node_wk-b_apply", f"delete {VM}.node_wk-b_vm", "update terraform_data.cluster_membership"]
    ]
    [call] = recorded_calls(kubectl_log.parent)
    assert call[2:] == ["delete", "node", "wk-b", "--ignore-not-found", "--wait=false"]
    assert "platform-prod: kubernetes — Node wk-b deleted" in out.out.getvalue()
    assert node_names(kube) == ["cp-a", "cp-b", "cp-c", "wk-a"]  # the API server's own answer


def test_a_node_object_already_gone_is_no_failure(tmp_path, kubectl_log, kube):
    """--ignore-not-found: a Node someone deleted already (or that never registered) is not an error."""
    put_site_nodes(kube, support.site_from(support.example_data()))
    kube.delete("Node", "wk-b")
    tf, out = fake(), Console(out=io.StringIO())
    tf.kubeconfig = kube.kubeconfig_text()
    code = deploy(Workspace(site_without("wk-b"), root=tmp_path), ["platform-prod"], tf, DeployOptions(yes=True), out)
    assert code == ExitCode.OK
    assert "platform-prod: kubernetes — Node wk-b deleted" in out.out.getvalue()
    assert node_names(kube) == ["cp-a", "cp-b", "cp-c", "wk-a"]


def test_two_control_planes_leaving_are_never_one_apply(tmp_path, kubectl_log, monkeypatch):
    """3 → 1 in one site change is a scale-in of two steps (tests/test_scale_in.py runs them); without a talosctl to
    check the cluster before the first step, nothing is applied."""
    monkeypatch.setenv("PATH", str(kubectl_log.parent / "bin"))  # kubectl only: no talosctl
    tf, out = fake(), Console(out=io.StringIO())
    data = support.example_data()
    prod = data["clusters"]["prod"]
    prod["control_planes"] = {"cp-a": prod["control_planes"]["cp-a"]}  # 3 -> 1 in one site change
    with pytest.raises(OperationError) as caught:
        deploy(Workspace(support.site_from(data), root=tmp_path), ["platform-prod"], tf, DeployOptions(yes=True), out)
    assert caught.value.code == ExitCode.FAILED
    assert str(caught.value).startswith(
        "platform-prod: talosctl health before the first step failed (cannot run talosctl: No such file or directory)"
    )
    text = out.out.getvalue()
    assert "[PG002 OneControlPlaneLeavesPerApply] (waived) 2 control planes would leave etcd in one apply" in text
    assert "  1/2 control plane cp-b leaves (etcd 3 → 2 members)" in text.splitlines()
    assert tf.applied == [] and recorded_calls(kubectl_log.parent) == []
    assert not list(tmp_path.rglob("*.tfplan"))


def test_site_change_naming_nothing_new_applies_nothing(tmp_path):
    tf = fake()
    unchanged = copy.deepcopy(support.example_data())
    assert (
        deploy(
            Workspace(support.site_from(unchanged), root=tmp_path),
            ["platform-prod"],
            tf,
            DeployOptions(yes=True),
            Console(out=io.StringIO()),
        )
        == ExitCode.OK
    )
    assert tf.applied == []


@pytest.fixture()
def views(monkeypatch):
    """Every plan the per-node view was computed for, once per computation (terravixens.guard.nodes)."""
    from terravixens.guard import nodes

    computed = []
    compute = nodes._node_view

    def counting(plan, context):
        computed.append(plan)
        return compute(plan, context)

    monkeypatch.setattr(nodes, "_node_view", counting)
    return computed


def test_the_per_node_view_of_a_plan_is_computed_once_per_deploy(tmp_path, kubectl_log, views):
    """Scale-in's sequencing and PG001-PG003 all read the view of the layer's plan: one computation."""
    tf = fake()
    code = deploy(Workspace(site_without("wk-b"), root=tmp_path), ["platform-prod"], tf, DeployOptions(yes=True))
    assert code == ExitCode.OK and tf.applied
    assert len(views) == 1


def test_a_scale_in_computes_the_view_of_its_whole_plan_once(tmp_path, kubectl_log, monkeypatch, views):
    monkeypatch.setenv("PATH", str(kubectl_log.parent / "bin"))  # no talosctl: it stops before the first step
    data = support.example_data()
    prod = data["clusters"]["prod"]
    prod["control_planes"] = {"cp-a": prod["control_planes"]["cp-a"]}
    with pytest.raises(OperationError):
        deploy(Workspace(support.site_from(data), root=tmp_path), ["platform-prod"], fake(), DeployOptions(yes=True))
    assert len(views) == 1  # sequenced, then judged whole (PG002 waived) from the same view


def test_plan_guard_judges_and_sums_up_from_one_view(views):
    from terravixens.operations.plan_guard import GuardOptions, plan_guard_report

    plan = support.EXAMPLE_SITE.parent.parent / "tests" / "fixtures" / "plans" / "hand-ok-staged-change.json"
    report = plan_guard_report(
        support.site_from(support.example_data()), GuardOptions(str(plan), layer="platform-prod")
    )
    assert report.ok.endswith("PG001-PG010 pass") and len(views) == 1
