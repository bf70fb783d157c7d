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
from terravixens.guard.nodes import APPLY, Event, Fate, NodesView, NodeView, node_view
from terravixens.guard.plan import Change, PriorResource, addresses_in, load_plan_data
from terravixens.inputs import InputError
from terravixens.roles import Role
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
    assert usage.bridges[("pve1", "vmbr1")] == {f"node {name} of cluster prod (site file)" for name in ("cp-a", "wk-a")}
    assert usage.bridges[("pve2", "vmbr9")] == {"node wk-b of cluster prod (site file)"}
    assert usage.bridges[("pve2", "vmbr1")] == {"node cp-b of cluster prod (site file)"}
    assert usage.bridges[("pve3", "vmbr1")] == {"node cp-c of cluster prod (site file)"}
    assert usage.storages == {"local-lvm": {f"node {n} of cluster prod (site file)" for n in cluster_names(data)}}
    (image,) = [key for key in usage.images if key[0] == "pve1"]
    assert image[1] == "local" and image[2].startswith("talos-") and image[2].endswith(".qcow2")
    assert usage.images[image] == {f"node {n} of cluster prod (site file)" for n in ("cp-a", "wk-a")}


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


def test_site_usage_passes_over_a_node_on_a_host_the_site_does_not_declare_and_counts_the_rest():
    """A Site model built without the loader (whose reference rule refuses an unknown hypervisor), as a library user
    may: the node on an undeclared host uses nothing of L0, and every node sorted after it is still counted."""
    from terravixens.config.model import Site

    data = support.example_data()
    data["clusters"]["prod"]["control_planes"]["cp-a"]["hypervisor"] = "pve9"  # cp-a sorts first
    usage = site_usage(Site.model_validate(data))
    users = {user for found in usage.bridges.values() for user in found}
    assert users == {f"node {name} of cluster prod (site file)" for name in ("cp-b", "cp-c", "wk-a", "wk-b")}
    assert usage.bridges[("pve1", "vmbr1")] == {"node wk-a of cluster prod (site file)"}


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
    six = view(*((f"w{i}", Fate.NEW, False) for i in range(6)))
    assert six.summary() == "6 nodes: 0 kept, 6 new (w0, w1, w2, w3, w4, w5); none replaced, no machine lost"
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


def resource_change(address: str = "a.b", actions: tuple[str, ...] = ("create",), **fields) -> dict:
    """A change Terraform writes: type and name from the address, `change__x` sets change.x."""
    kind, _, name = address.removeprefix("data.").partition(".")
    body = {"actions": list(actions), "before": None if actions == ("create",) else {}, "after": {}}
    if actions in (("delete",), ("forget",)):
        body["after"] = None
    body.update({key[len("change__") :]: fields.pop(key) for key in list(fields) if key.startswith("change__")})
    mode = "data" if address.startswith("data.") else "managed"
    return {"address": address, "mode": mode, "type": kind, "name": name.split("[")[0], "change": body, **fields}


def plan(*changes: dict, prior: dict | None = None) -> dict:
    data = {"format_version": "1.2", "planned_values": {}, "resource_changes": list(changes)}
    if prior is not None:
        data["prior_state"] = {"values": {"root_module": prior}}
    return data


def prior_resource(address: str, values: object = None, **fields) -> dict:
    kind, _, name = address.removeprefix("data.").partition(".")
    mode = "data" if address.startswith("data.") else "managed"
    return {"address": address, "mode": mode, "type": kind, "name": name, "values": values or {}, **fields}


LONG = "a." + "m" * 125  # past every length a message shows of an address


def cut(text: str, limit: int) -> str:
    """`text` as a message shows it, cut to `limit` characters."""
    return repr(text)[: limit - 1] + "…"


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        pytest.param(
            plan(resource_change(LONG, name="b")),
            [
                (
                    f"resource_changes[0] ({cut(LONG, 80)}): address {cut(LONG, 120)} does not match its type, "
                    f"name, index and module ('a.b'). {NEVER}"
                )
            ],
            id="an address shown to 80 characters where, 120 in the message",
        ),
        pytest.param(
            plan(resource_change("a.b", name="n" * 130)),
            [
                (
                    "resource_changes[0] ('a.b'): address 'a.b' does not match its type, name, index and module "
                    f"('a.{'n' * 116}…). {NEVER}"
                )
            ],
            id="the address expected shown to 120 characters",
        ),
        pytest.param(
            plan("x", resource_change(), resource_change()),
            [
                "resource_changes[0]: is 'x', not an object",
                (
                    f"resource_changes[2]: is a second change for 'a.b' (the first is resource_changes[1]): Terraform "
                    f"writes one change per object. {NEVER}"
                ),
            ],
            id="a second change after a change that is not an object",
        ),
        pytest.param(
            plan(resource_change(LONG, name="m" * 125), resource_change(LONG, name="m" * 125)),
            [
                (
                    f"resource_changes[1]: is a second change for {cut(LONG, 120)} (the first is resource_changes[0]): "
                    f"Terraform writes one change per object. {NEVER}"
                )
            ],
            id="a second change shown to 120 characters",
        ),
        pytest.param(
            plan(resource_change("a.b"), resource_change("data.a.b", ("read",)) | {"address": "a.b"}),
            [
                (
                    "resource_changes[1] ('a.b'): address 'a.b' does not match its type, name, index and module "
                    f"('data.a.b'). {NEVER}"
                )
            ],
            id="a data source at a managed resource's address is not its second change",
        ),
        pytest.param(
            plan(
                "x",
                resource_change("a.c", ("update",), change__before={}),
                resource_change("a.b", ("update",), previous_address="a.c"),
            ),
            [
                "resource_changes[0]: is 'x', not an object",
                (
                    "resource_changes[2]: was moved from 'a.c', which has its own change (resource_changes[1]): a "
                    f"moved object leaves nothing at its old address. {NEVER}"
                ),
            ],
            id="moved after a change that is not an object",
        ),
        pytest.param(
            plan(
                resource_change(LONG, ("update",), name="m" * 125),
                resource_change("a.b", ("update",), previous_address=LONG),
            ),
            [
                (
                    f"resource_changes[1]: was moved from {cut(LONG, 120)}, which has its own change "
                    f"(resource_changes[0]): a moved object leaves nothing at its old address. {NEVER}"
                )
            ],
            id="moved from an address shown to 120 characters",
        ),
        pytest.param(
            plan(prior={"resources": [{"type": "a"}, {"name": "b"}]}),
            [
                "prior_state.values.root_module.resources[0]: has no address, type and name",
                "prior_state.values.root_module.resources[1]: has no address, type and name",
            ],
            id="every prior resource without a name",
        ),
        pytest.param(
            plan(prior={"resources": [prior_resource("a.b", mode="x"), prior_resource("a.c", mode="y")]}),
            [
                (
                    "prior_state.values.root_module.resources[0].mode: is 'x': a state's resources are 'managed' or "
                    f"'data'. {NEVER}"
                ),
                (
                    "prior_state.values.root_module.resources[1].mode: is 'y': a state's resources are 'managed' or "
                    f"'data'. {NEVER}"
                ),
            ],
            id="every prior resource of an unknown mode",
        ),
        pytest.param(
            plan(prior={"resources": [prior_resource("a.b", type="c"), prior_resource("a.c", name="d")]}),
            [
                (
                    "prior_state.values.root_module.resources[0]: address 'a.b' does not match its type, name, index "
                    f"and module ('c.b'). {NEVER}"
                ),
                (
                    "prior_state.values.root_module.resources[1]: address 'a.c' does not match its type, name, index "
                    f"and module ('a.d'). {NEVER}"
                ),
            ],
            id="every prior resource not at its address",
        ),
        pytest.param(
            plan(
                prior={
                    "resources": [],
                    "child_modules": [
                        {"address": "module.m", "resources": [prior_resource("module.m.a.b") | {"mode": "x"}]},
                        "x",
                    ],
                }
            ),
            [
                "prior_state.values.root_module.child_modules[1]: is 'x', not an object",
                (
                    "prior_state.values.root_module.child_modules[0].resources[0].mode: is 'x': a state's resources "
                    f"are 'managed' or 'data'. {NEVER}"
                ),
            ],
            id="every child module read after one that is not an object",
        ),
    ],
)
def test_a_plan_terraform_would_not_write_word_by_word(data, problems):
    with pytest.raises(NotAPlan) as refused:
        read_plan(data, "p.json")
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    assert str(refused.value) == f"p.json: {count} in the plan\n" + "".join(f"  - {p}\n" for p in problems)[:-1]


def test_a_plan_is_read_into_every_field_of_its_changes():
    moved = {
        "address": 'module.m.a.b["ü"]',
        "module_address": "module.m",
        "mode": "managed",
        "type": "a",
        "name": "b",
        "index": "ü",  # written as Terraform writes it, not escaped
        "previous_address": 'module.m.a.old["ü"]',
        "action_reason": "replace_because_cannot_update",
        "change": {
            "actions": ["delete", "create"],
            "before": {"x": 1},
            "after": {"x": 2},
            "after_unknown": {"id": True},
            "replace_paths": [["vm_id"], "name"],
            "importing": {"id": "1"},
        },
    }
    data = plan(
        moved,
        resource_change("a.c", ("delete",), deposed="00abc"),
        resource_change("a.c", ("forget",), deposed="00abd"),  # a deposed object may be forgotten
        resource_change("a.d", ("delete",)),
        resource_change("a.e", ("update",), previous_address="a.e"),  # not moved: its own address
        resource_change("a.f", ("update",), previous_address="a.c"),  # a.c is left only as deposed objects
        resource_change("data.a.g", ("read",)),
    )
    data["format_version"] = "1.2.1"
    assert read_plan(data).changes == (
        Change(
            'module.m.a.b["ü"]',
            "a",
            "b",
            ("delete", "create"),
            {"x": 1},
            {"x": 2},
            {"id": True},
            module_address="module.m",
            index="ü",
            previous_address='module.m.a.old["ü"]',
            action_reason="replace_because_cannot_update",
            replace_paths=(("vm_id",), ("name",)),
            importing=True,
        ),
        Change("a.c", "a", "c", ("delete",), deposed="00abc"),
        Change("a.c", "a", "c", ("forget",), deposed="00abd"),
        Change("a.d", "a", "d", ("delete",)),
        Change("a.e", "a", "e", ("update",), previous_address="a.e"),
        Change("a.f", "a", "f", ("update",), previous_address="a.c"),
    )
    assert read_plan(data).changes[3].module_address == "" and read_plan(data).changes[3].after == {}


def test_a_plan_is_read_into_every_prior_object_of_every_module():
    prior = {
        "resources": [
            prior_resource("data.a.r"),
            prior_resource("a.s", values="not an object", deposed_key=""),
        ],
        "child_modules": [
            {
                "address": "module.m",
                "resources": [prior_resource("module.m.a.t") | {"type": "a", "name": "t"}],
                "child_modules": [
                    {
                        "address": "module.m.module.n",
                        "resources": [
                            prior_resource("module.m.module.n.a.u", {"v": 1}, deposed_key="dk")
                            | {"type": "a", "name": "u"}
                        ],
                    }
                ],
            },
            {"address": "module.k", "resources": [prior_resource("module.k.a.v") | {"type": "a", "name": "v"}]},
        ],
    }
    # A change keeps a.s: a plan that lists none while its planned values drop every prior object is not a plan.
    assert read_plan(plan(resource_change("a.s", ("no-op",)), prior=prior)).prior == (
        PriorResource("a.s", "a", "s", {}),
        PriorResource("module.k.a.v", "a", "v", {}),
        PriorResource("module.m.a.t", "a", "t", {}),
        PriorResource("module.m.module.n.a.u", "a", "u", {"v": 1}, "dk"),
    )


def membership(name: str, record: object, actions: tuple[str, ...] = ("update",)) -> dict:
    return resource_change(f"terraform_data.{name}", actions, change__after={"input": record})


def test_the_membership_record_is_the_one_named_so_before_and_after_the_plan():
    cluster = {"control_planes": {"cp-a": "10.0.0.11"}, "workers": {}}
    other = {"control_planes": {"x": "10.9.9.9"}}
    prior = {
        "resources": [
            prior_resource("terraform_data.other", {"input": other}),
            prior_resource("terraform_data.cluster_membership", {"input": cluster}),
        ]
    }
    read = read_plan(plan(membership("other", other), membership("cluster_membership", cluster), prior=prior))
    assert read.membership() == cluster and read.planned_membership() == cluster
    assert read_plan(plan(membership("cluster_membership", "text"), prior=prior)).planned_membership() is None
    for gone in (("delete",), ("forget",)):
        removed = resource_change("terraform_data.cluster_membership", gone)
        assert read_plan(plan(removed, prior=prior)).planned_membership() is None
    # No change for the record (another one listed: a plan that lists none while dropping all is refused): as it is.
    kept = resource_change("terraform_data.other", ("no-op",))
    assert read_plan(plan(kept, prior=prior)).planned_membership() == cluster


def test_addresses_in_a_membership_record_are_text_to_text_only():
    record = {"control_planes": {"cp-a": "10.0.0.11"}, "workers": {"wk-a": "10.0.0.21", "wk-b": 7}, "other": {"x": "y"}}
    assert addresses_in(record) == {"10.0.0.11": "cp-a", "10.0.0.21": "wk-a"}
    assert addresses_in(None) == {} and addresses_in({"workers": ["wk-a"]}) == {}


def test_plan_text_and_files_name_their_source_and_what_they_are(tmp_path):
    with pytest.raises(NotAPlan) as refused:
        parse_plan_text("[]")
    assert str(refused.value).startswith("<plan>: 1 problem in the plan\n  - (top level): is a list of 0 items")
    for text, problem in (
        ("{", "line 1: is not valid JSON: Expecting property name enclosed in double quotes (column 2)"),
        ("[]", "(top level): is a list of 0 items, not a JSON object"),
        ('{"a": 1}', "(top level): has no format_version: this is not Terraform's JSON output (keys: a)"),
    ):
        with pytest.raises(InputError) as refused:
            parse_plan_text(text, "piped")
        assert str(refused.value).startswith(f"piped: 1 problem in the plan\n  - {problem}")
        (tmp_path / "plan.json").write_text(text)
        with pytest.raises(InputError) as refused:
            load_plan_data(tmp_path / "plan.json")
        assert str(refused.value).startswith(f"{tmp_path / 'plan.json'}: 1 problem in the plan\n  - {problem}")


# ------------------------------------------------------------------------------------ the per-node view, field by field
VM_T, CT_T, APPLY_T = VM, CT, "talos_machine_configuration_apply"


def vm_of(name: object, vm_id: int, node_name: str = "pve1") -> dict:
    return {"name": name, "node_name": node_name, "vm_id": vm_id}


def ct_of(hostname: str, vm_id: int, node_name: str = "pve2", initialization: list | None = None) -> dict:
    return {"node_name": node_name, "vm_id": vm_id, "initialization": initialization or [{"hostname": hostname}]}


def rendered(view: NodesView) -> list[str]:
    """Every field of the view, one line per node, machine and event (what the checks and the messages read)."""
    lines = []
    for name, node in view.nodes.items():
        lines.append(
            f"{name}: {node.group} role={node.role} member={node.member} stays={node.stays} {node.fate.value} "
            f"layer={node.layer}"
        )
        lines += [f"  says {node.described()}"] if node.losses else []
        lines += [f"  today {m.kind} {m.address} {m.type} {m.identity} {m.name!r}" for m in node.today]
        lines += [
            f"  {e.kind} {e.action} {e.address} {e.identity} {list(e.change.actions)} again={e.elsewhere}"
            for e in node.events
        ]
    lines += [f"unowned {e.kind} {e.action} {e.address} {e.identity} {list(e.change.actions)}" for e in view.unowned]
    return [*lines, f"teardown={view.teardown}"]


def at(kind: str, name: str) -> str:
    return f"{kind}.{name}"


EVENTS = [
    "a: cluster role=controlplane member=True stays=True kept layer=None",
    f"  today VM {VM_T}.node_a_vm proxmox_virtual_environment_vm ('pve', 'pve1', 101) 'a'",
    f"  today configuration apply {APPLY_T}.node_a_apply talos_machine_configuration_apply ('talos', '10.0.0.1') None",
    f"  VM updated {VM_T}.node_a_vm ('pve', 'pve1', 101) ['update'] again=None",
    f"  configuration apply updated {APPLY_T}.node_a_apply ('talos', '10.0.0.1') ['update'] again=None",
    f"  VM deposed {VM_T}.node_a_vm ('pve', 'pve1', 101) ['delete'] again=None",
    f"  configuration apply deposed {APPLY_T}.node_a_apply ('talos', '10.0.0.1') ['delete'] again=None",
    "b: cluster role=None member=False stays=False kept layer=None",
    f"  today VM {VM_T}.node_b_vm proxmox_virtual_environment_vm ('pve', 'pve1', 102) 'b'",
    f"  VM deposed {VM_T}.node_b_vm None ['delete'] again=None",
    "c: cluster role=None member=False stays=False kept layer=None",
    f"  today VM module.m.{VM_T}.node_c_vm proxmox_virtual_environment_vm ('pve', 'pve1', 103) 'c'",
    f"  VM moved {VM_T}.node_c_vm ('pve', 'pve1', 103) ['no-op'] again=None",
    "e: cluster role=None member=False stays=False new layer=None",
    f"  VM imported {VM_T}.node_e_vm ('pve', 'pve1', 105) ['create'] again=None",
    "f: cluster role=None member=False stays=False kept layer=None",
    f"  today VM {VM_T}.node_f_vm proxmox_virtual_environment_vm ('pve', 'pve1', 106) 'f'",
    f"  VM imported {VM_T}.node_f_vm ('pve', 'pve1', 106) ['update'] again=None",
    "g: standalone role=None member=False stays=False leaving layer=None",
    f"  says g (container pve2/201 forgotten at {CT_T}.sa_g_ct)",
    f"  today container {CT_T}.sa_g_ct proxmox_virtual_environment_container ('pve', 'pve2', 201) 'g'",
    f"  container forgotten {CT_T}.sa_g_ct ('pve', 'pve2', 201) ['forget'] again=None",
    "h: cluster role=None member=False stays=False new layer=None",
    f"  VM created {VM_T}.node_h_vm ('pve', 'pve1', 108) ['create'] again=None",
    f"  configuration apply created {APPLY_T}.node_h_apply ('talos', '10.0.0.8') ['create'] again=None",
    "i: cluster role=None member=False stays=False replaced layer=None",
    f"  says i (VM pve1/109 replaced at {VM_T}.node_i_vm)",
    f"  today VM {VM_T}.node_i_vm proxmox_virtual_environment_vm ('pve', 'pve1', 109) 'i'",
    f"  VM replaced {VM_T}.node_i_vm ('pve', 'pve1', 109) ['delete', 'create'] again=None",
    "j: cluster role=None member=False stays=False new layer=None",
    f"  configuration apply created {APPLY_T}.node_j_apply None ['create'] again=None",
    "u: cluster role=None member=False stays=False kept layer=None",
    f"  today VM {VM_T}.node_u_vm proxmox_virtual_environment_vm ('pve', 'pve1', 110) None",
    "v: cluster role=None member=False stays=False kept layer=None",
    f"  today VM {VM_T}.node_v_vm proxmox_virtual_environment_vm ('pve', 'pve1', 111) None",
    "w: standalone role=None member=False stays=True kept layer=None",
    f"  today container {CT_T}.sa_w_ct proxmox_virtual_environment_container ('pve', 'pve2', 203) None",
    "x: standalone role=None member=False stays=True kept layer=None",
    f"  today container {CT_T}.sa_x_ct proxmox_virtual_environment_container ('pve', 'pve2', 202) 'x'",
    "y: standalone role=None member=False stays=True new layer=None",
    f"  container created {CT_T}.sa_y_ct ('pve', 'pve2', 204) ['create'] again=None",
    f"unowned VM created {VM_T}.other ('pve', 'pve1', 199) ['create']",
    "teardown=False",
]


def test_the_view_gives_each_event_its_node_kind_action_and_identity():
    prior = {
        "resources": [
            prior_resource(at(VM_T, "node_a_vm"), vm_of("a", 101)),
            prior_resource(at(APPLY_T, "node_a_apply"), {"node": "10.0.0.1"}),
            prior_resource(at(VM_T, "node_b_vm"), vm_of("b", 102)),
            prior_resource(at(VM_T, "node_d_vm"), vm_of("d", 104), deposed_key="old1"),  # no node runs on it
            prior_resource(at(CT_T, "sa_g_ct"), ct_of("g", 201)),
            prior_resource(at(VM_T, "node_f_vm"), vm_of("f", 106)),
            prior_resource(at(VM_T, "node_i_vm"), vm_of("i", 109)),
            prior_resource(at(VM_T, "node_u_vm"), vm_of("", 110)),  # a name that says nothing
            prior_resource(at(VM_T, "node_v_vm"), vm_of(7, 111)),
            prior_resource(at(CT_T, "sa_x_ct"), ct_of("x", 202, initialization=["text", {"hostname": "x"}])),
            prior_resource(at(CT_T, "sa_w_ct"), {"node_name": "pve2", "vm_id": 203}),
            prior_resource("terraform_data.cluster_membership", {"input": {"control_planes": {"a": "10.0.0.1"}}}),
        ],
        "child_modules": [
            {
                "address": "module.m",
                "resources": [
                    prior_resource(f"module.m.{at(VM_T, 'node_c_vm')}", vm_of("c", 103))
                    | {"type": VM_T, "name": "node_c_vm"}
                ],
            }
        ],
    }
    changes = [
        resource_change(
            at(VM_T, "node_a_vm"), ("update",), change__before=vm_of("a", 101), change__after=vm_of("a", 101)
        ),
        resource_change(
            at(APPLY_T, "node_a_apply"), ("update",), change__before={}, change__after={"node": "10.0.0.1"}
        ),
        resource_change(at(VM_T, "node_a_vm"), ("delete",), deposed="d0", change__before=vm_of("a", 101)),
        resource_change(at(APPLY_T, "node_a_apply"), ("delete",), deposed="d2", change__before={"node": "10.0.0.1"}),
        resource_change(at(VM_T, "node_b_vm"), ("delete",), deposed="d1", change__before={}),
        resource_change(
            at(VM_T, "node_c_vm"),
            ("no-op",),
            previous_address=f"module.m.{at(VM_T, 'node_c_vm')}",
            change__before=vm_of("c", 103),
            change__after=vm_of("c", 103),
        ),
        resource_change(at(CT_T, "sa_g_ct"), ("forget",), change__before=ct_of("g", 201)),
        resource_change(
            at(VM_T, "node_e_vm"), ("create",), change__after=vm_of("e", 105), change__importing={"id": "105"}
        ),
        resource_change(
            at(VM_T, "node_f_vm"),
            ("update",),
            change__before=vm_of("f", 106),
            change__after=vm_of("f", 106),
            change__importing={"id": "106"},
        ),
        resource_change(at(VM_T, "node_h_vm"), ("create",), change__after=vm_of("h", 108)),
        resource_change(at(APPLY_T, "node_h_apply"), ("create",), change__after={"node": "10.0.0.8"}),
        resource_change(at(APPLY_T, "node_j_apply"), ("create",), change__after={}),  # no address yet
        resource_change(
            at(VM_T, "node_i_vm"), ("delete", "create"), change__before=vm_of("i", 109), change__after=vm_of("i", 109)
        ),
        resource_change(at(CT_T, "sa_y_ct"), ("create",), change__after=ct_of("y", 204)),
        resource_change(at(VM_T, "other"), ("create",), change__after=vm_of("z", 199)),
    ]
    view = node_view(read_plan(plan(*changes, prior=prior)), GuardContext(roles={"a": Role.CONTROLPLANE}))
    assert rendered(view) == EVENTS


OWNERS = [
    "p: cluster role=worker member=False stays=True kept layer=None",
    f"  today VM {VM_T}.node_p_vm proxmox_virtual_environment_vm ('pve', 'pve1', 111) 'p'",
    f"  today VM {VM_T}.legacy proxmox_virtual_environment_vm ('pve', 'pve1', 150) 'p'",
    f"  VM created {VM_T}.copy_p ('pve', 'pve1', 111) ['create'] again=None",
    f"  VM created {VM_T}.again ('pve', 'pve1', 150) ['create'] again=None",
    "q: cluster role=worker member=False stays=True new layer=None",
    f"  VM created {VM_T}.named_q ('pve', 'pve1', 112) ['create'] again=None",
    "r: cluster role=None member=False stays=True new layer=platform-other",
    f"  VM updated {VM_T}.other_layer ('pve', 'pve3', 301) ['update'] again=None",
    "s: cluster role=None member=False stays=False new layer=None",
    f"  configuration apply created {APPLY_T}.apply_s ('talos', '10.0.0.12') ['create'] again=None",
    f"  configuration apply updated {APPLY_T}.apply_u ('talos', '10.0.0.12') ['update'] again=None",
    "t: standalone role=None member=False stays=True kept layer=None",
    f"  today container {CT_T}.sa_t_ct proxmox_virtual_environment_container ('pve', 'pve2', 220) 't'",
    f"  container created {CT_T}.guest_t ('pve', 'pve2', 221) ['create'] again=None",
    "u2: cluster role=worker member=False stays=False new layer=None",
    f"  VM created {VM_T}.named_u2 ('pve', 'pve1', 113) ['create'] again=None",
    "v2: cluster role=None member=False stays=False new layer=None",
    f"  VM created {VM_T}.named_v2 ('pve', 'pve1', 114) ['create'] again=None",
    f"  configuration apply created {APPLY_T}.unknown_apply None ['create'] again=None",
    "w2: cluster role=worker member=True stays=False leaving layer=None",
    f"  says w2 (configuration apply of 10.0.0.15 deleted at {APPLY_T}.legacy_apply)",
    f"  today configuration apply {APPLY_T}.legacy_apply talos_machine_configuration_apply ('talos', '10.0.0.15') None",
    f"  configuration apply deleted {APPLY_T}.legacy_apply ('talos', '10.0.0.15') ['delete'] again=None",
    f"unowned VM created {VM_T}.unknown None ['create']",
    "teardown=False",
]


def test_a_machine_without_a_node_id_belongs_to_the_node_it_is():
    """By its identity (claimed by a node's logical id, or by what another layer deployed), its Talos address in the
    membership record, or its name among the cluster's nodes or the guests."""
    recorded = {"control_planes": {}, "workers": {"p": "10.0.0.11", "u2": "10.0.0.13", "w2": "10.0.0.15"}}
    planned = {"control_planes": {}, "workers": {"p": "10.0.0.11", "s": "10.0.0.12", "v2": "10.0.0.14"}}
    prior = {
        "resources": [
            prior_resource(at(VM_T, "node_p_vm"), vm_of("p", 111)),
            prior_resource(at(CT_T, "sa_t_ct"), ct_of("t", 220)),
            prior_resource(at(VM_T, "legacy"), vm_of("p", 150)),  # no node id: its name is a node's
            prior_resource(at(APPLY_T, "legacy_apply"), {"node": "10.0.0.15"}),  # the record's address of w2
            prior_resource("terraform_data.cluster_membership", {"input": recorded}),
        ]
    }
    changes = [
        resource_change(
            "terraform_data.cluster_membership", ("update",), change__before={}, change__after={"input": planned}
        ),
        resource_change(at(VM_T, "copy_p"), ("create",), change__after=vm_of("copy", 111)),  # p's identity
        resource_change(at(APPLY_T, "legacy_apply"), ("delete",), change__before={"node": "10.0.0.15"}),  # w2 leaves
        resource_change(at(APPLY_T, "apply_s"), ("create",), change__after={"node": "10.0.0.12"}),  # planned record
        resource_change(at(APPLY_T, "apply_u"), ("update",), change__before={"node": "10.0.0.12"}, change__after={}),
        resource_change(
            at(VM_T, "other_layer"), ("update",), change__before=vm_of("r", 301, "pve3"), change__after={"name": "r"}
        ),
        resource_change(at(VM_T, "named_q"), ("create",), change__after=vm_of("q", 112)),  # the site's
        resource_change(at(VM_T, "named_u2"), ("create",), change__after=vm_of("u2", 113)),  # the record's
        resource_change(at(VM_T, "named_v2"), ("create",), change__after=vm_of("v2", 114)),  # the planned record's
        resource_change(at(CT_T, "guest_t"), ("create",), change__after=ct_of("t", 221)),  # a guest's hostname
        resource_change(at(VM_T, "again"), ("create",), change__after=vm_of("again", 150)),  # legacy's identity
        resource_change(
            at(VM_T, "unknown"),
            ("create",),
            change__after=vm_of("zz", 115),
            change__after_unknown={"node_name": True},
        ),
        resource_change(
            at(APPLY_T, "unknown_apply"),
            ("create",),
            change__after={"node": "10.0.0.14"},
            change__after_unknown={"node": True},
        ),
    ]
    usage = Usage(machines={("pve3", 301): ("platform-other", "r")})
    read = read_plan(plan(*changes, prior=prior))
    roles = {"q": Role.WORKER, "p": Role.WORKER}
    # The view is kept with the plan per judging context: first read without what other layers deployed (r's VM is
    # no other layer's then), then with it, on the same Plan — the kept view of another context is not reused.
    unknown_layers = node_view(read, GuardContext(roles=roles))
    assert "r: cluster role=None member=False stays=True new layer=platform-other" not in rendered(unknown_layers)
    view = node_view(read, GuardContext(roles=roles, usage=usage))
    assert rendered(view) == OWNERS
    # ... and one context's view is computed once: the same object again, not a second walk over the plan
    assert node_view(read, GuardContext(roles=roles, usage=usage)) is view
    assert node_view(read, GuardContext(roles=roles)) is unknown_layers


LOSSES = [
    "k: cluster role=None member=True stays=False leaving layer=None",
    (
        f"  says k (VM pve1/120 deleted at {VM_T}.node_k_vm; configuration apply of 10.0.1.20 "
        f"deleted at {APPLY_T}.node_k_apply)"
    ),
    f"  today VM {VM_T}.node_k_vm proxmox_virtual_environment_vm ('pve', 'pve1', 120) 'k'",
    (
        f"  today configuration apply {APPLY_T}.node_k_apply talos_machine_configuration_apply "
        "('talos', '10.0.1.20') None"
    ),
    f"  VM deleted {VM_T}.node_k_vm ('pve', 'pve1', 120) ['delete'] again=None",
    f"  configuration apply deleted {APPLY_T}.node_k_apply ('talos', '10.0.1.20') ['delete'] again=None",
    "l: cluster role=None member=True stays=True machine lost layer=None",
    f"  says l (VM pve1/121 deleted at {VM_T}.node_l_vm)",
    f"  today VM {VM_T}.node_l_vm proxmox_virtual_environment_vm ('pve', 'pve1', 121) 'l'",
    (
        f"  today configuration apply {APPLY_T}.node_l_apply talos_machine_configuration_apply "
        "('talos', '10.0.1.21') None"
    ),
    f"  VM deleted {VM_T}.node_l_vm ('pve', 'pve1', 121) ['delete'] again=None",
    "m: cluster role=None member=False stays=False replaced layer=None",
    f"  says m (VM pve1/122 replaced at {VM_T}.node_m_vm, created again at {VM_T}.node_m_vm_new)",
    f"  today VM {VM_T}.node_m_vm proxmox_virtual_environment_vm ('pve', 'pve1', 122) 'm'",
    f"  VM replaced {VM_T}.node_m_vm ('pve', 'pve1', 122) ['delete'] again={VM_T}.node_m_vm_new",
    "n: cluster role=None member=False stays=True machine lost layer=None",
    f"  says n (VM pve1/123 deleted at {VM_T}.node_n_vm)",
    f"  today VM {VM_T}.node_n_vm proxmox_virtual_environment_vm ('pve', 'pve1', 123) 'n'",
    f"  VM deleted {VM_T}.node_n_vm ('pve', 'pve1', 123) ['delete'] again=None",
    f"  configuration apply created {APPLY_T}.node_n_apply ('talos', '10.0.1.23') ['create'] again=None",
    "o: cluster role=None member=False stays=True machine lost layer=None",
    f"  says o (VM pve1/124 deleted at {VM_T}.node_o_vm)",
    f"  today VM {VM_T}.node_o_vm proxmox_virtual_environment_vm ('pve', 'pve1', 124) 'o'",
    f"  VM deleted {VM_T}.node_o_vm ('pve', 'pve1', 124) ['delete'] again=None",
    f"  configuration apply imported {APPLY_T}.node_o_apply ('talos', '10.0.1.24') ['create'] again=None",
    "p: cluster role=None member=False stays=True new layer=None",
    f"  VM created {VM_T}.node_p_vm ('pve', 'pve1', 170) ['create'] again=None",
    "q: cluster role=None member=False stays=False replaced layer=None",
    (
        f"  says q (VM pve1/130 replaced at {VM_T}.node_q_vm, created again at {VM_T}.node_q_vm3; "
        f"VM pve1/131 deleted at {VM_T}.node_q_vm2)"
    ),
    f"  today VM {VM_T}.node_q_vm proxmox_virtual_environment_vm ('pve', 'pve1', 130) 'q'",
    f"  today VM {VM_T}.node_q_vm2 proxmox_virtual_environment_vm ('pve', 'pve1', 131) 'q'",
    f"  VM replaced {VM_T}.node_q_vm ('pve', 'pve1', 130) ['delete'] again={VM_T}.node_q_vm3",
    f"  VM deleted {VM_T}.node_q_vm2 ('pve', 'pve1', 131) ['delete'] again=None",
    "r: cluster role=None member=False stays=True replaced layer=None",
    f"  says r (VM pve1/140 replaced at {VM_T}.node_r_vm, created again at {VM_T}.node_r_vm_a)",
    f"  today VM {VM_T}.node_r_vm proxmox_virtual_environment_vm ('pve', 'pve1', 140) 'r'",
    f"  VM replaced {VM_T}.node_r_vm ('pve', 'pve1', 140) ['delete'] again={VM_T}.node_r_vm_a",
    f"  VM created {VM_T}.node_r_vm_b ('pve', 'pve1', 141) ['create'] again=None",
    "s: standalone role=None member=False stays=False replaced layer=None",
    f"  says s (container pve2/250 replaced at {CT_T}.sa_s_ct, created again at {CT_T}.guest_s)",
    f"  today container {CT_T}.sa_s_ct proxmox_virtual_environment_container ('pve', 'pve2', 250) 's'",
    f"  container replaced {CT_T}.sa_s_ct ('pve', 'pve2', 250) ['delete'] again={CT_T}.guest_s",
    "t: cluster role=None member=False stays=False replaced layer=None",
    f"  says t (VM pve1/160 replaced at {VM_T}.node_t_vm, created again at {VM_T}.node_t2_vm)",
    f"  today VM {VM_T}.node_t_vm proxmox_virtual_environment_vm ('pve', 'pve1', 160) 't'",
    f"  VM replaced {VM_T}.node_t_vm ('pve', 'pve1', 160) ['delete'] again={VM_T}.node_t2_vm",
    "u: cluster role=None member=False stays=True kept layer=None",
    f"  today VM {VM_T}.node_u_vm proxmox_virtual_environment_vm ('pve', 'pve1', 180) 'u'",
    f"  VM updated {VM_T}.node_u_vm ('pve', 'pve1', 180) ['update'] again=None",
    "u2: cluster role=None member=False stays=True new layer=None",
    f"  VM created {VM_T}.node_u2_vm ('pve', 'pve1', 180) ['create'] again=None",
    "x: cluster role=None member=False stays=False replaced layer=None",
    f"  says x (VM pve1/190 replaced at {VM_T}.node_x_vm, created again at {VM_T}.node_x_vm2)",
    f"  today VM {VM_T}.node_x_vm proxmox_virtual_environment_vm ('pve', 'pve1', 190) 'x'",
    f"  VM replaced {VM_T}.node_x_vm ('pve', 'pve1', 190) ['delete'] again={VM_T}.node_x_vm2",
    "teardown=False",
]


def test_whether_the_site_keeps_a_node_from_its_leftovers_and_which_loss_is_a_replacement():
    """No site and no record: a node stays while any of its machines stays or one is created for it. A loss is
    paired with a creation of the same family (machine or apply) of the same node, the same identity first."""
    prior = {
        "resources": [
            prior_resource(at(VM_T, "node_k_vm"), vm_of("k", 120)),
            prior_resource(at(APPLY_T, "node_k_apply"), {"node": "10.0.1.20"}),
            prior_resource(at(VM_T, "node_l_vm"), vm_of("l", 121)),
            prior_resource(at(APPLY_T, "node_l_apply"), {"node": "10.0.1.21"}),
            prior_resource(at(VM_T, "node_m_vm"), vm_of("m", 122)),
            prior_resource(at(VM_T, "node_n_vm"), vm_of("n", 123)),
            prior_resource(at(VM_T, "node_o_vm"), vm_of("o", 124)),
            prior_resource(at(VM_T, "node_q_vm"), vm_of("q", 130)),
            prior_resource(at(VM_T, "node_q_vm2"), vm_of("q", 131)),
            prior_resource(at(VM_T, "node_r_vm"), vm_of("r", 140)),
            prior_resource(at(CT_T, "sa_s_ct"), ct_of("s", 250)),
            prior_resource(at(VM_T, "node_t_vm"), vm_of("t", 160)),
            prior_resource(at(VM_T, "node_u_vm"), vm_of("u", 180)),
            prior_resource(at(VM_T, "node_x_vm"), vm_of("x", 190)),
        ]
    }
    delete = ("delete",)
    changes = [
        resource_change(at(VM_T, "node_k_vm"), delete, change__before=vm_of("k", 120)),  # both go: leaving
        resource_change(at(APPLY_T, "node_k_apply"), delete, change__before={"node": "10.0.1.20"}),
        resource_change(at(VM_T, "node_l_vm"), delete, change__before=vm_of("l", 121)),  # its apply stays: lost
        resource_change(at(VM_T, "node_m_vm"), delete, change__before=vm_of("m", 122)),  # made again elsewhere
        resource_change(at(VM_T, "node_m_vm_new"), ("create",), change__after=vm_of("m", 199)),
        resource_change(at(VM_T, "node_n_vm"), delete, change__before=vm_of("n", 123)),  # an apply is no VM
        resource_change(at(APPLY_T, "node_n_apply"), ("create",), change__after={"node": "10.0.1.23"}),
        resource_change(at(VM_T, "node_o_vm"), delete, change__before=vm_of("o", 124)),
        resource_change(
            at(APPLY_T, "node_o_apply"), ("create",), change__after={"node": "10.0.1.24"}, change__importing={"id": "x"}
        ),
        resource_change(at(VM_T, "node_p_vm"), ("create",), change__after=vm_of("p", 170)),  # imported elsewhere
        resource_change(at(VM_T, "node_q_vm"), delete, change__before=vm_of("q", 130)),  # two losses, one creation
        resource_change(at(VM_T, "node_q_vm2"), delete, change__before=vm_of("q", 131)),
        resource_change(at(VM_T, "node_q_vm3"), ("create",), change__after=vm_of("q", 199)),
        resource_change(at(VM_T, "node_r_vm"), delete, change__before=vm_of("r", 140)),  # the same VM first
        resource_change(at(VM_T, "node_r_vm_b"), ("create",), change__after=vm_of("r", 141)),
        resource_change(at(VM_T, "node_r_vm_a"), ("create",), change__after=vm_of("r", 140)),
        resource_change(at(CT_T, "sa_s_ct"), delete, change__before=ct_of("s", 250)),  # a guest made again
        resource_change(at(CT_T, "guest_s"), ("create",), change__after=ct_of("s2", 250)),
        resource_change(at(VM_T, "node_t_vm"), delete, change__before=vm_of("t", 160)),  # made again as another
        resource_change(at(VM_T, "node_t2_vm"), ("create",), change__after=vm_of("t2", 160)),
        resource_change(
            at(VM_T, "node_u_vm"), ("update",), change__before=vm_of("u", 180), change__after=vm_of("u", 180)
        ),
        resource_change(at(VM_T, "node_u2_vm"), ("create",), change__after=vm_of("u2", 180)),  # u's VM is kept
        resource_change(at(VM_T, "node_x_vm"), delete, change__before=vm_of("x", 190)),  # imported at a new address
        resource_change(
            at(VM_T, "node_x_vm2"), ("create",), change__after=vm_of("x", 191), change__importing={"id": "191"}
        ),
    ]
    view = node_view(read_plan(plan(*changes, prior=prior)), GuardContext(teardown=False))
    assert rendered(view) == LOSSES
    # A teardown asks for every loss: a machine lost while the node stays is the node leaving.
    torn = node_view(read_plan(plan(*changes, prior=prior)), GuardContext(teardown=True))
    lost = [line.split(":")[0] for line in LOSSES if line.endswith("machine lost layer=None")]
    assert lost == ["l", "n", "o"]
    assert rendered(torn) == [
        line.replace("machine lost", "leaving").replace("teardown=False", "teardown=True") for line in LOSSES
    ]


# ---------------------------------------------------------------------------- what a deployed machine uses, every disk
def test_every_disk_of_a_deployed_machine_holds_its_storage_and_sibling_modules_are_all_read():
    vm = vm_attributes(
        "db1",
        vm_id=1301,
        disk=[{"datastore_id": "local-lvm"}, {"datastore_id": ""}, "not a disk"],
        initialization=[{"datastore_id": "ci-store"}],
        efi_disk=[{"datastore_id": "efi-store"}],
        tpm_state={"datastore_id": "tpm-store"},  # one block, not a list
    )
    state = shown(
        children=[
            {"address": "module.a", "resources": [shown_resource(VM, "db", vm)]},
            {"address": "module.b", "resources": [shown_resource(CT, "sa_dns1_ct", {"node_name": "pve2", "vm_id": 7})]},
        ]
    )
    usage = deployed_usage({"l2": state})
    who = "VM db1 in l2 (deployed)"
    assert usage.storages == {store: {who} for store in ("local-lvm", "ci-store", "efi-store", "tpm-store")}
    # A machine no node owns by its address is named by its own name; both sibling modules were read.
    assert usage.machines == {("pve1", 1301): ("l2", "db1"), ("pve2", 7): ("l2", "dns1")}


def test_a_value_that_is_not_text_is_no_user_and_no_crash():
    usage = Usage()
    usage.add_bridge("pve1", "vmbr1", "a")
    usage.add_image("pve1", "local", "talos.qcow2", "b")
    # Terraform's values are JSON: a list where text should be cannot name a bridge or an image (and is not hashed).
    assert usage.bridge_users("pve1", ["vmbr1"]) == set() and usage.bridge_users(["pve1"], "vmbr1") == set()
    assert usage.image_users("pve1", "local", ["talos.qcow2"]) == set()
    assert usage.image_users(["pve1"], "local", "talos.qcow2") == set()
    assert usage.image_users("pve1", ["local"], "talos.qcow2") == set()


def test_site_usage_counts_each_guests_storage_its_own_or_its_hypervisors():
    data = support.example_data()
    data["standalone"] = support.yaml.safe_load((support.EXAMPLE_SITE.parent / "standalone.yaml").read_text())[
        "standalone"
    ]
    site = support.site_from(data)
    usage = site_usage(site)
    guests = {n: g for n, g in site.standalone.nodes.items() if g.parent in site.hypervisors}
    assert guests
    for name, guest in guests.items():
        storage = guest.storage or site.hypervisors[guest.parent].datastores.vm
        assert f"standalone {guest.type} {name} (site file)" in usage.storages[storage]


def test_secrets_under_running_nodes_count_the_applies_that_stay():
    fixture = "hand-pg005-new-secrets-under-running-nodes.json"  # new secrets; five applies in the prior state
    apply = "talos_machine_configuration_apply.node_{}_apply".format
    first_three = ", ".join(apply(n) for n in ("cp-a", "cp-b", "cp-c"))

    def with_changes(*changes: dict):
        def run(data: dict) -> None:
            data["resource_changes"] += changes

        return run

    def gone(node: str) -> dict:
        return resource_change(apply(node), ("delete",), change__before={"node": "10.0.0.9"})

    three = refusal(fixture, "PG005", with_changes(gone("wk-a"), gone("wk-b")))
    assert f"while 3 node applies run on today's secrets ({first_three}): a state lost" in three
    four = refusal(fixture, "PG005", with_changes(gone("wk-b")))
    assert f"while 4 node applies run on today's secrets ({first_three}…): a state lost" in four
    # A replaced apply is a node that stays (its configuration applied again), and so is one updated in place.
    kept = with_changes(
        resource_change(apply("wk-a"), ("update",), change__before={"node": "10.0.0.8"}),
        resource_change(apply("wk-b"), ("delete", "create"), change__before={"node": "10.0.0.9"}),
    )
    assert f"while 5 node applies run on today's secrets ({first_three}…)" in refusal(fixture, "PG005", kept)


# ------------------------------------------------------------------ no change listed, yet every prior object dropped
def test_a_plan_without_changes_is_read_only_when_its_planned_values_keep_a_prior_object():
    prior = {"resources": [prior_resource("a.kept"), prior_resource("a.old", deposed_key="d1")]}

    def planned(root: object, prior: dict = prior) -> dict:
        return plan(prior=prior) | {"planned_values": {"root_module": root} if root != "none" else "not an object"}

    def refused(data: dict) -> str:
        with pytest.raises(NotAPlan) as caught:
            read_plan(data)
        return str(caught.value)

    keeps = {"address": "a.kept"}
    deep = {"child_modules": [{"child_modules": [{"resources": [keeps]}]}, {"resources": []}]}
    for root in ({"resources": [keeps]}, deep, {"resources": [{"address": "a.x"}], "child_modules": [deep, "x"]}):
        assert read_plan(planned(root)).changes == ()  # it keeps a.kept: nothing changes
    one = "<plan>: 1 problem in the plan\n  - resource_changes: is empty, while planned_values drop all 1 object "
    said = "the prior state holds (e.g. 'a.kept'): every one would go and no change says so. " + NEVER
    for root in (
        {},
        {"resources": "a.kept", "child_modules": "x"},
        {"resources": ["a.kept", {"address": ["a.kept"]}, {"name": "a.kept"}], "child_modules": [None, []]},
        "not a module",
        "none",
    ):
        assert refused(planned(root)) == one + said, root
    two = {"resources": [prior_resource("a.one"), prior_resource("b." + "n" * 100)]}
    assert refused(planned({}, two)).startswith(
        "<plan>: 1 problem in the plan\n  - resource_changes: is empty, while planned_values drop all 2 objects the "
        "prior state holds (e.g. 'a.one'): "
    )
    long = {"resources": [prior_resource("b." + "n" * 100)]}
    assert f"(e.g. {cut('b.' + 'n' * 100, 80)})" in refused(planned({}, long))
    # Only deposed objects (no current one), or no prior state at all: nothing to drop.
    assert read_plan(planned({}, {"resources": [prior_resource("a.old", deposed_key="d1")]})).changes == ()
    assert read_plan(plan()).changes == ()


def test_a_machine_whose_identity_is_unknown_until_apply_is_owned_by_its_name_or_by_no_one():
    # A VM created under an address no node owns, its VM id known only at apply: its name says whose it is.
    after = {"name": "wk-z", "node_name": "pve1"}
    vm = resource_change(at(VM_T, "spare"), change__after=after, change__after_unknown={"vm_id": True})
    # An apply created under such an address, the node it configures known only at apply: no one's.
    apply = resource_change(at(APPLY_T, "spare"), ("create",), change__after={"apply_mode": "auto"})
    view = node_view(read_plan(plan(vm, apply)), GuardContext(roles={"wk-z": "worker"}))
    assert rendered(view) == [
        "wk-z: cluster role=worker member=False stays=True new layer=None",
        f"  VM created {VM_T}.spare None ['create'] again=None",
        f"unowned configuration apply created {APPLY_T}.spare None ['create']",
        "teardown=False",
    ]


def test_pg001_joins_every_loss_of_a_node_in_its_headline_details_and_fixes():
    from terravixens.guard.checks.staying_node_kept import _consequence, _detail, _headline, message

    losses = (lost(), lost(APPLY, action="deleted", actions=("delete",)))  # VM replaced, apply deleted: two fixes
    node = NodeView("wk-a", "cluster", "worker", True, True, Fate.REPLACED, losses)
    fixes = list(dict.fromkeys(event.fix() for event in losses))
    assert len(fixes) == 2
    detail = f"{_detail(losses[0])}; {_detail(losses[1])}"
    consequence = _consequence(list(losses))
    assert message(node) == (
        f"{_headline(losses[0])}; {_headline(losses[1])}: node 'wk-a' stays in the site but would be {consequence}. "
        f"{detail[:1].upper() + detail[1:]}: {fixes[0]}; {fixes[1]}."
    )
