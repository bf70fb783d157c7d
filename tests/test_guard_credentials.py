"""What a credentials renewal may change in a platform layer's plan (terravixens.guard.credentials, ADR 0056), judged on
hand-made plans: attribute by attribute, change by change in a plan of several, and what it renews. Pure (no synth):
`make mutation` judges terravixens/guard/credentials.py with this file first. The renewal itself, against the fake
Terraform and the fake cluster, is tests/test_renew_credentials.py."""

from __future__ import annotations

import pytest

from terravixens.catalogue import MACHINE_SECRETS, NODE_APPLY
from terravixens.guard.credentials import beyond_credentials, changed_attributes, renewed
from terravixens.guard.plan import Change, Plan

KUBECONFIG = "talos_cluster_kubeconfig"
VM = "proxmox_virtual_environment_vm"


def change(
    type_: str, actions: tuple[str, ...], before: dict, after: dict, unknown: dict | None = None, name: str = "x"
) -> Change:
    return Change(f"{type_}.{name}", type_, name, actions, before, after, unknown or {})


def test_changed_attributes():
    assert changed_attributes({"a": 1, "b": 2}, {"a": 1, "b": 3}, {}) == {"b"}
    assert changed_attributes({"a": {"k": 1}}, {}, {"a": {"k": True}}) == {"a"}
    assert changed_attributes({"a": [1]}, {"a": [1]}, {"a": [False]}) == set()
    # known only after apply, the value before and the value shown after alike: in a map, in a list, whole
    assert changed_attributes({"a": {"k": 1}}, {"a": {"k": 1}}, {"a": {"k": True}}) == {"a"}
    assert changed_attributes({"a": [1, 2]}, {"a": [1, 2]}, {"a": [False, True]}) == {"a"}
    assert changed_attributes({"a": 1}, {"a": 1}, {"a": True}) == {"a"}
    assert changed_attributes({"a": 1}, {"a": 1}, {"a": False}) == set()
    # an attribute on one side only: gone after, new after, or only marked unknown
    assert changed_attributes({"gone": 1}, {}, {}) == {"gone"}
    assert changed_attributes({}, {"new": 1}, {}) == {"new"}
    assert changed_attributes({}, {}, {"later": True}) == {"later"}


@pytest.mark.parametrize(
    ("made", "found"),
    [
        (
            change(
                NODE_APPLY,
                ("update",),
                {"client_configuration": 1, "machine_configuration": "a"},
                {"machine_configuration": "a"},
                {"client_configuration": True},
            ),
            [],
        ),
        (
            change(
                NODE_APPLY,
                ("update",),
                {"client_configuration": 1, "machine_configuration": "a"},
                {"machine_configuration": "b"},
                {"client_configuration": True},
            ),
            ["talos_machine_configuration_apply.x: update of machine_configuration"],
        ),
        (
            change(MACHINE_SECRETS, ("update",), {"machine_secrets": 1}, {}, {"machine_secrets": True}),
            ["talos_machine_secrets.x: update of machine_secrets"],
        ),
        (change(MACHINE_SECRETS, ("delete", "create"), {}, {}), ["talos_machine_secrets.x: delete/create"]),
        (change("talos_cluster_kubeconfig", ("delete",), {}, {}), ["talos_cluster_kubeconfig.x: delete"]),
        (change("talos_cluster_kubeconfig", ("delete", "create"), {}, {}), []),
        (change(NODE_APPLY, ("delete", "create"), {}, {}), ["talos_machine_configuration_apply.x: delete/create"]),
        (
            change("proxmox_virtual_environment_vm", ("update",), {"a": 1}, {"a": 2}),
            ["proxmox_virtual_environment_vm.x: update"],
        ),
        (change("proxmox_virtual_environment_vm", ("no-op",), {}, {}), []),
    ],
)
def test_what_is_a_renewal(made, found):
    assert beyond_credentials(Plan(changes=(made,), prior=())) == found


def client_certificate_only(type_: str, name: str = "x") -> Change:
    """The renewal's update: only the client configuration, known after apply; the rest as it is."""
    kept = {"machine_configuration": "a", "node": "10.0.0.11"}
    return change(type_, ("update",), {"client_configuration": 1, **kept}, kept, {"client_configuration": True}, name)


def test_each_change_of_a_plan_of_several_is_judged_on_its_own():
    """A change the renewal allows (a no-op, the kubeconfig made again, a client certificate) never ends the walk:
    what follows it is still judged; every change beyond the credentials is named, with what it changes."""
    vm = change(VM, ("update",), {"memory": 1}, {"memory": 2}, name="cp1")
    two = change(NODE_APPLY, ("update",), {"b": 1, "a": 1}, {"b": 2, "a": 2}, name="wk1")
    plan = Plan(
        changes=(
            change(VM, ("no-op",), {}, {}, name="idle"),
            change(KUBECONFIG, ("delete", "create"), {}, {}),
            client_certificate_only(MACHINE_SECRETS),
            two,
            client_certificate_only(NODE_APPLY, "cp1"),
            change(NODE_APPLY, ("delete", "create"), {}, {}, name="cp2"),
            vm,
        ),
        prior=(),
    )
    assert beyond_credentials(plan) == [
        "talos_machine_configuration_apply.wk1: update of a, b",
        "talos_machine_configuration_apply.cp2: delete/create",
        "proxmox_virtual_environment_vm.cp1: update",
    ]


@pytest.mark.parametrize("actions", [("update",), ("create",), ("create", "delete"), ("delete", "create")])
def test_the_kubeconfig_may_be_made_again_updated_or_created(actions):
    assert beyond_credentials(Plan(changes=(change(KUBECONFIG, actions, {}, {}),), prior=())) == []


def test_what_a_plan_renews():
    plan = Plan(
        changes=(
            change(KUBECONFIG, ("no-op",), {}, {}, name="idle"),
            change(KUBECONFIG, ("delete", "create"), {}, {}, name="admin"),
            client_certificate_only(MACHINE_SECRETS, "secrets"),
            change(MACHINE_SECRETS, ("no-op",), {}, {}, name="kept"),
            client_certificate_only(NODE_APPLY, "cp1"),
            change(NODE_APPLY, ("create",), {}, {}, name="new"),
            client_certificate_only(NODE_APPLY, "wk1"),
            change(VM, ("update",), {"a": 1}, {"a": 2}, name="vm"),
        ),
        prior=(),
    )
    assert renewed(plan) == {
        "kubeconfig": ["talos_cluster_kubeconfig.admin"],
        "talosconfig": ["talos_machine_secrets.secrets"],
        "applies": ["talos_machine_configuration_apply.cp1", "talos_machine_configuration_apply.wk1"],
    }
    assert renewed(Plan(changes=(), prior=())) == {"kubeconfig": [], "talosconfig": [], "applies": []}
