"""`terravixens deploy --check`: once a cluster's platform and gitops layers (those being deployed) are done, its
acceptance check runs — through the platform layer's talosconfig and kubeconfig outputs — and its lines are printed;
problems stop the deploy with CHECK_FAILED (6, what was applied stays applied), a check that cannot look with FAILED
(4). Terraform is tests/fake_terraform.py, talosctl the faithful fake; the Kubernetes side a real kube-apiserver read
by the real kubectl (tests/cluster_fakes.py, tests/control_plane.py).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.acceptance import CheckOptions
from terravixens.operations.console import Console
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.workspace import Workspace
from tests import support
from tests.cluster_fakes import Cluster
from tests.fake_terraform import FakeTerraform, platform_state

LAYERS = ["platform-prod", "gitops-prod"]


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy-check")
    site = support.site_from(support.example_data())
    Workspace(site, root=root).synth()
    return site, root


@pytest.fixture
def cluster(tmp_path, synthesized, kube) -> Cluster:
    return Cluster(tmp_path, synthesized[0], kube=kube)


def terraform(cluster: Cluster) -> FakeTerraform:
    return FakeTerraform(
        {"platform-prod": platform_state(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"], "cp-a")},
        outputs={
            "platform-prod": {
                "talosconfig": cluster.talosconfig.read_text(),
                "kubeconfig": cluster.kubeconfig.read_text(),
            }
        },
    )


def run(cluster: Cluster, synthesized, layers=LAYERS, check: bool = True, tf: FakeTerraform | None = None):
    site, root = synthesized
    out = io.StringIO()
    options = DeployOptions(
        yes=True,
        synth=False,
        check=CheckOptions(talosctl=str(cluster.talosctl_path), timeout=30) if check else None,
    )
    console = Console(out=out)
    try:
        code = deploy(Workspace(site, root=root), layers, tf or terraform(cluster), options, console, cluster.kubectl())
    except OperationError as error:
        return error, [line.split("] ", 1)[-1] for line in out.getvalue().splitlines()], console
    return code, [line.split("] ", 1)[-1] for line in out.getvalue().splitlines()], console


def test_the_check_runs_once_after_the_cluster_s_last_layer_and_prints_its_lines(cluster, synthesized):
    code, lines, console = run(cluster, synthesized)
    assert code == ExitCode.OK
    gitops_done = lines.index("gitops-prod: plan — no changes")
    check_at = lines.index("check prod: check")
    assert gitops_done < check_at
    assert [line.split(":")[0] for line in lines[check_at + 1 : check_at + 9]] == [
        "  talos",
        "  services",
        "  nodes",
        "  cilium",
        "  l2",
        "  flux",
        "  logs",
        "  certificates",
    ]
    assert lines[check_at + 9] == (
        "check prod: check — check prod: every check passed (talos, services, nodes, cilium, l2, flux, logs, "
        "certificates)"
    )
    assert lines[-1] == "deployed: nothing (no changes)"
    assert console.journal.done == ["platform-prod (no changes)", "gitops-prod (no changes)", "check prod (ok)"]
    assert sum(1 for call in cluster.talos_calls() if call[4] == "health") == 1


def test_without_a_state_backup_the_log_window_starts_with_the_deploy(cluster, synthesized):
    old = {"level": "error", "ts": (datetime.now(UTC) - timedelta(minutes=10)).isoformat(), "msg": "before the deploy"}
    cluster.talos(lambda s: s.update(logs={"10.11.1.11": {"etcd": [json.dumps(old)]}}))
    code, lines, _ = run(cluster, synthesized)
    assert code == ExitCode.OK
    [logs] = [line for line in lines if line.startswith("  logs:")]
    assert logs.startswith("  logs: ok — no error line in etcd, kubelet, controller-runtime since ")
    assert logs.endswith(
        "(the start of this deploy: no state backup of the cluster here yet); the last 300 lines of each read"
    )


def test_only_the_platform_layer_deployed_is_checked_after_it(cluster, synthesized):
    code, lines, console = run(cluster, synthesized, layers=["platform-prod"])
    assert code == ExitCode.OK
    assert lines.index("platform-prod: plan — no changes") < lines.index("check prod: check")
    assert console.journal.done[-1] == "check prod (ok)"


def test_problems_stop_the_deploy_with_check_failed(cluster, synthesized):
    cluster.objects("daemonsets.apps", [])
    error, lines, console = run(cluster, synthesized)
    assert isinstance(error, OperationError) and error.code == ExitCode.CHECK_FAILED
    assert str(error) == (
        "check prod: 1 problem (cilium); ok: talos, services, nodes, l2, flux, logs, certificates: what was applied "
        "stays applied; fix what the lines above say, then `terravixens check prod`"
    )
    assert (
        "  cilium: problem — no DaemonSet kube-system/cilium: Cilium is the gitops layer's: terravixens deploy "
        "gitops-prod"
    ) in lines
    assert console.journal.line(interrupted=False) == (
        "stopped at the end: done: platform-prod (no changes), gitops-prod (no changes), check prod (problems); not "
        "done: nothing"
    )


def test_a_check_that_cannot_look_stops_the_deploy_with_failed(cluster, synthesized):
    server = cluster.unreachable()
    error, lines, _ = run(cluster, synthesized)
    assert isinstance(error, OperationError) and error.code == ExitCode.FAILED
    assert str(error).startswith("check prod: not checked: nodes, cilium, l2, flux; ok: ")
    assert str(error).endswith(
        "what was applied stays applied; run `terravixens check prod` once the cluster can be read"
    )
    refused = f"The connection to the server {server} was refused - did you specify the right host or port?"
    assert f"  nodes: not checked — kubectl get nodes: {refused}" in lines
    assert (
        "  talos: ok — talosctl health through cp-a (10.11.1.11): every check passed (3 control planes, 2 workers)"
        in (lines)
    )


def test_without_check_nothing_is_read(cluster, synthesized):
    code, lines, _ = run(cluster, synthesized, check=False)
    assert code == ExitCode.OK
    assert cluster.talos_calls() == [] and cluster.kube_calls() == []
    assert not any(line.startswith("check prod") for line in lines)
