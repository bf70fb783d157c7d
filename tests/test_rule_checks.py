"""Each rule's check on a small hand-built view: what it refuses, with its message and on which construct, and what
it lets through. A rule is a pure check over a StackView (terravixens.rules.view); the view here holds blocks and
owners written by hand, so a test reads one decision without a synth (test_rules.py judges the same rules on real
stacks, through cdktf). Cheap enough to run first for every mutant of terravixens/rules/ (scripts/mutation.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from terravixens.catalogue import BOOTSTRAP, MACHINE_SECRETS, NODE_APPLY, NODE_VM, PROTECTED, RESET_CAPABLE
from terravixens.constructs.cluster_config import ClusterConfig
from terravixens.constructs.control_plane import ControlPlane
from terravixens.constructs.talos_node import TalosNode
from terravixens.rules import (
    BootstrapOnce,
    NoSecretLiterals,
    OddControlPlaneQuorum,
    ResetScopedToNode,
    StableLogicalIds,
    StoragePreventDestroy,
)
from terravixens.rules.base import Rule
from terravixens.rules.view import Block

STACK = "the stack"


@dataclass
class View:
    """What the rules read of a StackView, written by hand: blocks, the owner of a block by class (by the block's
    path), constructs by class; a construct at a path is named by its path."""

    blocks: list[Block] = field(default_factory=list)
    owners: dict[tuple[type, str], Any] = field(default_factory=dict)
    classes: dict[type, list[Any]] = field(default_factory=dict)
    name: str = "platform-prod"
    stack: str = STACK

    def blocks_of(self, types: Any) -> list[Block]:
        return [block for block in self.blocks if block.type in types]

    def owner(self, block: Block, kind: type) -> Any:
        return self.owners.get((kind, block.path))

    def of_class(self, kind: type) -> list[Any]:
        if not isinstance(kind, type | tuple):
            raise TypeError("isinstance() arg 2 must be a type, a tuple of types, or a union")  # as StackView's
        return self.classes.get(kind, [])

    def construct_at(self, path: str) -> str:
        return f"construct {path}"


def failures(rule: Rule, view: View) -> list[tuple[Any, str]]:
    """(construct, message) of every error the rule adds on the view, in order."""
    found: list[tuple[Any, str]] = []
    rule.fail = lambda node, detail: found.append((node, rule.message(detail)))  # type: ignore[method-assign]
    rule.check(view)  # type: ignore[arg-type]
    return found


def block(kind_type: str, logical_id: str, path: str = "", kind: str = "resource", **body: Any) -> Block:
    return Block(kind, kind_type, logical_id, body, path or f"platform-prod/{logical_id}")


# ------------------------------------------------------------------------------------------ TV001 OddControlPlaneQuorum
def control_plane(cluster: str, *names: str) -> SimpleNamespace:
    return SimpleNamespace(props=SimpleNamespace(cluster_name=cluster, control_planes=dict.fromkeys(names)))


@pytest.mark.parametrize("count", [1, 3, 5, 7])
def test_tv001_lets_an_odd_count_up_to_seven_through(count):
    names = [f"cp-{n}" for n in range(count)]
    assert failures(OddControlPlaneQuorum(), View(classes={ControlPlane: [control_plane("prod", *names)]})) == []


@pytest.mark.parametrize("count", [0, 2, 4, 6, 8, 9])
def test_tv001_refuses_an_even_count_none_or_more_than_seven_naming_the_cluster_and_its_nodes(count):
    names = sorted(f"cp-{n}" for n in range(count))
    ok, bad = control_plane("prod", "cp-a"), control_plane("lab", *reversed(names))
    [(where, message)] = failures(OddControlPlaneQuorum(), View(classes={ControlPlane: [ok, bad]}))
    assert where is bad
    assert message == (
        f"[TV001 OddControlPlaneQuorum] cluster 'lab' has {count} control planes ({', '.join(names) or 'none'}): "
        f"use 1, 3, 5 or 7. Why: {OddControlPlaneQuorum.why}"
    )


# ------------------------------------------------------------------------------------------- TV004 BootstrapOnce
def bootstrap(logical_id: str = "cluster_bootstrap", **body: Any) -> Block:
    return block(BOOTSTRAP, logical_id, **{"lifecycle": {"ignore_changes": "all"}, **body})


def tv004(*blocks: Block) -> list[tuple[Any, str]]:
    return failures(BootstrapOnce(), View(blocks=[*blocks, block(NODE_VM, "node_cp-a_vm")]))


def test_tv004_one_bootstrap_ignoring_all_changes_passes_counted_once_or_not_at_all():
    assert tv004(bootstrap()) == []
    assert tv004() == []
    assert tv004(bootstrap(count=1)) == tv004(bootstrap(count=0)) == []
    assert tv004(bootstrap(lifecycle=[{"create_before_destroy": False}, {"ignore_changes": "all"}])) == []


def test_tv004_two_bootstraps_are_refused_on_the_stack_naming_them_sorted():
    why = f" Why: {BootstrapOnce.why}"
    assert tv004(bootstrap("second"), bootstrap("first"), bootstrap("again")) == [
        (
            STACK,
            "[TV004 BootstrapOnce] stack 'platform-prod' has 3 bootstraps (again, first, second): keep one per "
            "cluster." + why,
        )
    ]


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("count", 2, "2"),
        ("count", True, "true"),  # a bool is not a count of one
        ("count", False, "false"),
        ("count", None, "null"),
        ("count", "${var.n}", '"${var.n}"'),
        ("for_each", {}, "{}"),
        ("for_each", ["a" * 30, "b" * 30], '["' + "a" * 30 + '", "' + "b" * 24),  # cut to 60 characters
    ],
)
def test_tv004_a_bootstrap_counted_or_iterated_is_refused_on_its_construct(key, value, shown):
    [(where, message)] = tv004(bootstrap(**{key: value}))
    assert where == "construct platform-prod/cluster_bootstrap"
    assert message == (
        f"[TV004 BootstrapOnce] {BOOTSTRAP}.cluster_bootstrap sets {key} to {shown}: a bootstrap block must be one "
        f"bootstrap; decide in Python whether the stack holds it. Why: {BootstrapOnce.why}"
    )


@pytest.mark.parametrize("lifecycle", [None, {}, {"ignore_changes": ["all"]}, {"ignore_changes": "ALL"}])
def test_tv004_a_bootstrap_that_does_not_ignore_all_changes_is_refused(lifecycle):
    [(where, message)] = tv004(bootstrap(lifecycle=lifecycle))
    assert where == "construct platform-prod/cluster_bootstrap"
    assert message == (
        f"[TV004 BootstrapOnce] {BOOTSTRAP}.cluster_bootstrap does not ignore all changes: set lifecycle "
        f"ignore_changes='all'. Why: {BootstrapOnce.why}"
    )


def test_tv004_every_problem_of_every_bootstrap_is_said():
    found = tv004(bootstrap("b", count=3, for_each={}, lifecycle={}), bootstrap("a"))
    assert [message.split(":")[0] for _, message in found] == [
        "[TV004 BootstrapOnce] stack 'platform-prod' has 2 bootstraps (a, b)",
        f"[TV004 BootstrapOnce] {BOOTSTRAP}.b sets count to 3",
        f"[TV004 BootstrapOnce] {BOOTSTRAP}.b sets for_each to {{}}",
        f"[TV004 BootstrapOnce] {BOOTSTRAP}.b does not ignore all changes",
    ]


# ---------------------------------------------------------------------------------- TV005 StoragePreventDestroy
def secrets(release: bool | None, **body: Any) -> View:
    found = block(MACHINE_SECRETS, "cluster_secrets", "platform-prod/cluster_config/secrets", **body)
    owners = {}
    if release is not None:
        config = SimpleNamespace(props=SimpleNamespace(release_secrets=release))
        owners[(ClusterConfig, found.path)] = config
    return View(blocks=[found], owners=owners)


def tv005_message(address: str) -> str:
    return (
        f"[TV005 StoragePreventDestroy] {address} has no lifecycle prevent_destroy: set it, or keep this resource "
        f"outside terravixens' stacks. Why: {StoragePreventDestroy.why}"
    )


@pytest.mark.parametrize("kind_type", sorted(PROTECTED))
@pytest.mark.parametrize("lifecycle", [None, {}, {"prevent_destroy": False}, {"prevent_destroy": "true"}])
def test_tv005_what_cannot_be_recreated_without_prevent_destroy_is_refused(kind_type, lifecycle):
    view = View(blocks=[block(kind_type, "kept", "platform-prod/store/kept", lifecycle=lifecycle)])
    assert failures(StoragePreventDestroy(), view) == [
        ("construct platform-prod/store/kept", tv005_message(f"{kind_type}.kept"))
    ]


@pytest.mark.parametrize("kind_type", sorted(PROTECTED))
def test_tv005_prevent_destroy_passes_as_an_object_or_a_list(kind_type):
    for lifecycle in ({"prevent_destroy": True}, [{"ignore_changes": []}, {"prevent_destroy": True}]):
        view = View(blocks=[block(kind_type, "kept", lifecycle=lifecycle)])
        assert failures(StoragePreventDestroy(), view) == []


def test_tv005_other_types_are_not_judged():
    assert failures(StoragePreventDestroy(), View(blocks=[block(NODE_VM, "node_a_vm"), block(BOOTSTRAP, "b")])) == []


def test_tv005_secrets_released_by_their_cluster_config_pass_and_only_those():
    assert failures(StoragePreventDestroy(), secrets(release=True)) == []
    refused = [("construct platform-prod/cluster_config/secrets", tv005_message(f"{MACHINE_SECRETS}.cluster_secrets"))]
    assert failures(StoragePreventDestroy(), secrets(release=False)) == refused
    assert failures(StoragePreventDestroy(), secrets(release=None)) == refused  # no cluster config owns them
    assert failures(StoragePreventDestroy(), secrets(release=False, lifecycle={"prevent_destroy": True})) == []
    # Released secrets pass over themselves only: a protected block after them is still judged.
    view = secrets(release=True)
    bucket = sorted(PROTECTED - {MACHINE_SECRETS})[0]
    view.blocks.append(block(bucket, "after", "platform-prod/after"))
    assert failures(StoragePreventDestroy(), view) == [
        ("construct platform-prod/after", tv005_message(f"{bucket}.after"))
    ]


# ------------------------------------------------------------------------------------------ TV003 StableLogicalIds
def tv003(logical_id: str, owner: str | None = "wk-a", kind: type = TalosNode) -> list[tuple[Any, str]]:
    found = block(NODE_VM, logical_id, "platform-prod/owner/vm")
    owners = {(kind, found.path): SimpleNamespace(node_name=owner)} if owner else {}
    return failures(StableLogicalIds(), View(blocks=[found], owners=owners))


def tv003_says(logical_id: str, detail: str) -> list[tuple[str, str]]:
    return [("construct platform-prod/owner/vm", f"[TV003 StableLogicalIds] {detail} Why: {StableLogicalIds.why}")]


def standalone_vm_class() -> type:
    from terravixens.constructs.standalone_vm import StandaloneVm

    return StandaloneVm


@pytest.mark.parametrize("logical_id", ["node_wk-a_vm", "node_wk-a_boot_disk", "node_wk-a_v2", "node_wk-a_cpu"])
def test_tv003_an_id_from_the_node_name_and_what_it_is_passes(logical_id):
    assert tv003(logical_id) == []


def test_tv003_a_block_outside_any_node_is_only_checked_for_a_path_hash():
    assert tv003("anything_at_all_1", owner=None) == []
    assert tv003("vm_0A1B2C3D", owner=None) == tv003_says(
        "vm_0A1B2C3D", "'vm_0A1B2C3D' is cdktf's path-derived id: pin it with terravixens.logical_ids.pin()."
    )


def test_tv003_a_path_hash_inside_a_node_is_said_once():
    assert tv003("node_wk-b_vm_0A1B2C3D") == tv003_says(
        "", "'node_wk-b_vm_0A1B2C3D' is cdktf's path-derived id: pin it with terravixens.logical_ids.pin()."
    )
    assert tv003("node_wk-a_vm_0a1b2c3d") == []  # lower case: not cdktf's hash


@pytest.mark.parametrize("logical_id", ["node_wk-b_vm", "vm", "node_wk-a", "sa_wk-a_vm", "node_wk-a-b_vm"])
def test_tv003_an_id_of_another_node_or_of_no_node_is_refused(logical_id):
    assert tv003(logical_id) == tv003_says(
        logical_id, f"{logical_id!r} belongs to node 'wk-a' but is not named node_wk-a_<part>."
    )


@pytest.mark.parametrize(
    ("logical_id", "part"),
    [
        ("node_wk-a_worker_vm", "worker_vm"),
        ("node_wk-a_controlplane", "controlplane"),
        ("node_wk-a_control-plane_vm", "control-plane_vm"),
        ("node_wk-a_control_plane", "control_plane"),
        ("node_wk-a_cp_vm", "cp_vm"),
        ("node_wk-a_vm_wk", "vm_wk"),
        ("node_wk-a_1", "1"),
        ("node_wk-a_vm_2", "vm_2"),
        ("node_wk-a_vm_23_disk", "vm_23_disk"),
    ],
)
def test_tv003_an_id_with_a_role_or_a_position_is_refused(logical_id, part):
    assert tv003(logical_id) == tv003_says(
        logical_id, f"{logical_id!r} carries a role or a position ({part!r}): name it by what it is."
    )


def test_tv003_a_standalone_nodes_ids_start_sa():
    vm = standalone_vm_class()
    assert tv003("sa_dns1_vm", "dns1", vm) == []
    assert tv003("node_dns1_vm", "dns1", vm) == tv003_says(
        "", "'node_dns1_vm' belongs to standalone 'dns1' but is not named sa_dns1_<part>."
    )
    assert tv003("sa_dns1_vm_3", "dns1", vm) == tv003_says(
        "", "'sa_dns1_vm_3' carries a role or a position ('vm_3'): name it by what it is."
    )


# ------------------------------------------------------------------------------------------ TV006 NoSecretLiterals
# Built at run time: the repository itself carries nothing that looks like key material.
BEGIN = "-----BEGIN "
SECRETS = {
    "a PEM private key": BEGIN + "EC PRIVATE KEY-----",
    "a PEM certificate": BEGIN + "CERTIFICATE-----",
    "an age secret key": "AGE-SECRET-" + "KEY-1" + "Q7" * 10,
    "a Proxmox API token": "ops@pve!tf=" + "0123abcd-4567-89ef-abcd-0123456789ab",
    "a base64-encoded PEM block": "LS0tLS1" + "CRUdJTiBDRVJU",
    "a Kubernetes bootstrap token": "abc123." + "0123456789abcdef",
}
NEAR_MISSES = [
    BEGIN + "PUBLIC KEY-----",
    "AGE-SECRET-" + "KEY-1" + "Q" * 19,  # 19 characters: too short for a key
    "AGE-SECRET-" + "KEY-1" + "q" * 30,  # lower case: not bech32 as age writes it
    "ops@pve!tf=" + "not-a-uuid",
    "ops@pve:tf=" + "0123abcd-4567-89ef-abcd-0123456789ab",  # no '!' before the token id
    "abc123." + "0123456789abcde",  # 15 characters after the dot
    "abc123." + "0123456789ABCDEF",  # upper case
    "xabc123." + "0123456789abcdef",  # 7 before the dot
    "user@example.com and a ! mark",
]


def tv006(document: dict[str, Any], view: View | None = None) -> list[tuple[Any, str]]:
    view = view or View()
    view.document = document  # type: ignore[attr-defined]
    return failures(NoSecretLiterals(), view)


def tv006_message(what: str, text: str) -> str:
    return (
        f"[TV006 NoSecretLiterals] stack 'platform-prod' contains {what} in {json.dumps(text[:60])}…: read it at "
        f"apply time (file(), a variable or an environment variable) instead. Why: {NoSecretLiterals.why}"
    )


def in_a_resource(**body: Any) -> dict[str, Any]:
    return {"resource": {"proxmox_virtual_environment_user": {"ops": body}}}


@pytest.mark.parametrize("what", sorted(SECRETS))
def test_tv006_each_kind_of_secret_in_any_string_is_refused_on_the_stack(what):
    text = f"before {SECRETS[what]} after"
    assert tv006(in_a_resource(comment=text)) == [(STACK, tv006_message(what, text))]
    assert tv006({"output": {"o": {"value": [1, {"x": text}]}}}) == [(STACK, tv006_message(what, text))]


def test_tv006_the_message_shows_sixty_characters_of_the_string():
    text = SECRETS["a PEM private key"] + "x" * 100
    [(_, message)] = tv006(in_a_resource(comment=text))
    assert json.dumps(text[:60]) + "…" in message and json.dumps(text[:61]) not in message


def test_tv006_a_string_holding_two_kinds_is_refused_for_each():
    text = SECRETS["a PEM certificate"] + " " + SECRETS["a Kubernetes bootstrap token"]
    assert tv006(in_a_resource(comment=text)) == [
        (STACK, tv006_message("a PEM certificate", text)),
        (STACK, tv006_message("a Kubernetes bootstrap token", text)),
    ]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_tv006_text_that_only_looks_like_a_secret_passes(text):
    assert tv006(in_a_resource(comment=text, description=text)) == []


SECRET_KEYS = ["password", "token", "api_token", "client_key", "private_key", "secret", "secret_key", "access_key"]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_tv006_a_secret_attribute_set_to_a_literal_is_refused_with_its_path(key):
    document = {"provider": {"p": [{"name": "x", "auth": [{key: "hunter2"}]}]}}
    assert tv006(document) == [
        (
            STACK,
            (
                f"[TV006 NoSecretLiterals] stack 'platform-prod' sets secret attribute provider.p.0.auth.0.{key} to "
                f"a literal: pass a reference or a variable instead. Why: {NoSecretLiterals.why}"
            ),
        )
    ]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_tv006_a_secret_attribute_from_a_reference_empty_or_not_text_passes(key):
    for value in ("${var.secret}", "", None, 7, {"id": "x"}, ["x"]):
        assert tv006(in_a_resource(**{key: value})) == [], value
    assert tv006(in_a_resource(**{f"{key}_file": "/run/secret", f"my_{key}": "x", key.upper(): "x"})) == []


def test_tv006_a_literal_under_a_secret_key_nested_deeper_is_found():
    found = tv006(in_a_resource(settings={"password": {"token": "t"}}))
    assert [message.split(" to a literal")[0] for _, message in found] == [
        (
            "[TV006 NoSecretLiterals] stack 'platform-prod' sets secret attribute "
            "resource.proxmox_virtual_environment_user.ops.settings.password.token"
        )
    ]


def public_ca(tmp_path: Any, which: str = "ca") -> str:
    import base64

    from tests.spec_support import make_tls

    return base64.b64encode(make_tls(tmp_path, host="127.0.0.9")[which].read_bytes()).decode()


def snippet_view(ca: str | None, text: str, owned: bool = True) -> tuple[View, dict[str, Any]]:
    from terravixens.constructs.node_env_snippet import NodeEnvSnippet

    snippet = SimpleNamespace(public_ca=ca)
    env = block("proxmox_virtual_environment_file", "sa_dns1_env", "l2/dns1/env", content=text)
    other = block("proxmox_virtual_environment_user", "ops", "l2/ops", comment="nothing")
    owners = {(NodeEnvSnippet, env.path): snippet} if owned else {}
    view = View(blocks=[other, env], owners=owners, classes={NodeEnvSnippet: [snippet]})
    return view, {"resource": {env.type: {env.logical_id: env.body}, other.type: {"ops": other.body}}}


def test_tv006_the_public_ca_a_node_env_snippet_writes_passes_there_only(tmp_path):
    ca = public_ca(tmp_path)
    text = f"TV_CA={ca}\nTV_URL=https://127.0.0.9\n"
    view, document = snippet_view(ca, text)
    assert tv006(document, view) == []
    # The same text in a block the snippet does not own, or with a key beside it: refused.
    view, document = snippet_view(ca, text, owned=False)
    assert tv006(document, view) == [(STACK, tv006_message("a base64-encoded PEM block", text))]
    leaked = f"{text}KEY={BEGIN}EC PRIVATE KEY-----"
    view, document = snippet_view(ca, leaked)
    assert tv006(document, view) == [(STACK, tv006_message("a PEM private key", leaked.replace(ca, "")))]


def test_tv006_a_snippet_whose_ca_is_not_certificates_only_is_not_an_exception(tmp_path):
    for ca in (public_ca(tmp_path, "key"), "", None, "bm90IGEgcGVt"):
        written = public_ca(tmp_path)
        text = f"TV_CA={written}"
        view, document = snippet_view(ca, text)
        view.owners = {key: SimpleNamespace(public_ca=ca) for key in view.owners}
        assert tv006(document, view) == [(STACK, tv006_message("a base64-encoded PEM block", text))], ca


# ---------------------------------------------------------------------------------------- TV002 ResetScopedToNode
VM_WK_B = "${proxmox_virtual_environment_vm.node_wk-b_vm.id}"
REMOTE = "${data.terraform_remote_state.cross-stack-reference-input-platform-prod.outputs.out1}"


class CrossStackView(View):
    outputs: dict[tuple[str, str], tuple[str, object]] = {}  # noqa: RUF012 - set per test on the instance

    def cross_stack_output(self, remote_state: str, output: str) -> tuple[str, object] | None:
        return self.outputs.get((remote_state, output))


def tv002(*blocks: Block, outputs: dict | None = None, standalone: tuple[str, ...] = ()) -> list[tuple[Any, str]]:
    """The blocks, each owned by the node its path names (platform-prod/<node>/...; a node in `standalone` is a
    StandaloneVm), a path of one part owned by no node."""
    vm_class = standalone_vm_class()
    owners = {}
    for found in blocks:
        parts = found.path.split("/")
        if len(parts) > 2 and not found.pathless:
            kind = vm_class if parts[1] in standalone else TalosNode
            owners[(kind, found.path)] = SimpleNamespace(node_name=parts[1])
    view = CrossStackView(blocks=list(blocks), owners=owners)
    view.outputs = outputs or {}
    return failures(ResetScopedToNode(), view)


def tv002_says(path: str, detail: str) -> tuple[str, str]:
    return (f"construct {path}", f"[TV002 ResetScopedToNode] {detail} Why: {ResetScopedToNode.why}")


def reads(reader: str, target: str, owner: tuple[str, str] = ("node", "wk-b"), through: str = "") -> str:
    return (
        f"{reader} of node 'wk-a' reads {target} of {owner[0]} {owner[1]!r}{through}: give it only cluster-level "
        f"inputs and its own node's attributes."
    )


@pytest.mark.parametrize("kind_type", sorted(RESET_CAPABLE))
def test_tv002_a_reset_capable_block_outside_every_node_is_refused(kind_type):
    loose = block(kind_type, "loose", "platform-prod/loose")
    said = f"{kind_type}.loose is not inside a TalosNode, StandaloneVm or StandaloneContainer"
    fix = ": create it through one of them so that it belongs to exactly one node."
    assert tv002(loose) == [tv002_says("platform-prod/loose", said + fix)]
    written = Block("resource", kind_type, "loose", {}, "platform-prod", pathless=True)
    assert tv002(written) == [
        tv002_says("platform-prod", f"{said} (it has no construct path: a stack-level override wrote it){fix}")
    ]


def test_tv002_a_block_of_no_node_that_resets_nothing_passes_whatever_it_reads():
    assert tv002(block("talos_machine_secrets", "secrets", "platform-prod/secrets", count=3, x=VM_WK_B)) == []


def test_tv002_a_node_reads_its_own_and_cluster_level_attributes():
    vm = block(NODE_VM, "node_wk-a_vm", "platform-prod/wk-a/vm", count=1, description="${talos_machine_secrets.s.id}")
    apply = block(
        NODE_APPLY,
        "node_wk-a_apply",
        "platform-prod/wk-a/apply",
        node="${proxmox_virtual_environment_vm.node_wk-a_vm.ipv4_addresses}",
        depends_on=["proxmox_virtual_environment_vm.node_wk-a_vm", "talos_machine_bootstrap.cluster_bootstrap"],
        lifecycle={"replace_triggered_by": ["proxmox_virtual_environment_vm.node_wk-a_vm.id"]},
        count=0,
    )
    assert tv002(vm, apply) == []
    # What is not an address in depends_on or replace_triggered_by (an override may write anything) names nothing.
    odd = block(NODE_VM, "node_wk-a_vm", "platform-prod/wk-a/vm", depends_on=[None, 7, {"a": "b"}, ["node_wk-b_vm"]])
    assert tv002(odd) == []
    assert tv002(block(NODE_VM, "node_wk-a_vm", "platform-prod/wk-a/vm", lifecycle={"replace_triggered_by": [3]})) == []
    # A string holding an expression is read as Terraform reads any string: only inside `${…}`.
    text = "${proxmox_virtual_environment_vm.node_wk-a_vm.id} proxmox_virtual_environment_vm.node_wk-b_vm"
    assert tv002(block(NODE_VM, "node_wk-a_vm", "platform-prod/wk-a/vm", depends_on=[text])) == []


@pytest.mark.parametrize(
    "body",
    [
        {"description": f"id {VM_WK_B}"},
        {"description": '${join(",", [' + VM_WK_B[2:-1] + "])}"},
        {"depends_on": ["proxmox_virtual_environment_vm.node_wk-b_vm"]},
        {"depends_on": "proxmox_virtual_environment_vm.node_wk-a_vm", "tags": [VM_WK_B]},
        {"lifecycle": {"replace_triggered_by": ["proxmox_virtual_environment_vm.node_wk-b_vm.id"]}},
        {"lifecycle": [{"replace_triggered_by": ["proxmox_virtual_environment_vm.node_wk-b_vm"]}]},
    ],
)
def test_tv002_a_node_reading_another_node_is_refused_naming_both(body):
    for kind_type in (NODE_VM, "talos_machine_configuration"):  # reset-capable or not: a read is a read
        reader = block(kind_type, "node_wk-a_x", "platform-prod/wk-a/x", **body)
        assert tv002(reader) == [
            tv002_says(reader.path, reads(f"{kind_type}.node_wk-a_x", "proxmox_virtual_environment_vm.node_wk-b_vm"))
        ]


def test_tv002_every_other_node_read_is_said_in_order_and_a_standalone_namesake_is_another_node():
    reader = block(
        NODE_APPLY,
        "node_wk-a_apply",
        "platform-prod/wk-a/apply",
        node="${proxmox_virtual_environment_container.sa_wk-a_ct.id} ${data.talos_x.node_cp-a_y.id}",
        depends_on=["proxmox_virtual_environment_vm.node_wk-b_vm", "${proxmox_virtual_environment_vm.node_wk-c_vm}"],
    )
    assert tv002(reader) == [
        tv002_says(reader.path, reads(f"{NODE_APPLY}.node_wk-a_apply", target, owner))
        for target, owner in [
            ("proxmox_virtual_environment_container.sa_wk-a_ct", ("standalone", "wk-a")),
            ("proxmox_virtual_environment_vm.node_wk-b_vm", ("node", "wk-b")),
            ("proxmox_virtual_environment_vm.node_wk-c_vm", ("node", "wk-c")),  # a reference in depends_on is read too
            ("talos_x.node_cp-a_y", ("node", "cp-a")),
        ]
    ]


def test_tv002_a_standalone_node_is_judged_as_its_own_node():
    guest = block(NODE_VM, "sa_wk-a_vm", "platform-prod/wk-a/vm", description="${talos_x.node_wk-a_y.id}")
    assert tv002(guest, standalone=("wk-a",)) == [
        tv002_says(
            guest.path,
            f"{NODE_VM}.sa_wk-a_vm of standalone 'wk-a' reads talos_x.node_wk-a_y of node 'wk-a': give it only "
            "cluster-level inputs and its own node's attributes.",
        )
    ]


def test_tv002_a_read_through_another_stacks_output_is_followed():
    reader = block(NODE_VM, "node_wk-a_vm", "platform-prod/wk-a/vm", description=f"{REMOTE} and {REMOTE}")
    key = ("cross-stack-reference-input-platform-prod", "out1")
    assert tv002(reader, outputs={key: ("hypervisors", VM_WK_B)}) == [
        tv002_says(
            reader.path,
            reads(
                f"{NODE_VM}.node_wk-a_vm",
                "proxmox_virtual_environment_vm.node_wk-b_vm",
                through=" (through stack 'hypervisors')",
            ),
        )
    ]
    assert tv002(reader, outputs={key: ("hypervisors", "${talos_x.node_wk-a_y.id} cluster")}) == []
    assert tv002(reader) == []  # not a cross-stack reference cdktf made: nothing to follow


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [("count", 2, "2"), ("count", True, "true"), ("count", "${var.n}", '"${var.n}"'), ("for_each", ["a"] * 20, None)],
)
def test_tv002_a_nodes_machine_counted_or_iterated_is_refused(key, value, shown):
    shown = shown or json.dumps(value)[:60]
    for kind_type in sorted(RESET_CAPABLE):
        machine = block(kind_type, "node_wk-a_m", "platform-prod/wk-a/m", **{key: value})
        assert tv002(machine) == [
            tv002_says(
                machine.path,
                f"{kind_type}.node_wk-a_m of node 'wk-a' sets {key} to {shown}: one node is one machine; add a node "
                "to the site (or a construct) for each machine instead.",
            )
        ]
    both = block(NODE_VM, "node_wk-a_m", "platform-prod/wk-a/m", count=2, for_each={})
    assert [message.split(" sets ")[1][:11] for _, message in tv002(both)] == ["count to 2:", "for_each to"]
    assert tv002(block("talos_machine_configuration", "node_wk-a_c", "platform-prod/wk-a/c", count=2)) == []
    counted_once = block(NODE_VM, "node_wk-a_m", "platform-prod/wk-a/m", count=1, for_each={})
    assert [message.split(" sets ")[1][:11] for _, message in tv002(counted_once)] == ["for_each to"]


# ---------------------------------------------------------------------------- TV007 NoTemplateSequences: its reading
@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("plain text", []),
        ("${var.x}", ["${"]),
        ("%{if x}y%{endif}", ["%{", "%{"]),
        ("$${literal} and %%{literal}", []),  # escapes
        ("$$${x}", []),  # `$${` consumed first: an escape followed by `{x}`
        ("$${x} ${y} %%{z} %{w}", ["${", "%{"]),
        ("$ {x} % {y} {x}$ }%", []),
        ("a${b}c%{d}e${f}", ["${", "%{", "${"]),
    ],
)
def test_tv007_the_sequences_terraform_would_evaluate_left_to_right(text, found):
    from terravixens.rules.no_template_sequences import unescaped

    assert unescaped(text) == found


def test_tv007_cdktfs_token_encodings_are_not_text():
    from terravixens.rules.no_template_sequences import _text_sequences

    assert _text_sequences("${TfToken[TOKEN.12]} and ${TfToken[TOKEN.3]}") == ()
    assert _text_sequences("${TfToken[TOKEN.12]}${x}") == ("${",)
    assert _text_sequences("${TfToken[TOKEN.x]}") == ("${",)  # not an encoding cdktf writes


@pytest.mark.parametrize(
    ("value", "found"),
    [
        # cdktf resolves each encoding to an interpolation in its place: text on either side of one forms no
        # sequence across it (the resolved strings: `100%${aws_x.y.id}{x}`, Terraform reads `%` and `{x}` as text;
        # `cost $${aws_x.y.id}{x}`, Terraform reads `$${` as an escape).
        ("100%${TfToken[TOKEN.1]}{x}", ()),
        ("cost $${TfToken[TOKEN.1]}{x}", ()),
        ("%%${TfToken[TOKEN.1]}{x}", ()),
        ("${TfToken[TOKEN.1]}%{x}", ("%{",)),
        ("%${TfToken[TOKEN.1]}{x} %{y} $", ("%{",)),
        ("a${TfToken[TOKEN.1]}b${TfToken[TOKEN.2]}${c}", ("${",)),
    ],
)
def test_tv007_text_beside_a_token_forms_no_sequence_across_it(value, found):
    from terravixens.rules.no_template_sequences import _text_sequences

    assert _text_sequences(value) == found


@pytest.mark.parametrize(
    ("value", "holds"),
    [
        ({"a": [1, True, False, 0, None, "text", {"k": "v"}], "b": {}}, False),
        ("text", False),
        (None, False),
        ({"a": ["x", {"k": "${TfToken[TOKEN.1]}"}]}, True),
        ({"a ${TfToken[TOKEN.1]}": "x"}, True),  # a key
        (["#{TfToken[TOKEN.2]}"], True),  # a list's encoding
        ({"a": [-1.8881545897087626e289]}, True),  # a number token's encoding
        ({"a": 1.5}, True),  # any number that is not an int may be one
        ({"a": [object()]}, True),  # not plain JSON data
    ],
)
def test_a_raw_configuration_holds_tokens_only_with_an_encoding_a_float_or_an_object(value, holds):
    """What StackView.resolved skips when False (its configuration is then its own resolution)."""
    from terravixens.rules.view import holds_tokens

    assert holds_tokens(value) is holds


def element(kind: type, kind_type: str, logical_id: str) -> Any:
    """A resource or data element as TV007 reads its address: its class, type and logical id (no jsii object)."""
    stand_in = type(
        kind.__name__,
        (kind,),
        {
            "terraform_resource_type": property(lambda self: kind_type),
            "friendly_unique_id": property(lambda self: logical_id),
        },
    )
    return object.__new__(stand_in)


def test_tv007_judges_on_their_own_only_the_elements_that_wrote_no_block_of_their_own():
    """A moved element and two merged under one address write no block of their own: they are judged on their own
    configuration; an element whose block is in the JSON, resource or data, is judged by that block only."""
    from cdktf import TerraformDataSource, TerraformResource

    from terravixens.rules.no_template_sequences import NoTemplateSequences

    user = element(TerraformResource, "proxmox_virtual_environment_user", "ops")
    read = element(TerraformDataSource, "proxmox_virtual_environment_user", "ops")
    moved = element(TerraformResource, "proxmox_virtual_environment_user", "moved")
    twins = [element(TerraformResource, "proxmox_virtual_environment_vm", "twin") for _ in range(2)]
    from_python = block("proxmox_virtual_environment_vm", "node_wk-a_vm")
    blocks = [
        block("proxmox_virtual_environment_user", "ops"),
        block("proxmox_virtual_environment_user", "ops", kind="data"),
        block("proxmox_virtual_environment_vm", "twin"),
        from_python,
        Block("data", "terraform_remote_state", "platform", {}, "platform-prod", pathless=True),
    ]

    def view(*elements: Any) -> Any:
        return SimpleNamespace(
            blocks=blocks,
            python_block=lambda written: object() if written is from_python else None,
            current_block_elements=list(elements),
        )

    assert NoTemplateSequences._without_block(view(user, read, moved, *twins)) == [moved, *twins]
    assert NoTemplateSequences._without_block(view(user, read, twins[0])) == []


def test_the_views_entries_are_objects_or_lists_of_objects_as_terraform_reads_them():
    from terravixens.rules.view import _entries

    assert list(_entries({"a": {"x": 1}, "b": [{"y": 2}, "text", {"z": 3}], "c": "text"})) == [
        ("a", {"x": 1}, False),
        ("b", {"y": 2}, True),
        ("b", {"z": 3}, True),
    ]
    assert list(_entries([1, {"a": {}}, "text", {"b": {}}])) == [("a", {}, True), ("b", {}, True)]
    assert list(_entries(None)) == list(_entries("text")) == []


def test_a_class_is_looked_up_only_in_a_module_imported_already():
    from terravixens.rules.view import StackView, imported_class

    assert imported_class("terravixens.rules.view", "StackView") is StackView
    assert imported_class("terravixens.rules.view", "NoSuchClass") is None
    assert imported_class("terravixens.no_such_module", "StackView") is None


def tv007_messages(document: dict[str, Any], raw: dict[str, Any]) -> list[tuple[Any, str]]:
    """(construct, message) of every error TV007 adds for the validation messages of one variable, `size`: its
    validations as the stack's JSON holds them (`document`) and as its own configuration writes them (`raw`)."""
    from cdktf import TerraformVariable

    from terravixens.rules.no_template_sequences import NoTemplateSequences

    variable = SimpleNamespace(node=SimpleNamespace(path="users/size"), to_terraform=lambda: raw)
    view = SimpleNamespace(document=document, of_class=lambda kind: [variable] if kind is TerraformVariable else [])
    rule = NoTemplateSequences()
    found: list[tuple[Any, str]] = []
    rule.fail = lambda node, detail: found.append((node, rule.message(detail)))  # type: ignore[method-assign]
    rule._check_validation_messages(view)  # type: ignore[arg-type]
    return [(node.node.path, message.split(" Why: ")[0]) for node, message in found]


def test_tv007_a_directive_in_a_function_argument_of_a_validation_message_is_shown_resolved():
    """cdktf escapes `${` in a function's string argument but not `%{`: the raw message is a token only, the resolved
    one holds the directive; a validation that is not an object (an override may write one) is skipped."""
    resolved = '${lower("%{ if true }x%{ endif }")}'
    document = {"variable": {"size": {"validation": ["not an object", {"error_message": resolved}]}}}
    raw = {"variable": {"size": {"validation": ["not an object", {"error_message": "${TfToken[TOKEN.7]}"}]}}}
    assert tv007_messages(document, raw) == [
        (
            "users/size",
            (
                f"[TV007 NoTemplateSequences] users/size variable.size.validation.1.error_message: {resolved!r} "
                "holds '%{', which Terraform would evaluate as a template; text is copied into the JSON unchanged. "
                "Remove it, or write a literal as '$${' / '%%{'."
            ),
        )
    ]
    escaped = '${lower("$${x} %%{ y }")}'
    document["variable"]["size"]["validation"][1]["error_message"] = escaped
    assert tv007_messages(document, raw) == []


def test_tv007_every_string_is_found_with_its_path_keys_included_in_document_order():
    from terravixens.rules.no_template_sequences import _strings

    value = {"a": "x", "b": [1, "y", {"c": None, "d": ["z"]}], 3: "w", "e": {}}
    assert _strings(value, ("root",)) == [
        (("root", "a"), "a"),
        (("root", "a"), "x"),
        (("root", "b"), "b"),
        (("root", "b", 1), "y"),
        (("root", "b", 2, "c"), "c"),
        (("root", "b", 2, "d"), "d"),
        (("root", "b", 2, "d", 0), "z"),
        (("root", 3), "w"),
        (("root", "e"), "e"),
    ]
    assert _strings("alone") == [((), "alone")]


def test_tv007_import_blocks_are_read_by_the_address_they_import_to():
    from terravixens.rules.no_template_sequences import _imports

    first, second = {"to": "a.b", "id": "1"}, {"to": "a.b", "id": "${x}"}
    document = {"import": [first, {"to": 3}, "text", {"id": "x"}, second, {"to": "c.d", "id": "2"}]}
    assert _imports(document) == {"a.b": [first, second], "c.d": [{"to": "c.d", "id": "2"}]}
    assert _imports({}) == _imports({"import": None}) == {}


@pytest.mark.parametrize(
    ("path", "value", "cdktfs"),
    [
        (("data", "terraform_remote_state", "cross", "workspace"), "${terraform.workspace}", True),
        (("data", "terraform_remote_state", "cross", "workspace"), "${terraform.workspace} ", False),
        (("data", "terraform_remote_state", "cross", "config"), "${terraform.workspace}", False),
        (("data", "terraform_remote_state", "cross", "workspace", 0), "${terraform.workspace}", False),
        (("resource", "terraform_remote_state", "cross", "workspace"), "${terraform.workspace}", False),
        (("data", "other", "cross", "workspace"), "${terraform.workspace}", False),
        (("data", "terraform_remote_state", "cross"), "${terraform.workspace}", False),
    ],
)
def test_tv007_only_the_workspace_cdktf_writes_into_a_remote_state_is_cdktfs(path, value, cdktfs):
    from terravixens.rules.no_template_sequences import _cdktf_workspace

    assert _cdktf_workspace(path, value) is cdktfs


# ------------------------------------------------------------------- stack-level overrides as the rules read them
class Stack:
    """A stack's add_override as cdktf's: it merges the override (here: keeps it)."""

    def __init__(self) -> None:
        self.merged: list[tuple[str, Any]] = []

    def add_override(self, path: str, value: Any) -> None:
        self.merged.append((path, value))


def test_a_stack_records_its_overrides_from_then_on_and_each_is_still_merged():
    from terravixens.rules.overrides import record, stack_overrides

    stack = Stack()
    stack.add_override("before", 0)
    assert stack_overrides(stack) == []  # type: ignore[arg-type]
    record(stack)  # type: ignore[arg-type]
    stack.add_override("resource.a.b.x", "${var.y}")
    record(stack)  # type: ignore[arg-type]  # idempotent: what was recorded stays, each override recorded once
    stack.add_override("locals", {"l": [1]})
    assert stack_overrides(stack) == [("resource.a.b.x", "${var.y}"), ("locals", {"l": [1]})]  # type: ignore[arg-type]
    assert stack.merged == [("before", 0), ("resource.a.b.x", "${var.y}"), ("locals", {"l": [1]})]
    assert stack_overrides(Stack()) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "value", "written"),
    [
        ("resource.t.id", {"//": {"metadata": {"path": "x"}}, "a": 1}, {("resource", "t", "id")}),
        ("resource.t.id.//", {"metadata": {}}, {("resource", "t", "id")}),
        ("data.t", {"id": {"//": {}}, "other": {"a": 1}}, {("data", "t", "id")}),
        (
            "resource",
            {"t": {"id": {"//": {}}}, "u": {"v": {"//": 1}}},
            {("resource", "t", "id"), ("resource", "u", "v")},
        ),
        ("resource.t.id.a", {"//": {}}, set()),  # an attribute's value, not a block's metadata
        ("output.o", {"//": {}}, set()),
        ("resource.t.id", {"a": 1}, set()),
        ("resource", {"t": ["id"], "u": {"v": "text"}}, set()),
        ("resource", "text", set()),
    ],
)
def test_a_recorded_override_that_writes_a_blocks_metadata_is_found(path, value, written):
    from terravixens.rules.overrides import metadata_written, record

    stack = Stack()
    record(stack)  # type: ignore[arg-type]
    stack.add_override("locals.l", {"//": {}})  # not a block
    stack.add_override(path, value)
    assert metadata_written(stack) == written  # type: ignore[arg-type]


def test_top_level_keys_listed_in_the_metadata_that_no_recorded_override_explains():
    from terravixens.rules.overrides import record, unrecorded_keys

    stack = Stack()
    record(stack)  # type: ignore[arg-type]
    stack.add_override("resource.a.b.x", 1)
    stack.add_override("locals", {})
    listed = {"//": {"metadata": {"overrides": {"stack": ["resource", "terraform", "locals", "output"]}}}}
    assert unrecorded_keys(stack, listed) == ["terraform", "output"]  # type: ignore[arg-type]
    for document in ({}, {"//": None}, {"//": {"metadata": None}}, {"//": {"metadata": {"overrides": {}}}}):
        assert unrecorded_keys(stack, document) == []  # type: ignore[arg-type]
    assert unrecorded_keys(Stack(), listed) == ["resource", "terraform", "locals", "output"]  # type: ignore[arg-type]


def test_tv003_every_block_is_judged_after_one_it_refuses():
    blocks = [
        block(NODE_VM, "vm_0A1B2C3D", "platform-prod/loose"),
        block(NODE_VM, "node_wk-b_vm", "platform-prod/wk-a/vm"),
        block(NODE_VM, "node_wk-a_vm_1", "platform-prod/wk-a/vm1"),
    ]
    owners = {(TalosNode, found.path): SimpleNamespace(node_name="wk-a") for found in blocks[1:]}
    found = failures(StableLogicalIds(), View(blocks=blocks, owners=owners))
    assert [(where, message.split(": ")[0].split(" but ")[0]) for where, message in found] == [
        ("construct platform-prod/loose", "[TV003 StableLogicalIds] 'vm_0A1B2C3D' is cdktf's path-derived id"),
        ("construct platform-prod/wk-a/vm", "[TV003 StableLogicalIds] 'node_wk-b_vm' belongs to node 'wk-a'"),
        (
            "construct platform-prod/wk-a/vm1",
            "[TV003 StableLogicalIds] 'node_wk-a_vm_1' carries a role or a position ('vm_1')",
        ),
    ]


def test_tv006_judges_a_stack_of_an_app_that_never_imported_the_node_env_snippet(monkeypatch):
    """No NodeEnvSnippet class loaded (a library user's app without standalone nodes): no exception to look for."""
    monkeypatch.delitem(sys.modules, "terravixens.constructs.node_env_snippet", raising=False)
    text = SECRETS["a PEM certificate"]
    assert tv006(in_a_resource(comment=text)) == [(STACK, tv006_message("a PEM certificate", text))]
