"""`terravixens maintain HYPERVISOR` and `--done` (ADR 0055) on a three-host site made of fakes: the fake Proxmox VE on
loopback runs the VMs and containers, the faithful talosctl and kubectl fakes answer as the machines they stand for,
and tests/maintenance_fakes.Machines keeps them in step (a Talos shutdown powers the VM off; a stopped VM answers
nothing and its Node turns Ready Unknown; a started VM boots) and reads etcd's members through a running control plane
after every change: `readings` is the quorum record the tests judge.

The etcd answers are the fake talosctl's (its members, and no leader without a majority reachable): the real
kube-apiserver and etcd test bed (another branch, not on main when this was written) is not used here. What a real
cluster adds is listed in tests/maintenance_fakes.py.
"""

from __future__ import annotations

import json
import time

import pytest

from terravixens.exitcodes import ExitCode
from terravixens.operations.maintain import ANNOTATION, dry_run
from terravixens.operations.outcome import OperationError
from tests.maintenance_fakes import World


@pytest.fixture
def world(tmp_path):
    made = World(tmp_path)
    yield made
    made.stop()


def settle(world: World) -> None:
    """Lets the machines' thread catch up with the last change (a boot takes `boot` seconds)."""
    time.sleep(0.6)
    world.machines.sync()


VMS = {"cp-a": 1101, "cp-b": 1102, "cp-c": 1103, "wk-a": 1201, "wk-b": 1202, "tools": 3002, "nest1": 3001}
ON = {"pve1": ["wk-a", "cp-a", "tools", "nest1"], "pve2": ["wk-b", "cp-b"], "pve3": ["cp-c"]}


# ------------------------------------------------------------------------------------------------ the done-when
def test_every_host_in_turn_goes_down_and_comes_back_with_etcd_quorum_at_every_step(world):
    """pve1, pve2 and pve3 in turn: maintain, then --done. Everything of the host is drained and down, then back,
    Ready, uncordoned and checked; etcd's members, read after every change of which control planes run, always
    had a leader."""
    for hypervisor in ("pve1", "pve2", "pve3"):
        code, out, _ = world.run(hypervisor)
        assert code == ExitCode.OK, out
        settle(world)
        for name in ON[hypervisor]:
            assert world.status(VMS[name]) == "stopped", (hypervisor, name, out)
        for name in set(VMS) - set(ON[hypervisor]):
            assert world.status(VMS[name]) == "running", (hypervisor, name)
        for name in (n for n in ON[hypervisor] if n.startswith(("cp-", "wk-"))):
            node = world.node(name)
            assert node["spec"].get("unschedulable") is True
            assert node["metadata"]["annotations"][ANNOTATION] == hypervisor
        assert f"patch it and reboot it, then run `bin/terravixens maintain {hypervisor} --done`" in out

        code, out, _ = world.run(hypervisor, done=True)
        assert code == ExitCode.OK, out
        settle(world)
        assert all(status == "running" for status in world.machines.statuses().values())
        for name in (n for n in ON[hypervisor] if n.startswith(("cp-", "wk-"))):
            node = world.node(name)
            assert "unschedulable" not in node["spec"] and ANNOTATION not in node["metadata"]["annotations"]
        assert "check prod: every check passed" in out

    readings = world.machines.readings
    running = [reading.running for reading in readings]
    # each control plane went down alone and came back before the next one went
    assert running == [
        ("cp-a", "cp-b", "cp-c"),
        ("cp-b", "cp-c"),
        ("cp-a", "cp-b", "cp-c"),
        ("cp-a", "cp-c"),
        ("cp-a", "cp-b", "cp-c"),
        ("cp-a", "cp-b"),
        ("cp-a", "cp-b", "cp-c"),
    ]
    assert all(reading.leader for reading in readings), readings
    assert all(reading.members == ("cp-a", "cp-b", "cp-c") for reading in readings)
    # workers went down before the host's control plane, after their drain; one snapshot per control plane
    shutdowns = world.talos_calls("shutdown")
    assert shutdowns == [world.cluster.address(n) for n in ("wk-a", "cp-a", "wk-b", "cp-b", "cp-c")]
    drains = [call[3] for call in world.kube_calls("drain")]
    assert drains == ["wk-a", "cp-a", "wk-b", "cp-b", "cp-c"]
    snapshots = sorted((world.tmp / "etcd-snapshots" / "homelab" / "prod").glob("*.snapshot"))
    assert [p.name.split("_")[2] for p in snapshots] == ["cp-b", "cp-a", "cp-a"]  # through one that stays
    assert all("maintenance-of-pve" in p.name for p in snapshots)


def test_the_drain_evicts_the_pods_and_leaves_the_daemonset(world):
    code, out, _ = world.run("pve1")
    assert code == ExitCode.OK, out
    pods = json.loads(world.cluster.kube_scenario.read_text())["objects"]["pods"]
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods} == {
        "cilium-wk-a": "wk-a",
        "web-1": None,
        "web-2": None,
    }
    drain = world.kube_calls("drain")[0]
    assert drain[3:] == ["wk-a", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10s"]


def test_the_dry_run_prints_the_steps_the_run_takes_and_reads_nothing(world):
    before = world.server.call(lambda pve: len(pve.requests), world.server.pve)
    planned = dry_run(world.site, world.options("pve1"))
    assert world.server.call(lambda pve: len(pve.requests), world.server.pve) == before
    assert world.cluster.talos_calls() == [] or all("members" in c for c in world.cluster.talos_calls())
    code, out, console = world.run("pve1")
    assert code == ExitCode.OK
    announced = out.splitlines()[1 : 1 + len(planned.steps)]
    assert announced == [f"  {step.line()}" for step in planned.steps]
    assert [unit.split(" (")[0] for unit in console.journal.done] == ["placement", *(s.unit for s in planned.steps)]
    assert [s.unit for s in planned.steps] == ["prod/wk-a", "prod/cp-a", "guest tools", "guest nest1", "the host"]
    back = dry_run(world.site, world.options("pve1", done=True))
    assert [s.unit for s in back.steps] == ["guest nest1", "guest tools", "prod/cp-a", "prod/wk-a", "check prod"]


# ------------------------------------------------------------------------------------------------ refusals
def test_refused_before_anything_when_the_host_holds_a_majority(tmp_path):
    def majority_on_pve1(data: dict) -> None:
        data["clusters"]["prod"]["control_planes"]["cp-c"]["hypervisor"] = "pve1"
        data["clusters"]["prod"]["placement"] = {
            "allow_control_plane_majority_on": "pve1",
            "reason": "the third host is on order",
        }

    world = World(tmp_path, majority_on_pve1)
    try:
        code, _, _ = world.run("pve1")
        assert isinstance(code, OperationError) and code.code == ExitCode.REFUSED
        assert str(code) == (
            "prod: emptying pve1 shuts down cp-a, cp-c: 1 of 3 etcd members would be left where 2 keep quorum (and "
            "the cluster's API). First move cp-c to pve3 (clusters.prod.control_planes.<name>.hypervisor, then "
            "`bin/terravixens deploy platform-prod`: the VM migrates), then run maintain again; nothing was changed"
        )
        assert world.talos_calls("shutdown") == [] and world.kube_calls("cordon") == []
        assert all(status == "running" for status in world.machines.statuses().values())
        assert dry_run(world.site, world.options("pve1")).refusals  # the dry run says so too
    finally:
        world.stop()


def test_refused_at_the_start_when_a_member_elsewhere_is_already_down(world):
    """cp-b's host lost power: emptying pve1 (cp-a) would leave cp-c alone; nothing of pve1 goes down, not even
    its worker."""
    world.server.call(lambda pve: setattr(pve.vm(1102), "status", "stopped"), world.server.pve)
    settle(world)
    code, out, _ = world.run("pve1")
    assert isinstance(code, OperationError) and code.code == ExitCode.REFUSED, out
    assert "shuts down cp-a and cp-b already down elsewhere: 1 of 3 etcd members would be left" in str(code)
    assert "First bring cp-b back, or move cp-a to pve2 (" in str(code)  # cp-b's VM is down, not pve2
    assert str(code).endswith("; nothing was shut down")
    assert world.talos_calls("shutdown") == [] and world.kube_calls("drain") == []
    assert world.status(VMS["wk-a"]) == world.status(VMS["cp-a"]) == "running"


def test_the_shutdowns_need_the_typed_confirmation(world):
    code, _, _ = world.run("pve1", confirm=None)
    assert isinstance(code, OperationError) and code.code == ExitCode.DECLINED
    code, _, _ = world.run("pve1", confirm=None, answers=["homelab/pve2"])
    assert isinstance(code, OperationError) and code.code == ExitCode.DECLINED
    assert world.talos_calls("shutdown") == [] and world.kube_calls("cordon") == []


def test_a_guest_where_the_site_does_not_say_is_refused(world):
    world.server.call(lambda pve: setattr(pve.vm(1201), "node", "pve2"), world.server.pve)
    code, _, _ = world.run("pve1")
    assert isinstance(code, OperationError) and code.code == ExitCode.REFUSED
    assert "prod/wk-a (vm 1201) runs on pve2, not pve1" in str(code)
    assert world.kube_calls("cordon") == []


def test_an_unknown_hypervisor(world):
    code, _, _ = world.run("pve9")
    assert isinstance(code, OperationError) and code.code == ExitCode.BAD_INPUT
    assert str(code) == "unknown hypervisor 'pve9': use one of pve1, pve2, pve3"


# ------------------------------------------------------------------------------------------------ stops, resume
def test_a_drain_that_fails_stops_in_one_line_and_a_rerun_resumes(world):
    world.cluster.kube(lambda state: state.update(blocked_evictions=["web-1"]))
    code, out, console = world.run("pve1")
    assert isinstance(code, OperationError) and code.code == ExitCode.FAILED
    assert "prod/wk-a: the Node stays cordoned, nothing was shut down: kubectl drain wk-a failed" in str(code)
    assert console.journal.line(interrupted=False) == (
        "stopped at prod/wk-a (drain): done: placement; not done: prod/wk-a, prod/cp-a, guest tools, guest nest1, "
        "the host"
    )
    assert world.talos_calls("shutdown") == []
    world.cluster.kube(lambda state: state.update(blocked_evictions=[]))
    code, out, console = world.run("pve1")
    assert code == ExitCode.OK, out
    assert world.talos_calls("shutdown") == [world.cluster.address("wk-a"), world.cluster.address("cp-a")]
    # a third run finds everything down: nothing is shut down again, nothing asked to confirm
    code, out, console = world.run("pve1", confirm=None)
    assert code == ExitCode.OK, out
    assert [d for d in console.journal.done if "already down" in d] == [
        "prod/wk-a (already down)",
        "prod/cp-a (already down)",
        "guest tools (already down)",
        "guest nest1 (already down)",
    ]
    assert len(world.talos_calls("shutdown")) == 2


def test_a_node_someone_else_cordoned_stays_cordoned(world):
    def cordoned(state: dict) -> None:
        node = next(n for n in state["objects"]["nodes"] if n["metadata"]["name"] == "wk-a")
        node["spec"]["unschedulable"] = True

    world.cluster.kube(cordoned)
    assert world.run("pve1")[0] == ExitCode.OK
    settle(world)
    code, out, _ = world.run("pve1", done=True)
    assert code == ExitCode.OK, out
    assert "left cordoned: maintain did not cordon it" in out
    assert world.node("wk-a")["spec"]["unschedulable"] is True
    assert "unschedulable" not in world.node("cp-a")["spec"]


# ------------------------------------------------------------------------------------------------ guests' postures
def test_guests_stop_as_their_posture_says(world):
    """tools (posture dev: shutdown_then_stop) ignores ACPI and is stopped hard; nest1 (posture prod: shutdown)
    ignoring it stops the run: nothing is forced on it."""
    world.server.call(lambda pve: [setattr(pve.vm(v), "acpi", False) for v in (3001, 3002)], world.server.pve)
    code, out, console = world.run("pve1", timeout=2)
    assert isinstance(code, OperationError) and code.code == ExitCode.FAILED
    assert str(code).startswith("guest nest1 did not shut down (task ")
    assert "its posture allows no hard stop: shut it down yourself, then run maintain again" in str(code)
    assert world.status(3002) == "stopped" and world.status(3001) == "running"
    assert "guest tools: shutdown — maintenance_stop shutdown_then_stop" in out
    assert console.journal.line(interrupted=False).startswith("stopped at guest nest1 (shutdown): done: placement, ")
