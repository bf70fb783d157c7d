"""The plan guard: each check refuses its case and lets the allowed ones through, on fixture plans in the shape
`terraform show -json` prints — hand-made for the Talos side (tests/fixtures/plans/hand_made.py), captured from real
plans against the fake Proxmox VE for the Proxmox side (real-*.json) — and anything that is not a plan is an input
error (exit 2), never an "ok"."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from terravixens import catalogue
from terravixens.guard import ALL_CHECKS, GuardContext, NotAPlan, RebootChecks, Usage, check_plan, refusals
from terravixens.guard.context import site_roles, site_usage
from terravixens.guard.plan import read_plan
from terravixens.rules import reset_scoped_to_node, storage_prevent_destroy
from tests import support
from tests.fixtures.plans import hand_made

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "tests" / "fixtures" / "plans"
THREE = {"cp-a": "controlplane", "cp-b": "controlplane", "cp-c": "controlplane", "wk-a": "worker", "wk-b": "worker"}
FIVE = {**{f"cp-{x}": "controlplane" for x in "abcde"}, "wk-a": "worker"}


def fixture(name: str) -> dict:
    return json.loads((PLANS / name).read_text())


def log(name: str) -> RebootChecks:
    return RebootChecks.from_log(json.loads(line) for line in (PLANS / name).read_text().splitlines())


def codes(violations) -> list[str]:
    return sorted(v.code for v in violations)


# ---------------------------------------------------------------------------------------------------- catalogue
def test_each_check_is_named_and_explained_once():
    assert [check.code for check in ALL_CHECKS] == [f"PG00{n}" for n in range(1, 10)]
    assert len({check.name for check in ALL_CHECKS}) == len(ALL_CHECKS)
    for check in ALL_CHECKS:
        assert re.fullmatch(r"[A-Z][A-Za-z]+", check.name) and len(check.why) > 60, check.code
        assert type(check).__module__.startswith("terravixens.guard.checks."), check.code
    assert len({type(check).__module__ for check in ALL_CHECKS}) == len(ALL_CHECKS)  # one module per check


def test_rules_and_guard_read_one_catalogue():
    assert reset_scoped_to_node.RESET_CAPABLE is catalogue.RESET_CAPABLE
    assert storage_prevent_destroy.PROTECTED_TYPES is catalogue.PROTECTED
    assert catalogue.NODE_MACHINES <= catalogue.RESET_CAPABLE
    source = (ROOT / "terravixens" / "guard").rglob("*.py")
    assert not any(re.search(r'"proxmox_[a-z_]+"', path.read_text()) for path in source)  # no copied type names


def test_hand_made_fixtures_are_what_their_generator_builds():
    for name, text in hand_made.current().items():
        assert (PLANS / name).read_text() == text, f"{name}: run python -m tests.fixtures.plans.hand_made"


# ---------------------------------------------------------------------------------------------------- hand-made
REFUSED = {
    "hand-pg002-two-control-planes-leave.json": (["PG002"], FIVE),
    "hand-pg002-role-unknown-counts-as-control-plane.json": (["PG002"], FIVE),
    "hand-pg003-every-control-plane-leaves.json": (["PG003"], {"cp-b": "controlplane", "wk-a": "worker"}),
    "hand-pg004-secrets-destroyed.json": (["PG004"], THREE),
    "hand-pg004-secrets-replaced.json": (["PG004"], THREE),
    "hand-pg004-second-bootstrap.json": (["PG004"], THREE),
    "hand-pg005-new-secrets-under-running-nodes.json": (["PG005"], THREE),
    "hand-pg005-secrets-forgotten.json": (["PG005"], THREE),
    "hand-pg006-bootstrap-in-running-cluster.json": (["PG006"], THREE),
    "hand-pg006-bootstrap-forgotten.json": (["PG006"], THREE),
    "hand-pg007-planned-reboot.json": (["PG007"], THREE),
    "hand-pg007-auto-after-a-change.json": (["PG007"], THREE),
    "hand-pg007-reboot-check-not-run.json": (["PG007"], THREE),
    "hand-pg009-storage-destroyed.json": (["PG009"], {}),
}
ALLOWED = {
    "hand-ok-first-cluster.json": {"cp-a": "controlplane"},
    "hand-ok-one-control-plane-leaves.json": {n: r for n, r in FIVE.items() if n != "cp-e"},
    "hand-ok-workers-leave-together.json": {n: r for n, r in THREE.items() if not n.startswith("wk")},
    "hand-ok-staged-change.json": THREE,
    "hand-ok-on-destroy-only.json": THREE,
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_hand_made_plan(name):
    expected, roles = REFUSED[name]
    assert codes(check_plan(fixture(name), GuardContext(roles=roles))) == expected


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed_hand_made_plan(name):
    assert check_plan(fixture(name), GuardContext(roles=ALLOWED[name])) == []


def test_every_check_has_a_refused_fixture():
    refused = {code for expected, _ in REFUSED.values() for code in expected} | {"PG001", "PG008"}  # real-*.json
    assert refused == {check.code for check in ALL_CHECKS}


def test_pg002_message_says_how_to_split_the_apply():
    [violation] = check_plan(fixture("hand-pg002-two-control-planes-leave.json"), GuardContext(roles=FIVE))
    assert str(violation) == (
        "[PG002 OneControlPlaneLeavesPerApply] 2 control planes would leave etcd in one apply "
        "(talos_machine_configuration_apply.node_cp-d_apply, talos_machine_configuration_apply.node_cp-e_apply): "
        "apply one first with `terraform apply -target=talos_machine_configuration_apply.node_cp-d_apply`, then "
        "plan again.")


def test_pg002_roles_come_from_the_membership_record_not_from_configuration_text():
    """wk-z left the site and no record names it: it counts as a control plane, and the message says why."""
    [violation] = check_plan(fixture("hand-pg002-role-unknown-counts-as-control-plane.json"), GuardContext(roles=FIVE))
    assert "(role of wk-z unknown: neither the site nor the membership record names it" in violation.message
    # A recorded role wins over the site: promoted in the site file, still a worker in today's cluster.
    plan = fixture("hand-ok-workers-leave-together.json")
    assert check_plan(plan, GuardContext(roles={"wk-a": "controlplane", "wk-b": "controlplane"})) == []


def test_pg004_secrets_message():
    [violation] = check_plan(fixture("hand-pg004-secrets-destroyed.json"), GuardContext(roles=THREE))
    assert str(violation) == ("[PG004 ClusterIdentityKept] talos_machine_secrets.cluster_secrets would be destroyed: "
                              "the cluster's certificates and keys would be lost. Restore the cluster in the site file.")


def test_pg005_and_pg006_messages_point_at_the_backup():
    [secrets] = check_plan(fixture("hand-pg005-new-secrets-under-running-nodes.json"), GuardContext(roles=THREE))
    assert "would be created while 5 node applies run on today's secrets" in secrets.message
    assert "terravixens restore" in secrets.message
    [bootstrap] = check_plan(fixture("hand-pg006-bootstrap-in-running-cluster.json"), GuardContext(roles=THREE))
    assert bootstrap.message.startswith("talos_machine_bootstrap.cluster_bootstrap would bootstrap a cluster whose "
                                        "nodes already run (5 applies in state)")


def test_pg007_auto_needs_the_plan_log_to_tell_no_reboot_from_unreachable():
    plan = fixture("hand-pg007-auto-after-a-change.json")
    [no_log] = check_plan(plan, GuardContext(roles=THREE))
    assert "the plan's log was not given" in no_log.message
    [unreachable] = check_plan(plan, GuardContext(roles=THREE, reboot_checks=log("hand-pg007-node-unreachable.log.jsonl")))
    assert "could not be asked whether the change needs a reboot" in unreachable.message
    assert unreachable.message.endswith("or allow it with --allow-reboot cp-b.")
    assert check_plan(plan, GuardContext(roles=THREE, reboot_checks=log("hand-pg007-node-answered.log.jsonl"))) == []
    assert check_plan(plan, GuardContext(roles=THREE, allow_reboot=frozenset({"cp-b"}))) == []


def test_pg007_planned_reboot_is_refused_even_with_a_clean_log():
    result = check_plan(fixture("hand-pg007-planned-reboot.json"),
                        GuardContext(roles=THREE, reboot_checks=log("hand-pg007-node-answered.log.jsonl")))
    assert [str(v) for v in result] == [
        "[PG007 NoSilentReboot] talos_machine_configuration_apply.node_wk-a_apply is planned to reboot node 'wk-a' "
        "(resolved_apply_mode 'reboot'): re-plan when the node answers, or allow it with --allow-reboot wk-a."]


def test_decommission_waives_exactly_what_it_names():
    last = fixture("hand-ok-decommission-last-control-plane.json")
    assert codes(refusals(check_plan(last, GuardContext(roles={"cp-a": "controlplane"})))) == ["PG003"]
    waived = check_plan(last, GuardContext(roles={"cp-a": "controlplane"}, waived=frozenset({"PG003"})))
    assert [v.waived for v in waived] == [True] and refusals(waived) == []
    secrets = fixture("hand-ok-decommission-secrets-last.json")
    assert codes(check_plan(secrets)) == ["PG004"]
    assert refusals(check_plan(secrets, GuardContext(waived=frozenset({"PG004"})))) == []
    # A waiver of PG004 does not waive PG005: secrets cannot go while nodes run on them.
    forgotten = check_plan(fixture("hand-pg005-secrets-forgotten.json"), GuardContext(waived=frozenset({"PG004"})))
    assert codes(refusals(forgotten)) == ["PG005"]


# ---------------------------------------------------------------------------------------------------- PG008
def l0_plan(kind: str, before: dict, actions=("delete",)) -> dict:
    return {"format_version": "1.2", "planned_values": {}, "resource_changes": [
        {"address": f"{kind}.hv_pve1_x", "type": kind, "name": "hv_pve1_x", "mode": "managed",
         "change": {"actions": list(actions), "before": before, "after": None}}]}


def test_pg008_bridge_used_by_a_deployed_vm():
    usage = Usage()
    usage.add_bridge("pve1", "vmbr1", "VM cp-a in platform-prod (deployed)")
    [violation] = check_plan(l0_plan("proxmox_network_linux_bridge", {"node_name": "pve1", "name": "vmbr1"}),
                             GuardContext(usage=usage))
    assert violation.message.startswith("proxmox_network_linux_bridge.hv_pve1_x would delete bridge 'vmbr1' on "
                                        "'pve1', used by VM cp-a in platform-prod (deployed)")
    assert check_plan(l0_plan("proxmox_network_linux_bridge", {"node_name": "pve2", "name": "vmbr1"}),
                      GuardContext(usage=usage)) == []


def test_pg008_image_a_site_node_boots_from(example_site):
    usage = site_usage(example_site)
    wanted = {"node_name": "pve1", "datastore_id": "local", "file_name": "talos-ce4c980550dd-v1.11.5-nocloud-amd64.qcow2"}
    [violation] = check_plan(l0_plan("proxmox_download_file", wanted), GuardContext(usage=usage))
    assert "which node cp-a of cluster prod (site file)" in violation.message
    old = dict(wanted, file_name="talos-ce4c980550dd-v1.11.4-nocloud-amd64.qcow2")  # an upgrade drops the old image
    assert check_plan(l0_plan("proxmox_download_file", old), GuardContext(usage=usage)) == []
    replaced = l0_plan("proxmox_download_file", wanted, ("delete", "create"))  # re-downloaded in place
    assert check_plan(replaced, GuardContext(usage=usage)) == []


def test_pg008_without_usage_knowledge_is_skipped_not_guessed():
    assert check_plan(l0_plan("proxmox_virtual_environment_user", {"user_id": "terravixens@pve"})) == []


# ---------------------------------------------------------------------------------------------------- not plans
NOT_PLANS = {
    "empty object": ({}, "has no format_version: this is not Terraform's JSON output (empty)"),
    "state JSON": ({"format_version": "1.0", "terraform_version": "1.11.4", "values": {"root_module": {}}},
                   "is a state (`terraform show -json` without a plan file prints the state), not a plan"),
    "empty state": ({"format_version": "1.0"}, "is a state"),
    "a list": ([], "is a list of 0 items, not a JSON object"),
    "errored plan": ({"format_version": "1.2", "planned_values": {}, "errored": True}, "Terraform stopped while planning"),
    "bad actions": ({"format_version": "1.2", "planned_values": {}, "resource_changes": [
        {"address": "a.b", "type": "a", "name": "b", "change": {"actions": ["explode"]}}]},
        "resource_changes[0].change.actions: holds 'explode'"),
    "change without address": ({"format_version": "1.2", "planned_values": {}, "resource_changes": [{"type": "a"}]},
                               "resource_changes[0]: has no address, name"),
}


@pytest.mark.parametrize("case", sorted(NOT_PLANS))
def test_not_a_plan_is_an_input_error(case):
    data, message = NOT_PLANS[case]
    with pytest.raises(NotAPlan) as caught:
        read_plan(data, "plan.json")
    assert message in str(caught.value)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "terravixens.cli", "plan-guard", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_exit_codes_refused_ok_and_input_errors(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps(NOT_PLANS["state JSON"][0]))
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"format_version": "1.2", "planned_values": {}, "resource_changes": [}')
    refused = cli(str(PLANS / "hand-pg002-two-control-planes-leave.json"))
    accepted = cli(str(PLANS / "hand-ok-staged-change.json"))
    not_a_plan, malformed, missing = cli(str(state)), cli(str(garbage)), cli(str(tmp_path / "missing.json"))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.splitlines()[-1].endswith("hand-pg002-two-control-planes-leave.json: refused, 1 problem")
    assert "why PG002 OneControlPlaneLeavesPerApply: each leaving control plane is reset gracefully" in refused.stderr
    assert accepted.returncode == 0 and "hand-ok-staged-change.json: ok" in accepted.stdout, accepted.stderr
    for result in (not_a_plan, malformed, missing):
        assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is a state (`terraform show -json` without a plan file" in not_a_plan.stderr
    assert "is not valid JSON" in malformed.stderr
    assert "cannot be read (No such file or directory)" in missing.stderr


def test_cli_roles_from_the_site_file_and_allow_reboot(tmp_path):
    plan = str(PLANS / "hand-pg007-auto-after-a-change.json")
    assert cli(plan).returncode == 1
    assert cli(plan, "--allow-reboot", "cp-b").returncode == 0
    assert cli(plan, "--plan-log", str(PLANS / "hand-pg007-node-answered.log.jsonl")).returncode == 0
    assert cli(plan, "--plan-log", str(PLANS / "hand-pg007-node-unreachable.log.jsonl")).returncode == 1


def test_site_roles(example_site):
    assert site_roles(example_site, "platform-prod") == THREE
    assert site_roles(example_site, "hypervisors") == {}
    assert site_roles(example_site) == THREE


def test_site_roles_refuses_a_name_with_two_roles():
    data = support.example_data()
    data["clusters"]["lab"] = json.loads(json.dumps(data["clusters"]["prod"]))
    lab = data["clusters"]["lab"]
    lab["endpoint_vip"] = "10.21.1.10"
    lab["control_planes"] = {"wk-a": lab["workers"].pop("wk-a")}
    lab["control_planes"]["wk-a"].update(vm_id=2101, hostname="lab-wk-a", networks={"vlans": {111: {"address": "10.21.1.21/24"}}})
    lab["workers"] = {}
    lab.pop("cilium"), lab.pop("flux")
    from terravixens.guard.context import AmbiguousRoles

    with pytest.raises(AmbiguousRoles, match="node 'wk-a' is a controlplane in one cluster and a worker in another"):
        site_roles(support.site_from(data))
    assert site_roles(support.site_from(data), "platform-lab") == {"wk-a": "controlplane"}


# ---------------------------------------------------------------------------------------------------- real plans
def deployed(name: str = "real-platform-state.json") -> Usage:
    from terravixens.guard import deployed_usage

    return deployed_usage({"platform-prod": fixture(name)})


def test_real_first_deploys_pass(example_site):
    assert check_plan(fixture("real-hypervisors-create.json"), GuardContext(usage=site_usage(example_site))) == []
    assert check_plan(fixture("real-platform-create.json"), GuardContext(roles=THREE)) == []


def test_real_replacement_is_refused():
    [violation] = check_plan(fixture("real-platform-vm-replaced.json"), GuardContext(roles=THREE))
    assert str(violation).startswith("[PG001 StayingNodeKept] proxmox_virtual_environment_vm.node_wk-b_vm would be "
                                     "replaced: node 'wk-b' stays in the site but would be destroyed and re-created.")


def test_real_bridge_removal_under_deployed_vms_is_refused():
    [violation] = check_plan(fixture("real-hypervisors-bridge-in-use.json"), GuardContext(usage=deployed()))
    assert violation.message == (
        "proxmox_network_linux_bridge.hv_pve2_bridge_vmbr1 would delete bridge 'vmbr1' on 'pve2', used by VM cp-b in "
        "platform-prod (deployed), VM wk-b in platform-prod (deployed): move those VMs off it and deploy their "
        "platform layer first, then remove the bridge.")


def test_real_l0_teardown_waits_for_the_platform_layers():
    plan = fixture("real-hypervisors-destroy-while-vms-run.json")
    refused = check_plan(plan, GuardContext(usage=deployed()))
    assert codes(refused) == ["PG008"] * 5
    assert sorted(v.message.split(" ", 1)[0] for v in refused) == [
        "proxmox_network_linux_bridge.hv_pve1_bridge_vmbr1", "proxmox_network_linux_bridge.hv_pve2_bridge_vmbr1",
        "proxmox_user_token.hv_pve1_token", "proxmox_virtual_environment_role.hv_pve1_role",
        "proxmox_virtual_environment_user.hv_pve1_user"]
    assert check_plan(plan, GuardContext(usage=Usage())) == []  # once the platform layers are gone


def test_real_state_json_is_not_a_plan():
    with pytest.raises(NotAPlan, match="is a state"):
        read_plan(fixture("real-state-not-a-plan.json"))


def test_cli_teardown_judged_on_deployed_states():
    plan = str(PLANS / "real-hypervisors-destroy-while-vms-run.json")
    refused = cli(plan, "--teardown", "--deployed-state", str(PLANS / "real-platform-state.json"))
    assert refused.returncode == 1 and refused.stderr.count("[PG008 HypervisorKeepsWhatNodesUse]") == 5
    assert cli(plan, "--teardown").returncode == 0
    # Not a teardown: the example site's nodes still want their bridges and images.
    assert cli(plan).returncode == 1


SECRET_SHAPES = [re.compile(p) for p in (
    r"-----BEGIN", r"AGE-SECRET-KEY", r"LS0tLS1CRUdJTi", r"[\w.-]+@[\w.-]+![\w.-]+[=:][0-9a-f]{8}-",
    r"\"/(tmp|root|home|work|var)/", r"127\.\d+\.\d+\.\d+:(?!8006\b)\d{2,5}")]


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.json")) + sorted(PLANS.glob("*.jsonl")), ids=lambda p: p.name)
def test_fixtures_hold_no_secret_and_no_local_path(path):
    text = path.read_text()
    for shape in SECRET_SHAPES:
        assert not shape.search(text), f"{path.name}: {shape.pattern}"
