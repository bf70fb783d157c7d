"""The operations, end to end, against the fake Proxmox VE and moto's S3 server, on loopback.

`terravixens deploy | destroy | restore | drift` run exactly as an operator runs them, on each layer's projection
onto the providers with a binary here (the Workspace `transform` seam; talos, helm and kubernetes have none, ADR
0003): the hypervisors layer whole, the platform layer's VMs and membership record. Real plans judged by the guard
are captured as fixtures (TERRAVIXENS_CAPTURE_PLANS=1, tests/fixtures/plans/capture.py).

The projected platform layer has no talosconfig output: drift's Talos side says "not deployed". The destroy/recreate
cycles end with `terravixens check` against the faithful talosctl and kubectl fakes (tests/cluster_fakes.py) made to
reflect what the fake Proxmox VE runs at that moment: a node whose VM is not running does not answer talosctl and
has no Kubernetes Node; no control plane running, no API. A real cluster adds the Talos boot, etcd's bootstrap,
the kubelets registering and Cilium rolling out between the apply and the check.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terravixens.exitcodes import ExitCode, MonitorExit
from terravixens.operations import OperationError
from terravixens.operations.check import CheckCommand, check
from terravixens.operations.deploy import DeployOptions, deploy
from terravixens.operations.destroy import DestroyOptions, destroy
from terravixens.operations.drift import drift
from terravixens.operations.files import private_process
from terravixens.operations.restore import restore
from terravixens.operations.workspace import Workspace
from tests import support
from tests.cluster_fakes import Cluster
from tests.fakepve_ext import FakePveServer
from tests.fakepve_operations import Recorder, api, inventory, terraform_for, workspace
from tests.fixtures.plans.capture import capture, capture_state, capturing
from tests.loopback import free_port
from tests.s3_store import BUCKET, s3_endpoint  # noqa: F401  (module fixture)

pytestmark = pytest.mark.integration

HOST = "127.0.0.43"
L0, L1 = "hypervisors", "platform-prod"
PROXMOX_SIDE = [L0, L1]
ROOT = Path(__file__).resolve().parents[2]
TIMINGS = ROOT / "tests" / "fixtures" / "cycle-times.json"


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    server = FakePveServer(HOST, free_port(HOST), tmp_path_factory.mktemp("pki-ops")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module", autouse=True)
def umask():
    previous = private_process()
    yield
    os.umask(previous)


EMPTY = {"vms": [], "bridges": [], "users": [], "roles": [], "tokens": [], "acl": [], "files": []}


def state_modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in (root / "state").glob("*.tfstate")}


def leftover_plans(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.tfplan")]


@pytest.fixture(scope="module")
def deployed(fake, terraform_binary, tmp_path_factory):
    """L0 + L1-Proxmox deployed through `terravixens deploy`, once for the module."""
    root = tmp_path_factory.mktemp("ops")
    data = support.loopback_data(fake.url)
    ws, tf = workspace(root, data), terraform_for(fake, terraform_binary)
    console = Recorder()
    started = time.monotonic()
    code = deploy(ws, PROXMOX_SIDE, tf, DeployOptions(yes=True, save_plan_json=root / "first.json"), console)
    elapsed = time.monotonic() - started
    assert code == ExitCode.OK, console.text
    capture("real-hypervisors-create", (root / "first-hypervisors.json").read_text())
    capture("real-platform-create", (root / "first-platform-prod.json").read_text())
    return root, data, ws, tf, console.text, elapsed


def test_deploy_runs_every_step_and_leaves_no_plan(deployed, fake):
    root, _data, ws, _tf, text, _ = deployed
    for step in (
        "site: synth",
        "hypervisors: init",
        "hypervisors: plan",
        "hypervisors: guard — ok",
        "hypervisors: summary — 9 to create",
        "hypervisors: backup — no state yet",
        "hypervisors: apply",
        "platform-prod: guard — ok",
        "platform-prod: summary — 6 to create",
        "platform-prod: done",
    ):
        assert step in text, step
    assert "  node cp-a:\n    + proxmox_virtual_environment_vm.node_cp-a_vm" in text
    assert inventory(fake)["vms"] == [1101, 1102, 1103, 1201, 1202]
    assert leftover_plans(root) == []
    assert state_modes(root) == {"state/hypervisors.tfstate": 0o600, "state/platform-prod.tfstate": 0o600}
    assert {stat.S_IMODE(p.stat().st_mode) for p in root.glob("first-*.json")} == {0o600}
    # The plan's JSON went through a pipe: nothing but the synthesized stack is written next to it.
    for layer in PROXMOX_SIDE:
        assert [p.name for p in ws.stack_dir(layer).glob("*.json")] == ["cdk.tf.json"]


def test_second_deploy_has_nothing_to_do_and_backs_up_nothing(deployed):
    _root, _, ws, tf, _, _ = deployed
    console = Recorder()
    assert deploy(ws, PROXMOX_SIDE, tf, DeployOptions(yes=True, synth=False), console) == ExitCode.OK
    assert "hypervisors: plan — no changes" in console.text and "platform-prod: plan — no changes" in console.text
    assert "deployed: nothing (no changes)" in console.text


def test_unconfirmed_deploy_applies_nothing(deployed, fake):
    root, data, _, tf, _, _ = deployed
    changed = copy.deepcopy(data)
    changed["clusters"]["prod"]["workers"]["wk-a"]["cpu"] = 6
    console = Recorder(answers=["no"])
    with pytest.raises(OperationError) as caught:
        deploy(workspace(root, changed), [L1], tf, DeployOptions(), console)
    assert caught.value.code == ExitCode.DECLINED
    assert "  node wk-a:\n    ~ proxmox_virtual_environment_vm.node_wk-a_vm (cpu)" in console.text
    assert fake.call(lambda: int(fake.pve.vm(1201).config["cores"])) == 8
    assert leftover_plans(root) == []


def test_guard_refuses_real_plans_and_nothing_is_applied(deployed, fake, terraform_binary):
    root, data, _, tf, _, _ = deployed
    before = inventory(fake)

    replaced = copy.deepcopy(data)
    replaced["clusters"]["prod"]["workers"]["wk-b"]["vm_id"] = 1299
    console = Recorder()
    with pytest.raises(OperationError) as caught:
        deploy(
            workspace(root, replaced), [L1], tf, DeployOptions(yes=True, save_plan_json=root / "replaced.json"), console
        )
    assert caught.value.code == ExitCode.REFUSED
    assert (
        "[PG001 StayingNodeKept] proxmox_virtual_environment_vm.node_wk-b_vm would be replaced: node 'wk-b' "
        "stays in the site but would be destroyed and re-created."
    ) in console.text
    capture("real-platform-vm-replaced", (root / "replaced.json").read_text())

    bridge_gone = copy.deepcopy(data)
    bridge_gone["hypervisors"]["pve2"]["bridges"] = {}
    console = Recorder()
    with pytest.raises(OperationError) as caught:
        deploy(
            workspace(root, bridge_gone),
            [L0],
            tf,
            DeployOptions(yes=True, save_plan_json=root / "bridge.json"),
            console,
        )
    assert caught.value.code == ExitCode.REFUSED
    assert (
        "[PG008 HypervisorKeepsWhatNodesUse] proxmox_network_linux_bridge.hv_pve2_bridge_vmbr1 would delete "
        "bridge 'vmbr1' on 'pve2', used by VM cp-b in platform-prod (deployed), VM wk-b in platform-prod "
        "(deployed), node cp-b of cluster prod (site file), node wk-b of cluster prod (site file)"
    ) in console.text
    capture("real-hypervisors-bridge-in-use", (root / "bridge.json").read_text())
    state = tf.run(root / "cdktf.out" / "stacks" / L1, "state", "pull").stdout
    capture_state("real-platform-state", state)

    # L0 torn down while the platform layer has VMs on it: judged on the deployed state, not on the site.
    console = Recorder()
    with pytest.raises(OperationError) as caught:
        destroy(workspace(root, data), L0, tf, DestroyOptions(confirm="homelab/hypervisors"), console)
    assert caught.value.code == ExitCode.REFUSED
    refused = [line for line in console.text.splitlines() if line.startswith("  [PG008")]
    assert len(refused) == 6  # three bridges, the role, the user and its token
    assert any(
        "proxmox_user_token.hv_pve1_token would be deleted while the platform layers manage 5 VMs" in line
        for line in refused
    )
    if capturing():  # the refused teardown plan itself, for the fixture
        stack = root / "cdktf.out" / "stacks" / L0
        assert tf.run(stack, "plan", "-destroy", "-input=false", "-out=capture.tfplan").returncode == 0
        capture("real-hypervisors-destroy-while-vms-run", tf.run(stack, "show", "-json", "capture.tfplan").stdout)
        (stack / "capture.tfplan").unlink()

    shown = tf.run(root / "cdktf.out" / "stacks" / L0, "show", "-json")  # the plan file forgotten: state JSON
    capture("real-state-not-a-plan", shown.stdout)
    (root / "state.json").write_text(shown.stdout)
    guard = subprocess.run(
        [sys.executable, "-m", "terravixens.cli", "plan-guard", str(root / "state.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert guard.returncode == 2 and "is a state (`terraform show -json` without a plan file" in guard.stderr
    assert inventory(fake) == before
    assert leftover_plans(root) == []


def test_drift_detected_after_an_out_of_band_change(deployed, fake):
    root, data, _, tf, _, _ = deployed
    ws = workspace(root, data)
    console = Recorder()
    assert drift(ws, PROXMOX_SIDE, tf, console) == 0, console.text
    # Someone turns "start at boot" off by hand (memory would only be a pending change on a running VM).
    api(fake, "PUT", "/nodes/pve2/qemu/1202/config", onboot="0")
    assert fake.call(lambda: fake.pve.vm(1202).config["onboot"]) in (0, "0")
    console = Recorder()
    assert drift(ws, PROXMOX_SIDE, tf, console, synth=False) == 2
    assert "hypervisors: drift — in sync" in console.text
    assert "platform-prod: drift — 1 to update; changed outside Terraform: 1" in console.text
    assert "  outside Terraform: proxmox_virtual_environment_vm.node_wk-b_vm (update)" in console.text
    assert "  node wk-b:\n    ~ proxmox_virtual_environment_vm.node_wk-b_vm (on_boot)" in console.text
    assert "drift in: platform-prod" in console.text
    # the projection has no talos provider, hence no talosconfig output: the Talos side has nothing to compare
    assert (
        "platform-prod: talos — not deployed: platform-prod has no talosconfig output (not applied yet, or "
        "destroyed); nothing to compare"
    ) in console.text
    assert leftover_plans(root) == []
    assert deploy(ws, [L1], tf, DeployOptions(yes=True, synth=False), Recorder()) == ExitCode.OK
    assert drift(ws, PROXMOX_SIDE, tf, Recorder(), synth=False) == 0


def test_destroy_backs_up_then_restore_puts_the_state_back(deployed, fake):
    root, data, _, tf, _, _ = deployed
    ws = workspace(root, data)
    listed = tf.run(ws.stack_dir(L1), "state", "list").stdout.split()
    with pytest.raises(OperationError) as caught:
        destroy(ws, L1, tf, DestroyOptions(confirm="homelab/hypervisors"), Recorder())
    assert caught.value.code == ExitCode.DECLINED and inventory(fake)["vms"]

    console = Recorder()
    assert destroy(ws, L1, tf, DestroyOptions(confirm="homelab/platform-prod"), console) == ExitCode.OK
    [backup] = (root / "state-backups" / "homelab" / L1).glob("*-before-destroy.tfstate")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert f"platform-prod: backup — state-backups/homelab/platform-prod/{backup.name}" in console.text
    assert "verified restorable" in console.text and "6 to delete" in console.text
    assert inventory(fake)["vms"] == []
    assert tf.run(ws.stack_dir(L1), "state", "list").stdout.split() == []

    console = Recorder()
    assert restore(ws, L1, backup, tf, confirm="homelab/platform-prod", console=console) == ExitCode.OK
    assert sorted(tf.run(ws.stack_dir(L1), "state", "list").stdout.split()) == sorted(listed)
    # The state is back; the VMs are not: drift shows them gone, and a deploy re-creates them.
    assert drift(ws, [L1], tf, Recorder(), synth=False) == 2
    assert deploy(ws, [L1], tf, DeployOptions(yes=True, synth=False), Recorder()) == ExitCode.OK
    assert inventory(fake)["vms"] == [1101, 1102, 1103, 1201, 1202]


def cluster_as_running(folder: Path, ws: Workspace, fake: FakePveServer) -> Cluster:
    """The talosctl and kubectl fakes answering for what the fake Proxmox VE runs now: a node whose VM does not run
    does not answer talosctl, is no etcd member and has no Kubernetes Node; without a control plane, no API. Each
    cycle's cluster is new: new client certificates; an etcd error line from before the cycle's apply."""
    running = set(fake.call(lambda: [vm.name for vm in fake.pve.vms if vm.status == "running"]))
    folder.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(folder, ws.site)
    down = [n for n in cluster.nodes if n.hostname not in running]
    before = {"level": "error", "ts": "2020-01-01T00:00:00Z", "msg": "a line from before this cycle's apply"}
    first = cluster.nodes[0].address

    def talos(state: dict) -> None:
        state["unreachable"] = [n.address for n in down]
        # a node down fails `talosctl health` (the fake says so at Node readiness; Talos would stop at apid first)
        state.update(broken=[n.address for n in down], health_transcript=True)
        state["members"] = [m for m in state["members"] if m["hostname"] in running]
        state["logs"] = {first: {"etcd": [json.dumps(before)]}}

    def kube(state: dict) -> None:
        state["objects"]["nodes"] = [o for o in state["objects"]["nodes"] if o["metadata"]["name"] in running]
        state["objects"]["daemonsets.apps"][0]["status"].update(
            desiredNumberScheduled=len(running), numberReady=len(running), updatedNumberScheduled=len(running)
        )
        state["unreachable"] = not any(n.role == "controlplane" and n.hostname in running for n in cluster.nodes)

    cluster.talos(talos)
    cluster.kube(kube)
    return cluster


def run_check(cluster: Cluster, ws: Workspace) -> tuple[int, str]:
    console = Recorder()
    code = check(ws, "prod", None, cluster.options(), console, CheckCommand(synth=False), cluster.kubectl())
    return int(code), console.text


def test_five_destroy_recreate_cycles_leave_nothing_behind(deployed, fake):
    root, data, _, tf, _, first = deployed
    ws = workspace(root, data)
    ws.synth()
    times = []
    for cycle in range(1, 6):
        started = time.monotonic()
        assert destroy(ws, L1, tf, DestroyOptions(confirm="homelab/platform-prod", synth=False), Recorder()) == 0
        assert destroy(ws, L0, tf, DestroyOptions(confirm="homelab/hypervisors", synth=False), Recorder()) == 0
        torn_down = time.monotonic() - started
        assert inventory(fake) == EMPTY, cycle
        for layer in PROXMOX_SIDE:
            assert tf.run(ws.stack_dir(layer), "state", "list").stdout.split() == [], (cycle, layer)
        if cycle == 1:  # nothing runs: the check cannot look at anything but the certificates
            code, text = run_check(cluster_as_running(root / "cycle-0", ws, fake), ws)
            assert code == MonitorExit.ERROR, text
            assert text.splitlines()[-1] == (
                "check prod: not checked: talos, services, nodes, cilium, l2, flux, logs; ok: certificates"
            )
        assert deploy(ws, PROXMOX_SIDE, tf, DeployOptions(yes=True, synth=False), Recorder()) == ExitCode.OK
        checking = time.monotonic()
        code, text = run_check(cluster_as_running(root / f"cycle-{cycle}", ws, fake), ws)
        times.append(
            {
                "cycle": cycle,
                "destroy_s": round(torn_down, 1),
                "check_s": round(time.monotonic() - checking, 1),
                "total_s": round(time.monotonic() - started, 1),
            }
        )
        assert code == MonitorExit.IN_SYNC, (cycle, text)
        assert "nodes: ok — 5 Nodes Ready with the site's roles and labels, no other Node" in text
        [logs] = [line for line in text.splitlines() if line.startswith("logs:")]
        assert "(the last apply of platform-prod (state backup " in logs and "-deploy.tfstate)" in logs, logs
        assert inventory(fake)["vms"] == [1101, 1102, 1103, 1201, 1202]
        assert leftover_plans(root) == []
    # the check follows what runs: wk-b's VM stopped behind Terraform's back is a problem it finds (2), not a pass
    [wk_b] = fake.call(lambda: [vm for vm in fake.pve.vms if vm.name == "wk-b"])
    fake.call(lambda: setattr(wk_b, "status", "stopped"))
    try:
        code, text = run_check(cluster_as_running(root / "wk-b-stopped", ws, fake), ws)
    finally:
        fake.call(lambda: setattr(wk_b, "status", "running"))
    assert code == MonitorExit.FOUND, text
    assert "nodes: problem — no Kubernetes Node wk-b (site node wk-b, 127.11.1.22)" in text, text
    assert text.splitlines()[-1] == (
        "check prod: 3 problems (talos, services, nodes); ok: cilium, l2, flux, logs, certificates"
    ), text
    backups = list((root / "state-backups").rglob("*.tfstate"))
    assert backups and {stat.S_IMODE(p.stat().st_mode) for p in backups} == {0o600}
    report = {
        "machine": f"{os.uname().machine}, {os.cpu_count()} cores",
        "first_deploy_s": round(first, 1),
        "cycles": times,
    }
    print(json.dumps(report))
    if os.environ.get("TERRAVIXENS_RECORD_CYCLES") == "1":
        TIMINGS.write_text(json.dumps(report, indent=1) + "\n")


@pytest.fixture()
def second_fake(tmp_path_factory):
    server = FakePveServer("127.0.0.44", free_port("127.0.0.44"), tmp_path_factory.mktemp("pki-s3")).start()
    yield server
    server.stop()


def test_s3_backend_deploy_destroy_restore(second_fake, terraform_binary, s3_endpoint, tmp_path):  # noqa: F811
    fake = second_fake
    endpoint, client = s3_endpoint
    data = support.loopback_data(fake.url)
    data["state"] = {
        "backend": "s3",
        "s3": {
            "endpoint": endpoint,
            "bucket": BUCKET,
            "key_prefix": "ops",
            "allow_insecure_http": "moto on loopback, a test emulator",
        },
    }
    data["clusters"]["prod"]["control_planes"] = {"cp-a": data["clusters"]["prod"]["control_planes"]["cp-a"]}
    data["clusters"]["prod"]["workers"] = {}
    for hypervisor in data["hypervisors"].values():
        hypervisor.pop("api_user", None)
    ws = workspace(tmp_path, data)
    tf = terraform_for(fake, terraform_binary, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    assert deploy(ws, PROXMOX_SIDE, tf, DeployOptions(yes=True), Recorder()) == ExitCode.OK
    key = f"ops/homelab/{L1}.tfstate"
    head = client.head_object(Bucket=BUCKET, Key=key)
    assert head["ServerSideEncryption"] == "AES256"  # encrypt = true by default

    assert destroy(ws, L1, tf, DestroyOptions(confirm="homelab/platform-prod", synth=False), Recorder()) == 0
    [backup] = (tmp_path / "state-backups" / "homelab" / L1).glob("*.tfstate")
    saved = json.loads(backup.read_text())
    assert [r["type"] for r in saved["resources"]] == ["proxmox_virtual_environment_vm", "terraform_data"]
    assert restore(ws, L1, backup, tf, confirm="homelab/platform-prod", synth=False, console=Recorder()) == 0
    restored = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert restored["lineage"] == saved["lineage"] and restored["resources"] == saved["resources"]
    assert inventory(fake)["vms"] == []  # restoring state brings no VM back: the next deploy does
