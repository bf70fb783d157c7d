"""What the guard knows besides the plan (terravixens.guard.context), field by field: who uses each L0 resource
according to the site file and according to the deployed states, read from both shapes Terraform writes (a raw
state, `terraform show -json`). Written against the survivors of `make mutation` (issue 27): every branch here
decides whether PG008 (hypervisor_keeps_used) sees a user."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from terravixens.guard import (
    ALL_CHECKS,
    GuardContext,
    NotAPlan,
    check_plan,
    check_plan_file,
    explain,
    load_plan,
    parse_plan_text,
    read_plan,
    refusals,
)
from terravixens.guard.context import (
    REBOOT_CHECK_FAILED,
    RebootChecks,
    Usage,
    apply_node_address,
    deployed_usage,
    pve_vm_id,
    site_usage,
)
from terravixens.guard.nodes import APPLY, Event, Fate, NodesView, NodeView
from terravixens.guard.plan import Change, load_plan_data
from terravixens.inputs import InputError
from tests import support

VM, CT = "proxmox_virtual_environment_vm", "proxmox_virtual_environment_container"


def vm_attributes(name: str, vm_id: object = 1201, node_name: str = "pve1", **extra) -> dict:
    return {
        "name": name,
        "node_name": node_name,
        "vm_id": vm_id,
        "network_device": [{"bridge": "vmbr1"}],
        "disk": [{"datastore_id": "local-lvm"}],
        **extra,
    }


def raw_state(*resources: dict) -> dict:
    """`terraform state pull`: version 4, resources with instances."""
    return {"version": 4, "resources": list(resources)}


def raw(kind: str, name: str, *instances: dict, mode: str | None = "managed") -> dict:
    resource = {"type": kind, "name": name, "instances": list(instances)}
    if mode is not None:
        resource["mode"] = mode
    return resource


def shown(*resources: dict, children: list[dict] | None = None) -> dict:
    """`terraform show -json`: values.root_module, resources with values, child modules."""
    return {"values": {"root_module": {"resources": list(resources), "child_modules": children or []}}}


def shown_resource(kind: str, name: str, values: dict, **extra) -> dict:
    return {"type": kind, "name": name, "mode": "managed", "values": values, **extra}


def test_a_raw_state_gives_each_managed_machine_its_users_and_identity():
    usage = deployed_usage(
        {
            "platform-prod": raw_state(
                raw(VM, "node_wk-a_vm", {"attributes": vm_attributes("wk-a")}),
                raw(
                    CT,
                    "sa_dns1_ct",
                    {
                        "attributes": {
                            "node_name": "pve2",
                            "vm_id": "301",
                            "disk": {"datastore_id": "ct-store"},
                            "network_interface": [{"bridge": "vmbr0"}],
                        }
                    },
                ),
            )
        }
    )
    assert usage.machines == {("pve1", 1201): ("platform-prod", "wk-a"), ("pve2", 301): ("platform-prod", "dns1")}
    assert usage.bridges == {
        ("pve1", "vmbr1"): {"VM wk-a in platform-prod (deployed)"},
        ("pve2", "vmbr0"): {"CT sa_dns1_ct in platform-prod (deployed)"},
    }
    assert usage.storages == {
        "local-lvm": {"VM wk-a in platform-prod (deployed)"},
        "ct-store": {"CT sa_dns1_ct in platform-prod (deployed)"},
    }
    assert usage.api_user == {"VM wk-a in platform-prod (deployed)", "CT sa_dns1_ct in platform-prod (deployed)"}


def test_a_raw_state_skips_data_sources_deposed_instances_and_what_is_not_a_machine():
    state = raw_state(
        raw(VM, "read_only", {"attributes": vm_attributes("data-vm", vm_id=1)}, mode="data"),
        raw(
            VM,
            "node_old_vm",
            {"deposed": "abc123", "attributes": vm_attributes("old", vm_id=2)},
            {"attributes": vm_attributes("new", vm_id=3)},
        ),
        raw(
            "proxmox_virtual_environment_file", "image", {"attributes": {"node_name": "pve1", "datastore_id": "local"}}
        ),
        "not a resource",
        raw(VM, "node_no_mode_vm", {"attributes": vm_attributes("no-mode", vm_id=4)}, mode=None),
        raw(VM, "broken", "not an instance", {"attributes": "not attributes"}),
    )
    usage = deployed_usage({"platform-prod": state})
    assert sorted(usage.machines) == [("pve1", 3), ("pve1", 4)]
    assert usage.machines[("pve1", 3)] == ("platform-prod", "old")  # the node that owns the address, not the VM name
    assert usage.storages == {
        "local-lvm": {"VM new in platform-prod (deployed)", "VM no-mode in platform-prod (deployed)"}
    }


def test_show_json_reads_child_modules_and_skips_deposed_and_data():
    state = shown(
        shown_resource(VM, "node_cp-a_vm", vm_attributes("cp-a", vm_id=1101)),
        shown_resource(VM, "node_cp-b_vm", vm_attributes("cp-b", vm_id=1102), deposed_key="00ab"),
        shown_resource(VM, "lookup", vm_attributes("looked-up", vm_id=9), mode="data"),
        {"type": VM, "name": "node_cp-e_vm", "values": vm_attributes("cp-e", vm_id=1105)},  # no mode: managed
        children=[
            {
                "resources": [shown_resource(CT, "sa_dns1_ct", {"node_name": "pve2", "vm_id": 301})],
                "child_modules": [
                    {"resources": [shown_resource(VM, "node_cp-c_vm", vm_attributes("cp-c", vm_id=1103))]}
                ],
            }
        ],
    )
    usage = deployed_usage({"platform-prod": state})
    assert usage.machines == {
        ("pve1", 1101): ("platform-prod", "cp-a"),
        ("pve1", 1103): ("platform-prod", "cp-c"),
        ("pve1", 1105): ("platform-prod", "cp-e"),
        ("pve2", 301): ("platform-prod", "dns1"),
    }
    assert "CT sa_dns1_ct in platform-prod (deployed)" in usage.api_user
    assert deployed_usage({"x": {"values": None}}) == Usage()
    assert deployed_usage({"x": {}}) == Usage()
    values_less = shown({"type": VM, "name": "node_x_vm", "mode": "managed"})
    assert deployed_usage({"x": values_less}).api_user == {"VM node_x_vm in x (deployed)"}


def test_a_machine_without_a_host_or_an_id_is_a_user_not_an_identity():
    usage = deployed_usage(
        {
            "standalone": raw_state(
                raw(VM, "sa_tools_vm", {"attributes": vm_attributes("tools", vm_id=None)}),
                raw(VM, "sa_jump_vm", {"attributes": {**vm_attributes("jump", vm_id=7), "node_name": None}}),
                raw(VM, "plain", {"attributes": vm_attributes("", vm_id=8)}),
            )
        }
    )
    assert usage.machines == {("pve1", 8): ("standalone", "plain")}
    assert usage.api_user == {
        "VM tools in standalone (deployed)",
        "VM jump in standalone (deployed)",
        "VM plain in standalone (deployed)",
    }
    assert usage.bridges == {
        ("pve1", "vmbr1"): {"VM tools in standalone (deployed)", "VM plain in standalone (deployed)"}
    }


def test_states_add_to_a_given_usage_and_layers_are_read_in_order():
    first = Usage()
    first.add_storage("keep", "someone")
    state = raw_state(raw(VM, "node_wk-a_vm", {"attributes": vm_attributes("wk-a")}))
    usage = deployed_usage({"platform-b": state, "platform-a": copy.deepcopy(state)}, first)
    assert usage is first and usage.storages["keep"] == {"someone"}
    assert usage.machines[("pve1", 1201)] == ("platform-b", "wk-a")  # the last layer by name wins


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"vm_id": 5}, 5),
        ({"vm_id": "6"}, 6),
        ({"vm_id": True, "id": 7}, 7),
        ({"id": "8"}, 8),
        ({"id": "pve/8"}, None),
        ({"vm_id": None}, None),
        ("not values", None),
    ],
)
def test_pve_vm_id(values, expected):
    assert pve_vm_id(values) == expected


def test_the_users_lookups_answer_only_text_keys():
    usage = Usage()
    usage.add_bridge("pve1", "vmbr1", "a")
    usage.add_image("pve1", "local", "talos.qcow2", "b")
    usage.add_storage("local-lvm", "c")
    assert usage.bridge_users("pve1", "vmbr1") == {"a"} and usage.bridge_users("pve2", "vmbr1") == set()
    assert usage.bridge_users("pve1", None) == set() and usage.bridge_users(None, "vmbr1") == set()
    assert (
        usage.image_users("pve1", "local", "talos.qcow2") == {"b"} and usage.image_users("pve1", "local", "x") == set()
    )
    for args in ((None, "local", "talos.qcow2"), ("pve1", None, "talos.qcow2"), ("pve1", "local", None)):
        assert usage.image_users(*args) == set()
    assert usage.storage_users("local-lvm") == {"c"} and usage.storage_users("other") == set()
    assert usage.storage_users(["local-lvm"]) == set()
    usage.storages[("local-lvm",)] = {"tuple"}  # type: ignore[index]
    assert usage.storage_users(("local-lvm",)) == set()


def test_site_usage_names_each_node_and_guest_with_its_bridge_storage_and_image():
    data = support.example_data()
    cluster = data["clusters"]["prod"]
    cluster["workers"]["wk-b"]["bridge"] = "vmbr9"
    data["hypervisors"]["pve2"]["bridges"]["vmbr9"] = {"ports": ["enp3s0"], "vlan_aware": True, "vlans": [111, 120]}
    usage = site_usage(support.site_from(data))
    assert usage.bridges[("pve1", "vmbr1")] == {
        f"node {name} of cluster prod (site file)" for name in ("cp-a", "cp-c", "wk-a")
    }
    assert usage.bridges[("pve2", "vmbr9")] == {"node wk-b of cluster prod (site file)"}
    assert usage.bridges[("pve2", "vmbr1")] == {"node cp-b of cluster prod (site file)"}
    assert usage.storages == {"local-lvm": {f"node {n} of cluster prod (site file)" for n in cluster_names(data)}}
    (image,) = [key for key in usage.images if key[0] == "pve1"]
    assert image[1] == "local" and image[2].startswith("talos-") and image[2].endswith(".qcow2")
    assert usage.images[image] == {f"node {n} of cluster prod (site file)" for n in ("cp-a", "cp-c", "wk-a")}


def test_site_usage_counts_guests_of_a_hypervisor_not_of_a_nested_host():
    data = support.example_data()
    data["standalone"] = support.yaml.safe_load((support.EXAMPLE_SITE.parent / "standalone.yaml").read_text())[
        "standalone"
    ]
    site = support.site_from(data)
    usage = site_usage(site)
    guests = {user for users in usage.bridges.values() for user in users if user.startswith("standalone")}
    on_hypervisors = {name for name, guest in site.standalone.nodes.items() if guest.parent in site.hypervisors}
    nested = {name for name, guest in site.standalone.nodes.items() if guest.parent not in site.hypervisors}
    assert on_hypervisors and nested
    assert guests == {f"standalone {site.standalone.nodes[n].type} {n} (site file)" for n in on_hypervisors}
    for name in on_hypervisors:
        guest = site.standalone.nodes[name]
        key = (site.hypervisors[guest.parent].node_name, guest.bridge)
        assert f"standalone {guest.type} {name} (site file)" in usage.bridges[key]


def cluster_names(data: dict) -> list[str]:
    cluster = data["clusters"]["prod"]
    return [*cluster["control_planes"], *cluster["workers"]]


# ------------------------------------------------------------------------------------ the guard's entry points
# What `terravixens plan-guard` calls (tests/test_guard.py runs it as a subprocess, where no mutant is traced).
PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"


def test_a_plan_file_is_read_bounded_and_judged_as_its_json():
    path = PLANS / "hand-pg002-two-control-planes-leave.json"
    data = json.loads(path.read_text())
    assert load_plan(path) == data == load_plan_data(path)
    assert [str(v) for v in check_plan_file(path)] == [str(v) for v in check_plan(data)]
    assert "PG002" in {v.code for v in refusals(check_plan_file(path))}
    assert check_plan_file(PLANS / "hand-ok-first-cluster.json") == check_plan(
        json.loads((PLANS / "hand-ok-first-cluster.json").read_text())
    )
    size = path.stat().st_size
    with pytest.raises(InputError) as refused:
        load_plan(path, limit=size - 1)
    assert f"is {size:,} bytes, over the {size - 1:,}-byte limit for a plan" in str(refused.value)
    with pytest.raises(InputError, match=f"over the {size - 1:,}-byte limit"):
        check_plan_file(path, limit=size - 1)
    assert load_plan(path, limit=size) == data


def test_plan_text_is_bounded_an_object_and_read_like_a_file(tmp_path):
    text = (PLANS / "hand-pg002-two-control-planes-leave.json").read_text()
    data, plan = parse_plan_text(text, "piped")
    assert data == json.loads(text) and plan == read_plan(data)
    with pytest.raises(NotAPlan) as refused:
        parse_plan_text(text, "piped", limit=len(text) - 1)
    assert str(refused.value) == (
        f"piped: 1 problem in the plan\n  - (file): is {len(text):,} characters, over the {len(text) - 1:,} limit "
        "for a plan"
    )
    assert parse_plan_text(text, "piped", limit=len(text))[0] == data
    with pytest.raises(NotAPlan, match=r"piped: 1 problem in the plan\n  - \(top level\): is .*not a JSON object"):
        parse_plan_text("[1, 2]", "piped")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(NotAPlan, match=r"\(top level\): .*not a JSON object"):
        load_plan_data(tmp_path / "list.json")
    (tmp_path / "no-changes.json").write_text('{"resource_changes": 1}')
    with pytest.raises(NotAPlan):
        load_plan_data(tmp_path / "no-changes.json")  # read_plan refuses what parses as JSON but is not a plan


def test_explain_gives_one_line_per_code_in_catalogue_order():
    lines = explain({"PG002", "PG001", "PG999"})
    assert lines == [f"{c.code} {c.name}: {c.why}" for c in ALL_CHECKS if c.code in ("PG001", "PG002")]
    assert [line[:5] for line in lines] == ["PG001", "PG002"]
    assert explain(set()) == []


def test_the_plan_log_names_the_applies_and_nodes_whose_reboot_check_could_not_run():
    messages = [
        "not a message",
        {"type": "diagnostic"},
        {"diagnostic": "not a diagnostic"},
        {"diagnostic": {"summary": "Something else", "address": "talos_machine_configuration_apply.node_x_apply"}},
        {
            "diagnostic": {
                "summary": REBOOT_CHECK_FAILED,
                "address": "talos_machine_configuration_apply.node_a_apply",
                "detail": "Node 10.0.0.5: unreachable",
            }
        },
        {"diagnostic": {"summary": REBOOT_CHECK_FAILED, "detail": "Node 10.0.0.6: unreachable"}},
        {"diagnostic": {"summary": REBOOT_CHECK_FAILED, "address": ""}},
    ]
    checks = RebootChecks.from_log(messages)
    assert checks.unchecked_addresses == frozenset({"talos_machine_configuration_apply.node_a_apply"})
    assert checks.unchecked_details == ("Node 10.0.0.5: unreachable", "Node 10.0.0.6: unreachable", "")
    assert checks.unchecked("talos_machine_configuration_apply.node_a_apply", None)
    assert checks.unchecked("talos_machine_configuration_apply.node_b_apply", "10.0.0.6")
    assert not checks.unchecked("talos_machine_configuration_apply.node_b_apply", "10.0.0.7")
    assert not checks.unchecked("talos_machine_configuration_apply.node_b_apply", None)
    assert not RebootChecks.from_log([]).unchecked("anything", "10.0.0.5")


@pytest.mark.parametrize(
    ("values", "expected"), [({"node": "10.0.0.5"}, "10.0.0.5"), ({"node": 5}, None), ({}, None), ("text", None)]
)
def test_apply_node_address(values, expected):
    assert apply_node_address(values) == expected


# ------------------------------------------------------------------------------------ what a lost machine says
ADDRESS = "proxmox_virtual_environment_vm.node_wk-a_vm"


def replaced(actions=("delete", "create"), reason=None, paths=(), action="replaced", again=None) -> Event:
    change = Change(ADDRESS, VM, "node_wk-a_vm", tuple(actions), action_reason=reason, replace_paths=tuple(paths))
    return Event("VM", action, ADDRESS, ("pve", "pve1", 1201), change, again)


@pytest.mark.parametrize(
    ("event", "why", "fix"),
    [
        (
            replaced(("create", "forget")),
            "the old one is left running: destroy = false",
            "revert the change that forces the replacement",
        ),
        (
            replaced(reason="replace_because_tainted"),
            "it is tainted",
            f"if the machine is healthy, `terraform untaint {ADDRESS}` and plan again",
        ),
        (replaced(reason="replace_by_request"), "-replace asked for it", f"plan without `-replace={ADDRESS}`"),
        (
            replaced(reason="replace_by_triggers"),
            "its replace_triggered_by changed",
            "revert what its replace_triggered_by refers to",
        ),
        (replaced(paths=[("vm_id",), ("disk", 0, "size")]), "forced by vm_id, disk.0.size", "revert that change"),
        (
            replaced(),
            "",
            (
                "Find the attribute that forces it (compare before and after in the plan's JSON: "
                "`terravixens deploy LAYER --dry-run --save-plan-json FILE`) and revert it"
            ),
        ),
        (replaced(reason="replace_because_cannot_update", paths=[("vm_id",)]), "forced by vm_id", "revert that change"),
        (
            replaced(action="deleted", reason="replace_by_request"),
            "",
            (
                f"keep {ADDRESS} in the configuration (a `moved` block if its address must change), or take the "
                "node out of the site to remove it"
            ),
        ),
        (
            replaced(action="forgotten"),
            "",
            f"drop the `removed` block for {ADDRESS}, or take the node out of the site first",
        ),
    ],
)
def test_each_way_to_lose_a_machine_says_why_and_what_to_do(event, why, fix):
    assert event.why() == why
    assert event.fix() == fix
    assert event.says() == f"VM pve1/1201 {event.action} at {ADDRESS}" + (f" ({why})" if why else "")


def test_a_machine_created_again_elsewhere_says_where_and_how_to_move_it():
    again = Change("proxmox_virtual_environment_vm.other", VM, "other", ("create",))
    event = replaced(action="deleted", again=again)
    assert event.says() == f"VM pve1/1201 deleted at {ADDRESS}, created again at proxmox_virtual_environment_vm.other"
    assert (
        event.fix() == f"add `moved {{ from = {ADDRESS}  to = proxmox_virtual_environment_vm.other }}` so that "
        "Terraform moves it in state"
    )
    retyped = replaced(action="deleted", again=Change("x.other", "x", "other", ("create",)))
    assert retyped.fix() == (
        f"keep the resource type {VM} (a `moved` block cannot change a resource's type unless the provider supports "
        "that move)"
    )


@pytest.mark.parametrize("module", ["hypervisor_keeps_used", "storage_kept_while_used"])
def test_a_refusal_names_four_users_and_counts_the_rest(module):
    import importlib

    users = importlib.import_module(f"terravixens.guard.checks.{module}")._users
    assert users(set()) == ""
    assert users({"b", "a"}) == "a, b"
    assert users({"d", "c", "b", "a"}) == "a, b, c, d"
    assert users({"e", "d", "c", "b", "a"}) == "a, b, c, d and 1 more"
    assert users({f"u{i}" for i in range(7)}) == "u0, u1, u2, u3 and 3 more"


# ------------------------------------------------------------------------------------ PG001's message, part by part
def lost(kind="VM", action="replaced", actions=("delete", "create"), again=None, reason=None) -> Event:
    address = ADDRESS if kind == "VM" else "talos_machine_configuration_apply.node_wk-a_apply"
    kind = "VM" if kind == "VM" else APPLY
    change = Change(address, address.split(".")[0], address.split(".")[1], tuple(actions), action_reason=reason)
    identity = ("pve", "pve1", 1201) if kind == "VM" else ("talos", "10.0.0.61")
    return Event(kind, action, address, identity, change, again)


def test_pg001_says_the_worst_a_node_would_go_through():
    from terravixens.guard.checks.staying_node_kept import _consequence

    apply = APPLY
    assert _consequence([lost(), lost(apply)]) == "wiped"
    assert _consequence([lost()]) == "destroyed and re-created"
    assert _consequence([lost(action="deleted"), lost(apply, action="deleted")]) == "reset (wiped)"
    assert _consequence([lost(action="deleted")]) == "left without a machine"
    assert _consequence([lost(action="forgotten", actions=("forget",))]) == "left running outside Terraform"


def test_pg001_details_each_loss():
    from terravixens.guard.checks.staying_node_kept import _detail, _headline

    elsewhere = Change("module.m.proxmox_virtual_environment_vm.x", VM, "x", ("create",))
    moved = lost(action="deleted", actions=("delete",), again=elsewhere)
    assert _headline(moved) == f"{ADDRESS} would be deleted and {elsewhere.address} would create it again"
    assert _detail(moved) == (
        f"its VM pve1/1201 moves from {ADDRESS} to {elsewhere.address} (its address changed without a `moved` block)"
    )
    forgotten = lost(action="deleted", actions=("forget",), again=Change("other.x", "other", "x", ("create",)))
    assert _headline(forgotten) == f"{ADDRESS} would be forgotten and other.x would create it again"
    assert _detail(forgotten) == (
        f"its VM pve1/1201 moves from {ADDRESS} to other.x (its resource type changed; the old one is forgotten, "
        "left running with the same identity)"
    )
    assert _headline(lost()) == f"{ADDRESS} would be replaced"
    assert _detail(lost(action="deleted")) == "its VM pve1/1201 is deleted and nothing creates it again"
    assert _detail(lost(APPLY, action="deleted")) == (
        "its configuration apply of 10.0.0.61 is deleted and nothing applies it again"
    )
    assert _detail(lost(action="forgotten")) == (
        "its VM pve1/1201 is forgotten (a `removed` block): the next plan would create it again"
    )
    assert _detail(lost()) == "its VM pve1/1201 is replaced"
    assert _detail(lost(reason="replace_by_request")) == "its VM pve1/1201 is replaced (-replace asked for it)"


# ------------------------------------------------------------------------------------ the per-node summary line
def view(*nodes: tuple[str, Fate, bool]) -> NodesView:
    """Nodes by (name, fate, changed in place)."""
    events = {True: (lost(action="updated"),), False: ()}
    return NodesView(
        {
            name: NodeView(name, "cluster", "worker", True, fate is not Fate.LEAVING, fate, events[changed])
            for name, fate, changed in nodes
        }
    )


def test_the_summary_counts_every_fate_and_names_the_nodes():
    assert NodesView({}).summary() == "no node in this plan"
    assert view(("a", Fate.KEPT, False)).summary() == "1 node: 1 kept; none replaced, no machine lost"
    assert view(("a", Fate.KEPT, True), ("b", Fate.KEPT, False)).summary() == (
        "2 nodes: 2 kept (1 changed in place: a); none replaced, no machine lost"
    )
    assert view(
        ("a", Fate.KEPT, False),
        ("n", Fate.NEW, False),
        ("l", Fate.LEAVING, False),
        ("r", Fate.REPLACED, False),
        ("m", Fate.MACHINE_LOST, False),
        ("r2", Fate.REPLACED, False),
    ).summary() == ("6 nodes: 1 kept, 1 new (n), 1 leaving (l); 2 replaced (r, r2), 1 with a machine lost (m)")
    many = view(*((f"w{i}", Fate.NEW, False) for i in range(8)))
    assert (
        many.summary() == "8 nodes: 0 kept, 8 new (w0, w1, w2, w3, w4, w5 and 2 more); none replaced, no machine lost"
    )


# ------------------------------------------------------------------------------------ refusals word by word
def refusal(fixture: str, code: str, mutate=None) -> str:
    data = json.loads((PLANS / fixture).read_text())
    if mutate:
        mutate(data)
    [violation] = [v for v in check_plan(data, GuardContext()) if v.code == code]
    return str(violation)


def destroyed_outright(address: str):
    def run(data: dict) -> None:
        for change in data["resource_changes"]:
            if change["address"] == address:
                change["change"]["actions"] = ["delete"]
                change["change"]["after"] = None

    return run


def test_the_cluster_identity_message_says_replaced_or_destroyed():
    assert refusal("hand-pg004-secrets-replaced.json", "PG004") == (
        "[PG004 ClusterIdentityKept] talos_machine_secrets.cluster_secrets would be replaced: the cluster's "
        "certificates and keys would be lost. Restore the cluster in the site file."
    )
    assert refusal("hand-pg004-secrets-destroyed.json", "PG004").startswith(
        "[PG004 ClusterIdentityKept] talos_machine_secrets.cluster_secrets would be destroyed: the cluster's "
    )


def test_protected_storage_says_destroyed_or_replaced():
    assert refusal("hand-pg009-bucket-destroyed.json", "PG009") == (
        "[PG009 ProtectedStorageKept] aws_s3_bucket.state_bucket would be destroyed, and its data with it: keep it "
        "in the site, or remove it from Terraform's state first (`terraform state rm`) if it must outlive terravixens."
    )

    def replace(data: dict) -> None:
        for change in data["resource_changes"]:
            if change["address"] == "aws_s3_bucket.state_bucket":
                change["change"]["actions"] = ["delete", "create"]
                change["change"]["after"] = change["change"]["before"]

    assert refusal("hand-pg009-bucket-destroyed.json", "PG009", replace).startswith(
        "[PG009 ProtectedStorageKept] aws_s3_bucket.state_bucket would be replaced, and its data with it"
    )


def test_a_bootstrap_record_forgotten_or_destroyed_under_running_nodes():
    assert refusal("hand-pg006-bootstrap-forgotten.json", "PG006").startswith(
        "[PG006 BootstrapOnlyForNewCluster] talos_machine_bootstrap.cluster_bootstrap would be forgotten while 5 "
        "node applies stay: the next plan would bootstrap the running cluster again."
    )
    destroyed = refusal(
        "hand-pg006-bootstrap-forgotten.json", "PG006", destroyed_outright("talos_machine_bootstrap.cluster_bootstrap")
    )
    assert "talos_machine_bootstrap.cluster_bootstrap would be destroyed while 5 node applies stay" in destroyed


def test_secrets_under_running_nodes_name_three_applies_then_an_ellipsis():
    text = refusal("hand-pg005-new-secrets-under-running-nodes.json", "PG005")
    applies = ", ".join(f"talos_machine_configuration_apply.node_{n}_apply" for n in ("cp-a", "cp-b", "cp-c"))
    assert f"while 5 node applies run on today's secrets ({applies}…)" in text


def test_a_waived_violation_says_so():
    from terravixens.guard.checks.base import Violation

    assert str(Violation("PG003", "ControlPlaneRemains", "text")) == "[PG003 ControlPlaneRemains] text"
    assert str(Violation("PG003", "ControlPlaneRemains", "text", waived=True)) == (
        "[PG003 ControlPlaneRemains] (waived) text"
    )


# ------------------------------------------------------------------------------------ a broken plan, field by field
NEVER = "Terraform never writes this: the plan was edited or built by hand; plan again and pass the output"


def with_prior(root: object) -> dict:
    return {"values": {"root_module": root}}


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        (
            "prior_state",
            [],
            (
                "prior_state: is a list of 0 items, not an object: give the output of `terraform show "
                "-json PLANFILE` (a saved plan from `terraform plan -out PLANFILE`)"
            ),
        ),
        ("prior_state", with_prior([1]), "prior_state.values.root_module: is a list of 1 item, not an object"),
        (
            "prior_state",
            with_prior({"resources": [], "child_modules": ["x"]}),
            "prior_state.values.root_module.child_modules[0]: is 'x', not an object",
        ),
        (
            "prior_state",
            with_prior({"resources": [{"type": "a"}]}),
            "prior_state.values.root_module.resources[0]: has no address, type and name",
        ),
        (
            "prior_state",
            with_prior({"resources": [{"address": "a.b", "type": "a", "name": "b", "mode": "weird"}]}),
            (
                f"prior_state.values.root_module.resources[0].mode: is 'weird': a state's resources are 'managed' or "
                f"'data'. {NEVER}"
            ),
        ),
        ("resource_changes", ["x"], "resource_changes[0]: is 'x', not an object"),
    ],
)
def test_a_plan_terraform_would_not_write_names_the_field_and_what_is_wrong(field, value, problem):
    data = json.loads((PLANS / "hand-ok-first-cluster.json").read_text())
    data[field] = value
    with pytest.raises(NotAPlan) as refused:
        read_plan(data, "p.json")
    assert str(refused.value) == f"p.json: 1 problem in the plan\n  - {problem}"
