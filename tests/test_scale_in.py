"""Sequenced scale-in inside `terravixens deploy` (terravixens.operations.scale_in, ADR 0037): 3 → 1 and 5 → 3 one
control plane per apply, each step planned with -target, guarded, preceded by a verified etcd snapshot through a
control plane that stays, applied, its Node object deleted, followed by `talosctl health` and the etcd members read
back; control planes that replace others join first; workers in batches; a stop at each kind of step, and the re-run
that resumes without repeating a step; the dry-run's steps are the run's.

Fakes: Terraform is tests/fake_terraform.py (the platform layer's Talos state; the plans of nodes that leave or join
the site), whose applies act on the cluster as the talos provider would: a deleted apply is a graceful reset, so a
control plane leaves etcd; a new control plane's apply makes it join. talosctl is tests/fake_talosctl.py (its own
output formats; etcd snapshots are genuine, tests/etcd_tool.py), kubectl a script that records its calls. Both fakes
write into one call log, so the order of everything is visible. A real cluster adds the time each reset takes (a
drain, etcd's leave), learners promoted some seconds after they join, and talosctl failing over between endpoints
of a talosconfig that still lists the nodes that left.
"""

from __future__ import annotations

import stat

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.guard import GuardContext, check_plan, node_view, refusals, site_roles
from terravixens.guard.plan import read_plan
from terravixens.operations import scale_in as scale_in_module
from terravixens.operations.scale_in import sequence_of
from terravixens.operations.workspace import Workspace
from tests import etcd_tool, support
from tests.fake_terraform import ADDRESSES, APPLY, VM
from tests.scale_in_harness import (
    LAYER,
    MEMBERSHIP,
    Cluster,
    health_lists,
    member,
    removed,
    site_data,
    snapshots,
)


def test_three_control_planes_to_one_leave_one_per_apply(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.OK, ran.error
    assert cluster.tf.applied == [removed("cp-b"), [*removed("cp-c"), f"update {MEMBERSHIP}"]]
    assert ran.steps() == [
        "1/2 control plane cp-b leaves (etcd 3 → 2 members)",
        "2/2 control plane cp-c leaves (etcd 2 → 1 members), with the rest of the plan (1 change)",
    ]
    cp_a = ADDRESSES["cp-a"]
    assert cluster.log() == [
        "terraform plan",  # the whole layer: the sequence is computed from it
        f"talosctl {cp_a} health",  # the cluster as it is: healthy, etcd = the state's control planes
        f"talosctl {cp_a} etcd members",
        f"terraform plan {VM}.node_cp-b_vm {APPLY}.node_cp-b_apply",
        f"talosctl {cp_a} etcd snapshot",  # through the control plane that stays
        "terraform apply",
        "kubectl delete node",
        f"talosctl {cp_a} health",
        f"talosctl {cp_a} etcd members",
        "terraform plan",  # the last step: the whole layer
        f"talosctl {cp_a} etcd snapshot",
        "terraform apply",
        "kubectl delete node",
        f"talosctl {cp_a} health",
        f"talosctl {cp_a} etcd members",
    ]
    state = cluster.state()
    assert health_lists(cluster) == [
        "10.11.1.11,10.11.1.12,10.11.1.13",
        "10.11.1.11,10.11.1.13",
        "10.11.1.11",
    ]
    deleted = [call[5] for call in state["calls"] if call[0] == "kubectl"]
    assert deleted == ["cp-b", "cp-c"] and cluster.members() == ["cp-a"]
    taken = snapshots(tmp_path)
    assert len(taken) == 2 and {stat.S_IMODE(path.stat().st_mode) for path in taken} == {0o600}
    assert [path.name.split("_", 2)[2] for path in taken] == [  # prod_<time>_<node>_<reason>.snapshot
        "cp-a_scale-in-step-1-2-cp-b-leaves.snapshot",
        "cp-a_scale-in-step-2-2-cp-c-leaves.snapshot",
    ]
    assert "etcd members — 2 (cp-a, cp-c) after step 1/2, listed through cp-a" in ran.out
    assert "etcd members — 1 (cp-a) after step 2/2, listed through cp-a" in ran.out
    assert ran.out.splitlines()[-1] == "deployed: platform-prod"
    # The guard judged every plan that was applied, and none had two control planes leaving.
    roles = site_roles(cluster.ws.site, cluster.ws.layer(LAYER))
    step_plans = cluster.tf.shown[1:]
    assert len(step_plans) == 2
    for shown in step_plans:
        view = node_view(read_plan(shown), GuardContext(roles=roles))
        assert len(view.control_planes_leaving()) == 1
        assert refusals(check_plan(shown, GuardContext(roles=roles))) == []
    again = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert again.code == ExitCode.OK and "platform-prod: plan — no changes" in again.out
    assert len(cluster.tf.applied) == 2  # idempotent: nothing left to do


def test_five_control_planes_to_three(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"], ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.OK, ran.error
    assert cluster.tf.applied == [removed("cp-d"), [*removed("cp-e"), f"update {MEMBERSHIP}"]]
    assert ran.steps() == [
        "1/2 control plane cp-d leaves (etcd 5 → 4 members)",
        "2/2 control plane cp-e leaves (etcd 4 → 3 members), with the rest of the plan (1 change)",
    ]
    assert health_lists(cluster) == [
        "10.11.1.11,10.11.1.12,10.11.1.13,10.11.1.14,10.11.1.15",
        "10.11.1.11,10.11.1.12,10.11.1.13,10.11.1.15",
        "10.11.1.11,10.11.1.12,10.11.1.13",
    ]
    assert cluster.members() == ["cp-a", "cp-b", "cp-c"]
    assert len(snapshots(tmp_path)) == 2
    log = cluster.log()
    # each snapshot right before its apply, each member read-back right after its health check
    assert [line.split()[0] + " " + line.split()[-1] for line in log if line.endswith((" snapshot", " apply"))] == [
        "talosctl snapshot",
        "terraform apply",
        "talosctl snapshot",
        "terraform apply",
    ]
    assert "etcd members — 4 (cp-a, cp-b, cp-c, cp-e) after step 1/2" in ran.out


def test_replaced_control_plane_joins_before_the_old_one_leaves(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a", "cp-b", "cp-d"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.OK, ran.error
    assert ran.steps() == [
        "1/2 cp-d joins (etcd 3 → 4 members), with the rest of the plan (1 change)",
        "2/2 control plane cp-c leaves (etcd 4 → 3 members)",
    ]
    assert cluster.tf.applied == [
        [f"create {VM}.node_cp-d_vm", f"create {APPLY}.node_cp-d_apply", f"update {MEMBERSHIP}"],
        removed("cp-c"),
    ]
    assert "etcd members — 4 (cp-a, cp-b, cp-c, cp-d) after step 1/2" in ran.out
    assert cluster.members() == ["cp-a", "cp-b", "cp-d"]
    assert health_lists(cluster)[1] == "10.11.1.11,10.11.1.12,10.11.1.13,10.11.1.14"


def test_adding_control_planes_is_one_apply_as_before(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a"], ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.OK, ran.error
    assert len(cluster.tf.applied) == 1 and ran.steps() == [] and "scale-in" not in ran.out
    assert cluster.log() == ["terraform plan", "terraform apply"]  # no talosctl: a plain deploy


def test_a_worker_leaving_is_one_apply_as_before(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"], ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"], ["wk-a"]))
    assert ran.code == ExitCode.OK, ran.error
    assert cluster.tf.applied == [[*removed("wk-b"), f"update {MEMBERSHIP}"]] and ran.steps() == []


# --------------------------------------------------------------------------------------------------- workers
def test_workers_leave_in_batches_when_asked(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b", "wk-c", "wk-d"])
    ran = cluster.deploy(site_data(["cp-a", "cp-b", "cp-c"], ["wk-a"]), worker_batch=2)
    assert ran.code == ExitCode.OK, ran.error
    assert ran.steps() == [
        "1/2 workers wk-b, wk-c leave",
        "2/2 worker wk-d leaves, with the rest of the plan (1 change)",
    ]
    assert cluster.tf.applied == [removed("wk-b", "wk-c"), [*removed("wk-d"), f"update {MEMBERSHIP}"]]
    assert snapshots(tmp_path) == []  # etcd does not change: no snapshot
    deleted = [call[5] for call in cluster.state()["calls"] if call[0] == "kubectl"]
    assert deleted == ["wk-b", "wk-c", "wk-d"]
    assert health_lists(cluster, "--worker-nodes") == [
        "10.11.1.21,10.11.1.22,10.11.1.23,10.11.1.24",
        "10.11.1.21,10.11.1.24",
        "10.11.1.21",
    ]


def test_without_a_batch_size_the_workers_leave_in_one_apply(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b", "wk-c", "wk-d"])
    ran = cluster.deploy(site_data(["cp-a", "cp-b", "cp-c"], ["wk-a"]))
    assert ran.code == ExitCode.OK and ran.steps() == []
    assert cluster.tf.applied == [[*removed("wk-b", "wk-c", "wk-d"), f"update {MEMBERSHIP}"]]


def test_workers_and_control_planes_together(tmp_path):
    """New workers join first, the leaving workers go in one apply, then one control plane per apply."""
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"])
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-c"]))
    assert ran.code == ExitCode.OK, ran.error
    assert ran.steps() == [
        "1/4 wk-c joins, with the rest of the plan (1 change)",
        "2/4 worker wk-b leaves",
        "3/4 control plane cp-b leaves (etcd 3 → 2 members)",
        "4/4 control plane cp-c leaves (etcd 2 → 1 members)",
    ]
    assert cluster.tf.applied == [
        [f"create {VM}.node_wk-c_vm", f"create {APPLY}.node_wk-c_apply", f"update {MEMBERSHIP}"],
        removed("wk-b"),
        removed("cp-b"),
        removed("cp-c"),
    ]
    assert len(snapshots(tmp_path)) == 2 and cluster.members() == ["cp-a"]


# ---------------------------------------------------------------------------------------------------- dry run
def test_the_dry_run_shows_the_steps_the_run_takes(tmp_path):
    cluster = Cluster(tmp_path, ["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"], ["wk-a", "wk-b"])
    site = site_data(["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-c"])
    dry = cluster.deploy(site, dry_run=True, worker_batch=1)
    assert dry.code == ExitCode.OK, dry.error
    assert cluster.tf.applied == [] and cluster.log() == ["terraform plan"]  # a plan; no talosctl, no kubectl
    assert not (tmp_path / "state-backups").exists() and snapshots(tmp_path) == []
    assert "platform-prod: dry run — nothing applied" in dry.out
    assert dry.out.splitlines()[-1] == "dry run: nothing applied (platform-prod planned)"
    assert dry.listed() == [
        "1/4 wk-c joins, with the rest of the plan (1 change)",
        "2/4 worker wk-b leaves",
        "3/4 control plane cp-d leaves (etcd 5 → 4 members)",
        "4/4 control plane cp-e leaves (etcd 4 → 3 members)",
    ]
    ran = cluster.deploy(site, worker_batch=1)
    assert ran.code == ExitCode.OK, ran.error
    assert ran.listed() == dry.listed() and ran.steps() == dry.listed()
    assert len(cluster.tf.applied) == 4


# -------------------------------------------------------------------------------------- stop, then resume
THREE_TO_ONE = (["cp-a", "cp-b", "cp-c"], ["wk-a", "wk-b"])
STEP_1 = "platform-prod step 1/2: cp-b leaves"
STEP_2 = "platform-prod step 2/2: cp-c leaves"
BEFORE = "platform-prod: cluster check"


def _fail_plan(cluster: Cluster) -> None:
    cluster.tf.fail = {"plan": 2}  # the first step's plan (the first plan is the whole layer's)


def _guard_refuses(cluster: Cluster) -> None:
    # the step's plan also destroys the bootstrap record: PG006 refuses it
    cluster.tf.extra = [{"address": "talos_machine_bootstrap.cluster_bootstrap", "action": "delete", "after": None}]


def _no_snapshot(cluster: Cluster) -> None:
    cluster.edit(lambda state: state.update(etcd_snapshot=etcd_tool.fake_talosctl_setup("cut")))


def _fail_apply(cluster: Cluster) -> None:
    cluster.tf.fail = {"apply": 1}


def _unhealthy_after(cluster: Cluster) -> None:
    cluster.edit(lambda state: state.update(health_script=[True, False]))


def _heal(cluster: Cluster) -> None:
    cluster.tf.fail, cluster.tf.extra, cluster.tf.seen = {}, [], {}
    cluster.edit(lambda state: state.update(etcd_snapshot=etcd_tool.fake_talosctl_setup(), health_script=[]))


STOPS = {
    # kind: (break, code, where the journal says it stopped, the applies made before the stop)
    "plan": (_fail_plan, ExitCode.FAILED, f"{STEP_1} (plan)", 0),
    "guard": (_guard_refuses, ExitCode.REFUSED, f"{STEP_1} (guard)", 0),
    "snapshot": (_no_snapshot, ExitCode.BACKUP_FAILED, f"{STEP_1} (snapshot)", 0),
    "apply": (_fail_apply, ExitCode.FAILED, f"{STEP_1} (apply)", 0),
    "health": (_unhealthy_after, ExitCode.FAILED, f"{STEP_1} (health)", 1),
}


@pytest.mark.parametrize("kind", STOPS)
def test_a_stop_at_each_kind_of_step_says_where_and_a_rerun_resumes(tmp_path, kind):
    breaks, code, where, applied = STOPS[kind]
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    site = site_data(["cp-a"], ["wk-a", "wk-b"])
    breaks(cluster)
    stopped = cluster.deploy(site)
    assert stopped.code == code, (stopped.error, stopped.out)
    assert stopped.line == f"stopped at {where}: done: synth, {BEFORE}; not done: {STEP_1}, {STEP_2}"
    assert cluster.tf.applied == [removed("cp-b")][:applied]
    if applied:  # the step was applied, what followed it failed: the message says so, and how to go on
        assert stopped.error.endswith(
            "step 1/2 (cp-b leaves) is applied. Run `terravixens deploy` again once fixed: it resumes from what the "
            "state holds"
        )

    _heal(cluster)
    resumed = cluster.deploy(site)
    assert resumed.code == ExitCode.OK, resumed.error
    expected = [removed("cp-b"), [*removed("cp-c"), f"update {MEMBERSHIP}"]]
    assert cluster.tf.applied == expected  # every step applied once: none repeated, nothing else touched
    deleted = [call[5] for call in cluster.state()["calls"] if call[0] == "kubectl"]
    assert deleted == ["cp-b", "cp-c"]
    assert cluster.members() == ["cp-a"]
    if applied:
        assert resumed.steps() == [
            "1/1 control plane cp-c leaves (etcd 2 → 1 members), with the rest of the plan (1 change)"
        ]
    else:
        assert len(resumed.steps()) == 2


def test_a_member_count_that_is_not_the_steps_stops_and_a_rerun_resumes(tmp_path):
    """cp-d joins but stays a learner (etcd has not promoted it): health passes (learners are consistent members),
    the member read-back does not — no control plane may leave while the new one does not vote."""
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.tf.learners = {"cp-d"}
    site = site_data(["cp-a", "cp-b", "cp-d"], ["wk-a", "wk-b"])
    stopped = cluster.deploy(site)
    grow = "platform-prod step 1/2: cp-d joins"
    leave = "platform-prod step 2/2: cp-c leaves"
    assert stopped.code == ExitCode.FAILED and len(cluster.tf.applied) == 1
    assert stopped.error.startswith(
        "platform-prod: etcd members after step 1/2, listed through cp-a: still a learner (not yet a voting member): "
        "cp-d; step 1/2 (cp-d joins) is applied. Run `terravixens deploy` again once fixed"
    )
    assert stopped.line == f"stopped at {grow} (etcd members): done: synth, {BEFORE}; not done: {grow}, {leave}"
    cluster.edit(lambda state: [m.update(learner=False) for m in state["members"]])  # etcd promotes it
    resumed = cluster.deploy(site)
    assert resumed.code == ExitCode.OK, resumed.error
    assert resumed.steps() == ["1/1 control plane cp-c leaves (etcd 4 → 3 members)"]
    assert cluster.tf.applied[1:] == [removed("cp-c")] and cluster.members() == ["cp-a", "cp-b", "cp-d"]


def test_a_reset_that_did_not_leave_etcd_is_caught_by_health(tmp_path):
    """cp-b's reset ran but its member stayed: talosctl health compares the members with the control planes it is
    given (check.EtcdControlPlaneNodesAssertion) and fails; the operator removes the member, the re-run goes on."""
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.tf.stays_in_etcd = {"cp-b"}
    site = site_data(["cp-a"], ["wk-a", "wk-b"])
    stopped = cluster.deploy(site)
    assert stopped.code == ExitCode.FAILED and cluster.tf.applied == [removed("cp-b")]
    assert "etcd member ips" in stopped.error and "are not subset of control plane node ips" in stopped.error
    again = cluster.deploy(site)  # still there: the check before the first step stops it, nothing applied
    assert again.code == ExitCode.FAILED and len(cluster.tf.applied) == 1
    cluster.edit(lambda state: state.update(members=[m for m in state["members"] if m["hostname"] != "cp-b"]))
    resumed = cluster.deploy(site)
    assert resumed.code == ExitCode.OK and cluster.tf.applied[1:] == [[*removed("cp-c"), f"update {MEMBERSHIP}"]]


def test_an_interrupt_in_a_step_says_where_and_a_rerun_resumes(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.tf.interrupt = {"apply": 2}  # Ctrl-C while the second step's apply starts
    site = site_data(["cp-a"], ["wk-a", "wk-b"])
    stopped = cluster.deploy(site)
    assert stopped.code == ExitCode.INTERRUPTED and cluster.tf.applied == [removed("cp-b")]
    assert stopped.line == (
        f"interrupted by SIGINT at {STEP_2} (apply): done: synth, {BEFORE}, {STEP_1} (applied, healthy); "
        f"not done: {STEP_2}"
    )
    cluster.tf.interrupt, cluster.tf.seen = {}, {}
    resumed = cluster.deploy(site)
    assert resumed.code == ExitCode.OK and resumed.steps() == [
        "1/1 control plane cp-c leaves (etcd 2 → 1 members), with the rest of the plan (1 change)"
    ]
    assert cluster.tf.applied == [removed("cp-b"), [*removed("cp-c"), f"update {MEMBERSHIP}"]]


def test_the_guard_stays_the_last_line_of_defence(tmp_path, monkeypatch):
    """Were the sequencer's own check of a step's plan gone, a plan taking two control planes out is still refused
    by PG002 before anything is applied."""
    monkeypatch.setattr(scale_in_module, "_unexpected", lambda plan, step, roles: None)
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.tf.ignore_targets = True
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.REFUSED and cluster.tf.applied == []
    assert "[PG002 OneControlPlaneLeavesPerApply] 2 control planes would leave etcd in one apply" in ran.out
    assert ran.error == "platform-prod: plan refused by the guard (1 problem); nothing was applied"
    assert snapshots(tmp_path) == []


def test_a_step_plan_that_is_not_the_step_is_not_applied(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.tf.ignore_targets = True
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.REFUSED and cluster.tf.applied == []
    assert ran.error.startswith(
        "platform-prod: the plan of step 1/2 is not the step (it takes out cp-b, cp-c, the step cp-b); nothing of it "
        "was applied."
    )


def test_an_unhealthy_cluster_is_not_scaled_in(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE, health_script=[False])
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.FAILED and cluster.tf.applied == []
    assert ran.error.startswith("platform-prod: talosctl health before the first step failed (")
    assert ran.error.endswith(
        "); nothing was applied. Run `terravixens deploy` again once fixed: it resumes from what the state holds"
    )
    assert ran.line == f"stopped at {BEFORE} (health): done: synth; not done: {BEFORE}, {STEP_1}, {STEP_2}"


def test_an_etcd_member_the_state_does_not_know_stops_before_anything(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.edit(lambda state: state["members"].append(member("cp-d")))  # a member no apply stands for
    cluster.edit(lambda state: state.update(health_script=[True]))
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.FAILED and cluster.tf.applied == []
    assert "etcd members before the first step, listed through cp-a: 4 members, 3 expected; still a member: cp-d" in (
        ran.error
    )


def test_a_learner_blocks_the_next_control_plane_from_leaving(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    cluster.edit(lambda state: state["members"][1].update(learner=True))
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]))
    assert ran.code == ExitCode.FAILED and cluster.tf.applied == []
    assert "still a learner (not yet a voting member): cp-b" in ran.error


def test_one_question_for_the_whole_sequence_and_no_answer_touches_nothing(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]), yes=False)  # no terminal, no --yes
    assert ran.code == ExitCode.DECLINED and ran.error.startswith("platform-prod: no terminal to confirm on")
    assert cluster.tf.applied == [] and cluster.log() == ["terraform plan"] and snapshots(tmp_path) == []
    assert ran.line == "stopped at platform-prod (confirm): done: synth; not done: platform-prod"


def test_no_snapshot_with_a_reason_is_said_where_the_snapshot_would_be(tmp_path):
    cluster = Cluster(tmp_path, *THREE_TO_ONE)
    ran = cluster.deploy(site_data(["cp-a"], ["wk-a", "wk-b"]), no_snapshot="snapshot taken by hand at 10:02")
    assert ran.code == ExitCode.OK and snapshots(tmp_path) == []
    assert ran.out.count("snapshot — skipped before scale-in step") == 2
    assert "skipped before scale-in step 1/2, cp-b leaves: snapshot taken by hand at 10:02 (--no-snapshot)" in ran.out


# ------------------------------------------------------------------------------------------- the sequence alone
def _plan_of(cluster: Cluster, site: dict) -> tuple[Workspace, object]:
    ws = Workspace(support.site_from(site), root=cluster.folder)
    ws.synth()
    cluster.tf.run_json(ws.stack_dir(LAYER), "plan", "-out=terravixens.tfplan")
    return ws, read_plan(cluster.tf.plan_json(LAYER))


@pytest.mark.parametrize(
    ("today", "site", "counts"),
    [
        (["cp-a", "cp-b", "cp-c"], ["cp-a"], [(3, 2), (2, 1)]),
        (["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"], ["cp-a", "cp-b", "cp-c"], [(5, 4), (4, 3)]),
        (["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"], ["cp-a"], [(5, 4), (4, 3), (3, 2), (2, 1)]),
        (["cp-a", "cp-b", "cp-c"], ["cp-a", "cp-d", "cp-e"], [(3, 5), (5, 4), (4, 3)]),
    ],
)
def test_etcd_never_goes_below_the_sites_count_and_ends_odd(tmp_path, today, site, counts):
    cluster = Cluster(tmp_path, today, ["wk-a"])
    ws, plan = _plan_of(cluster, site_data(site, ["wk-a"]))
    sequence = sequence_of(ws.site, ws.layer(LAYER), plan)
    assert sequence is not None
    assert [(step.members_before, step.members_after) for step in sequence.steps] == counts
    assert all(after >= len(site) for _, after in counts) and counts[-1][1] == len(site) and len(site) % 2 == 1
    assert all(abs(before - after) <= 1 for before, after in counts if after < before)  # one leaves per apply
    assert [step.targets for step in sequence.steps][-1] == ()  # the last step plans the whole layer
