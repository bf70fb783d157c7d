"""etcd judged by etcd itself: the operations that read or change etcd membership run against a real etcd cluster
(tests/control_plane.py: three members on loopback, TLS, client certificates), which the talosctl fake delegates to
(tests/fake_talosctl.py, scenario key `etcd`: `etcd members`, `status`, `remove-member` and `snapshot` are answered
by tools/etcd/machined making the calls Talos' machined makes). Node objects go through the real kubectl into a real
kube-apiserver.

- `terravixens snapshot`: the file is what a running member streams (Maintenance.Snapshot), judged by etcdutl and
  by a member started from it with `etcdutl snapshot restore`, whose keys are read back;
- scale-in: each control plane that leaves really leaves (Talos' EtcdLeaveCluster on its graceful reset), a new one
  really joins as a learner and is promoted; the member count after each step is etcd's;
- `remove-dead-member`: the member's process is stopped for real; etcd removes it;
- quorum loss (two of three stopped): etcd itself refuses the member list and the removal;
- `restore-etcd`: a genuine snapshot of the cluster, restored by etcdutl into the bootstrap node's member; the
  others join it; the keys written before the snapshot are read back from the restored cluster.

What is still a fake here, and why: talosctl and the Talos API (not served by the Go module proxy), so `version`,
`health`, `service`, `reset` and the reboots are tests/fake_talosctl.py's, written from talosctl's sources. A real
cluster adds the reboots, apid's proxying, and etcd members listening on the nodes' own addresses.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations import OperationError
from terravixens.operations.console import Console
from terravixens.operations.dead_member import remove_dead_member, snapshot_before_removal
from terravixens.operations.kube import Kubectl
from terravixens.operations.restore_etcd import RestoreOptions, restore_etcd
from terravixens.operations.snapshot import SnapshotOptions, take_snapshot
from terravixens.operations.workspace import Workspace
from terravixens.talosctl import members
from tests import control_plane as cp
from tests import etcd_tool
from tests.fake_terraform import ADDRESSES, FakeTerraform
from tests.kube_objects import node_names, put_site_nodes
from tests.scale_in_harness import Cluster, ClusterTerraform, site_data, snapshots
from tests.tools_on_path import DISASTER, LoggedTerraform, Tools, options

CP = {name: ADDRESSES[name] for name in ("cp-a", "cp-b", "cp-c")}
KEYS = {f"/registry/terravixens/key-{i}": f"value-{i}" for i in range(8)}


@pytest.fixture
def etcd(tmp_path):
    """Three real members named after the example site's control planes, standing for their nodes' addresses."""
    cluster = cp.EtcdCluster(tmp_path / "etcd", list(CP), nodes=dict(ADDRESSES))
    try:
        cluster.start()
        for key, value in KEYS.items():
            cluster.machined("put", key, value)
        yield cluster
    finally:
        cluster.close()


def tools(tmp_path: Path, etcd: cp.EtcdCluster, **scenario) -> Tools:
    folder = tmp_path / "talos"
    folder.mkdir(exist_ok=True)
    return Tools(folder, **{"unreachable": [], "etcd": str(etcd.described), **scenario})


def names(etcd: cp.EtcdCluster, through: str) -> list[str]:
    return sorted(m["name"] for m in etcd.member_list(through))


# ----------------------------------------------------------------------------------------------------- reading
def test_members_and_status_are_etcds_own_answers(tmp_path, etcd):
    fake = tools(tmp_path, etcd)
    answer = fake.talosctl().etcd_members(CP["cp-b"])
    assert answer.ok, answer.reason
    listed = members(answer.stdout)
    real = {m["id"]: m for m in etcd.member_list("cp-a")}
    assert sorted((m.id, m.hostname, m.learner) for m in listed) == sorted(
        (i, m["name"], m["learner"]) for i, m in real.items()
    )
    assert all(m.peer_urls == real[m.id]["peer_urls"][0] for m in listed)
    status = subprocess.run(
        [str(fake.talosctl_path), "--talosconfig", "x", "--nodes", ",".join(CP.values()), "etcd", "status"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = [re.split(r"\s{3,}", line.strip()) for line in status.stdout.splitlines()[1:]]  # tabwriter columns
    assert status.returncode == 0 and [row[0] for row in rows] == list(CP.values())
    assert {row[1] for row in rows} == set(real)  # each node's own member
    assert len({row[4] for row in rows}) == 1 and {row[4] for row in rows} <= set(real)  # one leader, a member
    assert {row[9] for row in rows} == {"3.6.16"}  # PROTOCOL: the version the members run


def test_a_snapshot_is_what_a_running_member_streams_and_restores_with_its_keys(tmp_path, etcd, example_site):
    fake = tools(tmp_path, etcd)
    ws = Workspace(example_site, root=tmp_path)
    console = Console(out=io.StringIO())
    options = SnapshotOptions(talosconfig="talosconfig", talosctl=fake.talosctl())
    code = take_snapshot(ws, "prod", FakeTerraform({}), options, console)
    assert code == ExitCode.OK, console.out.getvalue()
    [kept] = snapshots(tmp_path)
    assert kept.name.endswith("_cp-a_manual.snapshot")
    status = json.loads(
        subprocess.run(
            [str(cp.ETCDUTL), "snapshot", "status", str(kept), "-w", "json"], capture_output=True, text=True
        ).stdout
    )
    assert status["totalKey"] >= len(KEYS)
    restored = cp.EtcdCluster(tmp_path / "restored", ["cp-a"], pki=etcd.pki)
    try:
        done = restored.restore(kept, "cp-a")
        assert done.returncode == 0, done.stderr
        assert restored.machined("get", "/registry/terravixens/")["kvs"] == KEYS
    finally:
        restored.close()


# ----------------------------------------------------------------------------------------------------- scale-in
class RealScaleIn(Cluster):
    """tests/test_scale_in.py's cluster, its etcd real: a deleted control plane's apply is Talos' graceful reset (the
    member leaves, its etcd stops, its data is wiped), a new control plane's apply makes it join as a learner, promoted
    unless `learners` names it; Node objects deleted by the real kubectl in a real API server."""

    def __init__(self, folder: Path, etcd: cp.EtcdCluster, kube: cp.ControlPlane, workers: list[str]):
        super().__init__(folder, list(etcd.members), workers, etcd=str(etcd.described))
        self.etcd, self.kube = etcd, kube
        self.tf = RealTerraform(self, self.tf.states)
        self.tf.kubeconfig = kube.kubeconfig_text()
        self.kubectl_path = kube.recording_kubectl(folder / "bin")

    def members(self) -> list[str]:
        through = next(name for name, member in self.etcd.members.items() if member.running)
        return names(self.etcd, through)


class RealTerraform(ClusterTerraform):
    def applied_change(self, layer: str, change: dict) -> None:
        address = change["address"]
        if not address.startswith("talos_machine_configuration_apply."):
            return
        name = address.split(".", 1)[1].removeprefix("node_").removesuffix("_apply")
        etcd = self.cluster.etcd
        if change["action"] == "delete" and name in etcd.members:
            etcd.leave(name)
        if change["action"] == "create" and name.startswith("cp-"):
            etcd.join(name, node=ADDRESSES[name], learner_promoted=name not in self.learners)


def test_three_control_planes_to_one_leave_etcd_one_per_apply(tmp_path, etcd, kube, example_site):
    put_site_nodes(kube, example_site)
    cluster = RealScaleIn(tmp_path, etcd, kube, ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.OK, ran.error + ran.out
    assert ran.steps() == [
        "1/2 control plane cp-b leaves (etcd 3 → 2 members)",
        "2/2 control plane cp-c leaves (etcd 2 → 1 members), with the rest of the plan (1 change)",
    ]
    assert "etcd members — 2 (cp-a, cp-c) after step 1/2, listed through cp-a" in ran.out
    assert "etcd members — 1 (cp-a) after step 2/2, listed through cp-a" in ran.out
    assert cluster.members() == ["cp-a"]  # etcd's own answer
    assert etcd.machined("get", "/registry/terravixens/")["kvs"] == KEYS  # nothing lost on the way
    assert node_names(kube) == ["cp-a", "wk-a", "wk-b"]  # the API server's own answer
    taken = snapshots(tmp_path)
    assert len(taken) == 2
    for path in taken:  # each one a real member's database, judged by etcd's own code
        code, report = etcd_tool.verify(path)
        assert code == 0 and report["total_keys"] >= len(KEYS)


def test_a_replacement_joins_as_a_learner_and_the_old_one_leaves_once_it_votes(tmp_path, etcd, kube, example_site):
    """cp-d joins and stays a learner (etcd has not promoted it): the member read-back stops the scale-in before
    cp-c leaves; promoted for real, the re-run goes on."""
    put_site_nodes(kube, example_site)
    cluster = RealScaleIn(tmp_path, etcd, kube, ["wk-a", "wk-b"])
    cluster.tf.learners = {"cp-d"}
    site = site_data(["cp-a", "cp-b", "cp-d"], ["wk-a", "wk-b"])
    stopped = cluster.deploy(site)
    assert stopped.code == ExitCode.FAILED and len(cluster.tf.applied) == 1
    assert "still a learner (not yet a voting member): cp-d" in stopped.error
    [learner] = [m for m in etcd.member_list("cp-a") if m["learner"]]
    assert learner["name"] == "cp-d"
    etcd.machined("promote", learner["id"])
    resumed = cluster.deploy(site)
    assert resumed.code == ExitCode.OK, resumed.error
    assert resumed.steps() == ["1/1 control plane cp-c leaves (etcd 4 → 3 members)"]
    assert cluster.members() == ["cp-a", "cp-b", "cp-d"]
    assert not [m for m in etcd.member_list("cp-a") if m["learner"]]
    assert etcd.machined("get", "/registry/terravixens/", through=["cp-d"])["kvs"] == KEYS  # replicated to it


# ----------------------------------------------------------------------------------------------- a dead member
def _dead(tmp_path, etcd: cp.EtcdCluster, kube: cp.ControlPlane, example_site, *dead: str) -> tuple:
    for name in dead:
        etcd.stop(name)  # the machine is gone: its etcd with it
    put_site_nodes(kube, example_site)
    fake = tools(tmp_path, etcd, unreachable=[CP[name] for name in dead])
    tf = LoggedTerraform(fake)
    tf.kubeconfig = kube.kubeconfig_text()
    kubectl = Kubectl(str(kube.recording_kubectl(fake.folder / "bin")), timeout=30)
    return fake, tf, kubectl


def test_remove_dead_member_takes_out_a_member_stopped_for_real(tmp_path, etcd, kube, example_site):
    fake, tf, kubectl = _dead(tmp_path, etcd, kube, example_site, "cp-a")
    ws = Workspace(example_site, root=tmp_path)
    console = Console(out=io.StringIO())
    dead_id = next(m["id"] for m in etcd.member_list("cp-b") if m["name"] == "cp-a")
    code = remove_dead_member(
        ws,
        "prod",
        "cp-a",
        tf,
        fake.talosctl(),
        kubectl,
        console,
        options(before_irreversible=snapshot_before_removal(ws)),
    )
    output = console.out.getvalue()
    assert code == ExitCode.OK, output
    assert f"platform-prod: etcd — 3 members listed through cp-b; cp-a is member {dead_id}" in output
    assert "platform-prod: etcd — 2 members left (read back through cp-b)" in output
    assert names(etcd, "cp-b") == ["cp-b", "cp-c"] == names(etcd, "cp-c")  # etcd's own answer, on both
    assert node_names(kube) == ["cp-b", "cp-c", "wk-a", "wk-b"]
    [kept] = snapshots(tmp_path)  # taken before the removal, through a live member
    assert "_cp-b_" in kept.name and etcd_tool.verify(kept)[0] == 0


def test_quorum_loss_is_etcds_refusal_and_nothing_is_removed(tmp_path, etcd, kube, example_site):
    """Two of three members stopped: the survivor has no leader. etcd refuses the member list (the removal is never
    tried), and the cluster is whole again when the two come back."""
    ids = {m["name"]: m["id"] for m in etcd.member_list()}
    fake, tf, kubectl = _dead(tmp_path, etcd, kube, example_site, "cp-b", "cp-c")
    ws = Workspace(example_site, root=tmp_path)
    console = Console(out=io.StringIO())
    with pytest.raises(OperationError) as caught:
        remove_dead_member(
            ws, "prod", "cp-b", tf, fake.talosctl(), kubectl, console, options(confirm="homelab/prod/cp-b")
        )
    assert caught.value.code == ExitCode.REFUSED
    assert str(caught.value) == (
        "no control plane of prod answers `talosctl etcd members`: etcd has lost quorum; restore etcd from a "
        "snapshot (talosctl bootstrap --recover-from); nothing was done"
    )
    listed = [line for line in fake.log() if " etcd " in line]
    # every other control plane asked: cp-a's etcd refuses (no leader), cp-c's node does not answer
    assert listed == ["talosctl 10.11.1.11 etcd members", "talosctl 10.11.1.13 etcd members"]
    answer = fake.talosctl().etcd_members(CP["cp-a"])
    assert not answer.ok
    assert "error getting members: 1 error occurred:" in answer.stderr
    assert "10.11.1.11: rpc error: code = " in answer.stderr
    assert any(text in answer.stderr for text in ("etcdserver: no leader", "context deadline exceeded"))
    with pytest.raises(RuntimeError, match="etcdserver: no leader"):  # by now it knows it has none
        etcd.machined("remove-member", ids["cp-b"], through=["cp-a"])
    assert node_names(kube) == ["cp-a", "cp-b", "cp-c", "wk-a", "wk-b"]  # nothing was deleted
    for name in ("cp-b", "cp-c"):
        etcd.restart(name)
    for name in ("cp-b", "cp-c"):
        etcd.wait_healthy(etcd.members[name])
    assert names(etcd, "cp-a") == ["cp-a", "cp-b", "cp-c"]


# ------------------------------------------------------------------------------------------------------ restore
class Recovery(threading.Thread):
    """What Talos' etcd service does once `talosctl bootstrap --recover-from` was accepted on a node: the file
    restored by etcdutl into the node's (wiped) member and that member started, then every other wiped control plane
    joining it (as a learner, promoted). The fake talosctl records the request (scenario `recovered`) and waits for
    this to mark it started (or failed, with etcdutl's answer). Processes started here die with this thread
    (PR_SET_PDEATHSIG follows the thread): it lives until the cluster is closed."""

    def __init__(self, etcd: cp.EtcdCluster, fake: Tools):
        super().__init__(daemon=True)
        self.etcd, self.fake = etcd, fake
        self.finished = threading.Event()
        self.restored: list[str] = []

    def __enter__(self) -> Recovery:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.etcd.close()  # before the thread ends: its processes would be killed with it anyway
        self.finished.set()
        self.join(30)

    def _mark(self, **flags: object) -> None:
        with open(f"{self.fake.scenario}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.fake.state()
            state["recovered"].update(flags)
            written = self.fake.scenario.with_name(f"{self.fake.scenario.name}.{os.getpid()}")
            written.write_text(json.dumps(state))
            written.replace(self.fake.scenario)

    def run(self) -> None:
        while not self.finished.wait(0.1):
            state = self.fake.state()
            asked = state.get("recovered") or {}
            if not asked or asked.get("started") or asked.get("failed"):
                continue
            name = next(n for n, a in CP.items() if a == asked["node"])
            done = self.etcd.restore(Path(asked["file"]), name, skip_hash_check=asked["skip_hash_check"])
            if done.returncode != 0:
                self._mark(failed=done.stderr.strip()[-500:])
                continue
            for other in sorted(set(CP) - {name}):  # the other wiped control planes join the restored one
                if CP[other] in state.get("wiped", []):
                    self.etcd.join(other, node=CP[other])
            self.restored.append(name)
            self._mark(started=True)


def lose_quorum(fake: Tools, etcd: cp.EtcdCluster) -> None:
    """Two of the three members stopped for real; what Talos says of the services: cp-a up without a leader."""
    etcd.stop("cp-b")
    etcd.stop("cp-c")
    with open(f"{fake.scenario}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = fake.state()
        state.update(etcd_service=json.loads(json.dumps(DISASTER)), etcd_tool=str(etcd_tool.binary()))
        fake.scenario.write_text(json.dumps(state))


def test_restore_etcd_restores_a_genuine_snapshot_and_its_keys_come_back(tmp_path, etcd, example_site):
    """A snapshot of the running cluster (terravixens snapshot), a key written after it, then quorum lost (two
    members stopped). restore-etcd wipes every control plane's member, the bootstrap node's is restored from the file
    by etcdutl and started, the others join it: the keys of the snapshot are there, the later one is not, and the
    members are new."""
    fake = tools(tmp_path, etcd)
    ws = Workspace(example_site, root=tmp_path)
    options = SnapshotOptions(talosconfig="talosconfig", talosctl=fake.talosctl())
    assert take_snapshot(ws, "prod", FakeTerraform({}), options, Console(out=io.StringIO())) == ExitCode.OK
    [source] = snapshots(tmp_path)
    etcd.machined("put", "/registry/terravixens/after-the-snapshot", "lost by the restore")
    before = {m["id"] for m in etcd.member_list()}
    lose_quorum(fake, etcd)
    console = Console(out=io.StringIO())
    with Recovery(etcd, fake) as recovery:
        code = restore_etcd(
            ws,
            "prod",
            FakeTerraform({}),
            fake.talosctl(timeout=60),
            RestoreOptions(source=source, confirm="homelab/prod", talosconfig="talosconfig", poll=0.2, timeout=60),
            console,
        )
        output = console.out.getvalue()
        assert code == ExitCode.OK, output
        assert recovery.restored == ["cp-a"]
        assert "platform-prod: etcd — cp-a lists no members (exit 1: error getting members: 1 error occurred:" in output
        assert etcd.machined("get", "/registry/terravixens/", through=["cp-c"])["kvs"] == KEYS  # replicated
        listed = {m["name"]: m for m in etcd.member_list("cp-a")}
        assert sorted(listed) == ["cp-a", "cp-b", "cp-c"] and not [m for m in listed.values() if m["learner"]]
        # the joined members are new; the restored one's id is etcd's hash of its peer URL and the cluster token,
        # the same as before when both are (a real node restores on its own address)
        assert not {listed["cp-b"]["id"], listed["cp-c"]["id"]} & before
    # bootstrap read the private copy of the file (issue 26: restore-etcd verifies and uploads a 0600 copy of it)
    recovered = fake.state()["recovered"]
    assert recovered["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest() and recovered["mode"] == "0o600"
    assert fake.log()[-2:] == [
        f"talosctl 10.11.1.11 bootstrap --recover-from={recovered['file']}",
        (
            "talosctl 10.11.1.11 health --control-plane-nodes 10.11.1.11,10.11.1.12,10.11.1.13 --wait-timeout 60s "
            "--worker-nodes 10.11.1.21,10.11.1.22"
        ),
    ]


def test_another_real_clusters_snapshot_is_refused_and_restores_only_with_its_members_typed(
    tmp_path, etcd, example_site
):
    """Issue 26's identity check against a real etcd's snapshot: a running one-member cluster (db-1, another
    cluster's node) streams its database (Maintenance.Snapshot, as Talos streams it). restore-etcd reads its members
    with etcd's own membership reader and refuses it before any talosctl call; with --force-foreign-snapshot db-1 the
    bootstrap node's real member is restored from it by etcdutl: prod's keys are gone, the other cluster's are read
    back."""
    foreign = cp.EtcdCluster(tmp_path / "foreign", ["db-1"], nodes={"db-1": "10.20.0.5"})
    try:
        foreign.start()
        foreign.machined("put", "/registry/other/secret", "not prod's")
        source = tmp_path / "other.snapshot"
        assert foreign.machined("snapshot", str(source))["bytes"] == source.stat().st_size > 0
        peer = foreign.members["db-1"].peer_url
    finally:
        foreign.close()
    fake = tools(tmp_path, etcd)
    ws = Workspace(example_site, root=tmp_path)

    def options(**changes: object) -> RestoreOptions:
        return RestoreOptions(
            **{"source": source, "confirm": "homelab/prod", "talosconfig": "talosconfig", "poll": 0.2, "timeout": 60}
            | changes
        )

    out = io.StringIO()
    for forced, mismatch in ((None, ""), ("db-2", " (--force-foreign-snapshot 'db-2' is not 'db-1')")):
        with pytest.raises(OperationError) as caught:
            restore_etcd(ws, "prod", FakeTerraform({}), fake.talosctl(), options(foreign=forced), Console(out))
        assert caught.value.code == ExitCode.REFUSED and fake.log() == []
        assert str(caught.value) == (
            f"--from other.snapshot: it is not this cluster's etcd: its members db-1 ({peer}) are none of prod's "
            f"control planes (cp-a, cp-b, cp-c) by hostname or peer address{mismatch}. Restoring it would give prod "
            "another cluster's objects, identities and Secrets; to restore it anyway, knowingly, pass "
            "--force-foreign-snapshot db-1; nothing was done"
        )
    assert etcd.machined("get", "/registry/terravixens/")["kvs"] == KEYS  # prod's etcd untouched

    lose_quorum(fake, etcd)
    console = Console(out=io.StringIO())
    with Recovery(etcd, fake) as recovery:
        code = restore_etcd(ws, "prod", FakeTerraform({}), fake.talosctl(timeout=60), options(foreign="db-1"), console)
        output = console.out.getvalue()
        assert code == ExitCode.OK, output
        assert "restored anyway: --force-foreign-snapshot db-1" in output
        assert recovery.restored == ["cp-a"]
        assert etcd.machined("get", "/registry/", through=["cp-c"])["kvs"] == {"/registry/other/secret": "not prod's"}
        assert sorted(m["name"] for m in etcd.member_list("cp-a")) == ["cp-a", "cp-b", "cp-c"]
