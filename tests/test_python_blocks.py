"""Blocks written from Python (terravixens.constructs.python_blocks): the JSON is byte for byte what the bindings
write, whichever way cdktf is asked for it, and the elements exist whenever something needs them.

"Materialized" below is the same app with every such block made an element before synth (what a library user's
own stack, or an Aspect on the app, gets): the JSON of every stack of every test site must be the same bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsii
import pytest
import yaml
from cdktf import App, Aspects, IAspect
from cdktf import Testing as CdktfTesting
from hypothesis import given, settings
from hypothesis import strategies as st

from terravixens.constructs import python_blocks
from terravixens.constructs.json_text import dumps
from terravixens.constructs.talos_node import TalosNode
from terravixens.decommission_settings import Decommission
from terravixens.rules.view import StackView
from terravixens.stacks import build_app, stack_names
from tests import support
from tests.scale import scaled_site_data
from tests.variants import VARIANTS, variant_data

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules" / ".bin" / "node"
STABLE_STRINGIFY = ROOT / "node_modules" / "cdktf" / "node_modules" / "json-stable-stringify"


def files(outdir: Path) -> dict[str, bytes]:
    return {str(path.relative_to(outdir)): path.read_bytes() for path in sorted(outdir.rglob("*.json"))}


def synth_both(site, tmp_path: Path, **options) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(the files written with blocks from Python, the files of the same app materialized before synth)."""
    written, materialized = tmp_path / "python", tmp_path / "materialized"
    build_app(site, str(written), **options).synth()
    app = build_app(site, str(materialized), **options)
    for stack in app.node.children:
        python_blocks.materialize(stack)
    app.synth()
    return files(written), files(materialized)


def platform(app: App):
    return app.node.find_child("platform-prod")


# ------------------------------------------------------------------------------------------ the same bytes
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_test_site_writes_the_same_bytes(variant, tmp_path):
    written, materialized = synth_both(support.site_from(variant_data(VARIANTS[variant])), tmp_path)
    assert written.keys() == materialized.keys()
    for name in written:
        assert written[name] == materialized[name], name


@pytest.mark.parametrize(
    "name, data, options",
    [
        ("scaled", scaled_site_data(14), {}),
        ("standalone", yaml.safe_load((ROOT / "sites" / "standalone.yaml").read_text()), {}),
        ("decommission", support.example_data(), {"decommission": {"prod": Decommission(release_secrets=True)}}),
        (
            "decommission-last",
            support.example_data(),
            {"decommission": {"prod": Decommission(reboot_after_reset=False, non_graceful=frozenset({"cp-a"}))}},
        ),
    ],
)
def test_other_sites_and_decommission_builds_write_the_same_bytes(name, data, options, tmp_path):
    written, materialized = synth_both(support.site_from(data), tmp_path, **options)
    assert written == materialized


def test_a_node_without_the_guest_agent_writes_the_same_bytes(tmp_path):
    data = support.example_data()
    for hypervisor in data["hypervisors"].values():
        hypervisor.setdefault("talos_image", {})["extensions"] = ["siderolabs/iscsi-tools"]
    written, materialized = synth_both(support.site_from(data), tmp_path)
    assert written == materialized
    assert b'"enabled": false' in written["stacks/platform-prod/cdk.tf.json"]


def test_to_terraform_and_testing_synth_give_the_elements_json(example_site, tmp_path):
    """Outside a synth cdktf asks the writer element: the same document, the same Testing.synth text."""
    app = build_app(example_site, str(tmp_path / "a"))
    stack = platform(app)
    materialized_app = build_app(example_site, str(tmp_path / "b"))
    materialized = platform(materialized_app)
    python_blocks.materialize(materialized)
    assert python_blocks.pending_blocks(stack), "the example's nodes are written from Python"
    assert stack.to_terraform() == materialized.to_terraform()
    assert CdktfTesting.synth(stack) == CdktfTesting.synth(materialized)
    # jsii leaves out a null inside an object on its way back from Node.js: the rules' document keeps the nulls of
    # the blocks written from Python (the file has them all).
    assert without_nulls(python_blocks.document_of(stack)) == materialized.to_terraform()
    assert python_blocks.pending_blocks(stack), "reading the JSON made no element"


def without_nulls(value):
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


# --------------------------------------------------------------------------------------- cdktf's own bytes
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


def stable_stringify(documents: list) -> list[str]:
    """json-stable-stringify (the one cdktf writes a stack with), with cdktf's options, run by Node.js."""
    script = (
        f"const s = require({json.dumps(str(STABLE_STRINGIFY))});"
        "const docs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(docs.map((d) => s(d, { space: 2 }))));"
    )
    result = subprocess.run(
        [str(NODE), "-e", script], input=json.dumps(documents), capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


@settings(max_examples=300, deadline=None)
@given(st.lists(JSON_VALUES, min_size=1, max_size=40))
def test_json_text_writes_what_json_stable_stringify_writes(documents):
    # A document travels to Node.js as JSON: what it parses there is what Python holds (-0.0 parses as 0 there).
    documents = json.loads(json.dumps(documents))
    assert [dumps(document) for document in documents] == stable_stringify(documents)


def test_json_text_rewrites_every_synthesized_stack(tmp_path):
    """Every stack file of the example, standalone and a scaled site: parsed and written again, the same bytes."""
    for data in (support.example_data(), scaled_site_data(9)):
        outdir = tmp_path / str(len(json.dumps(data)))
        site = support.site_from(data)
        build_app(site, str(outdir)).synth()
        for name in stack_names(site):
            text = (outdir / "stacks" / name / "cdk.tf.json").read_text()
            assert dumps(json.loads(text)) == text, name


# ------------------------------------------------------------------------------------ elements on demand
def test_reading_a_nodes_element_makes_every_node_of_the_stack_elements(example_site, tmp_path):
    app = build_app(example_site, str(tmp_path))
    stack = platform(app)
    nodes: dict[str, TalosNode] = stack.nodes
    assert all(node.written_from_python for node in nodes.values())
    assert nodes["wk-a"].node.try_find_child("vm") is None
    vm = nodes["wk-a"].vm
    assert vm.node.path == "platform-prod/wk-a/vm" and vm.friendly_unique_id == "node_wk-a_vm"
    assert not any(node.written_from_python for node in nodes.values())
    assert python_blocks.pending_blocks(stack) == []
    children = [child.node.id for child in nodes["cp-a"].node.children]
    assert children == ["vm", "apply"], "the tree a materialized node has always had"


def test_a_nodes_element_changed_by_hand_is_what_synth_writes(example_site, tmp_path):
    app = build_app(example_site, str(tmp_path))
    platform(app).nodes["wk-b"].vm.description = "changed by hand"
    app.synth()
    vm = json.loads((tmp_path / "stacks/platform-prod/cdk.tf.json").read_text())["resource"][
        "proxmox_virtual_environment_vm"
    ]
    assert vm["node_wk-b_vm"]["description"] == "changed by hand"
    assert vm["node_wk-a_vm"]["description"] == "Talos node managed by terravixens"


@jsii.implements(IAspect)
class Tag:
    """A user's Aspect: describes every VM it sees."""

    def __init__(self):
        self.seen: list[str] = []

    def visit(self, node):
        if getattr(node, "terraform_resource_type", None) == "proxmox_virtual_environment_vm":
            self.seen.append(node.node.path)
            node.description = "seen by an Aspect"


def test_an_aspect_of_the_stack_sees_every_vm(example_site, tmp_path):
    app = build_app(example_site, str(tmp_path))
    tag = Tag()
    Aspects.of(platform(app)).add(tag)
    app.synth()
    assert "platform-prod/wk-a/vm" in tag.seen and len(tag.seen) == 5
    vm = json.loads((tmp_path / "stacks/platform-prod/cdk.tf.json").read_text())["resource"][
        "proxmox_virtual_environment_vm"
    ]
    assert {body["description"] for body in vm.values()} == {"seen by an Aspect"}


def test_a_node_in_a_users_stack_has_its_elements_from_the_start(example_site, tmp_path):
    """The constructs a library user composes behave as they always did (tests/test_library_use.py)."""
    from tests.library_stacks import EdgeStack

    app = App(outdir=str(tmp_path))
    stack = EdgeStack(app, "edge")
    assert python_blocks.registry_of(stack) is None
    solo = next(child for child in stack.node.children if isinstance(child, TalosNode))
    assert not solo.written_from_python and [c.node.id for c in solo.node.children] == ["vm", "apply"]


# ------------------------------------------------------------------------------------------- the rules
def test_the_rules_read_blocks_from_python_without_making_elements(example_site, tmp_path):
    app = build_app(example_site, str(tmp_path))
    stack = platform(app)
    view = StackView(stack)
    apply = next(block for block in view.blocks if block.address == "talos_machine_configuration_apply.node_wk-a_apply")
    assert apply.path == "platform-prod/wk-a/apply"
    writer, raw = view.raw_configuration(apply)
    assert isinstance(writer, python_blocks.PythonBlock)
    body = raw["resource"]["talos_machine_configuration_apply"]["node_wk-a_apply"]
    assert body["client_configuration"]["client_key"].startswith("${TfToken[TOKEN.")  # unresolved, as cdktf's raw
    assert apply.body["client_configuration"]["client_key"] == (
        "${talos_machine_secrets.cluster_secrets.client_configuration.client_key}"
    )
    assert view.owner(apply, TalosNode) is stack.nodes["wk-a"]
    assert python_blocks.pending_blocks(stack), "judging made no element"
    app.synth()
    assert python_blocks.pending_blocks(stack), "a synth that passes the rules makes no element"


def test_a_rule_error_on_a_block_from_python_names_its_element(example_site, tmp_path):
    """An error is attached to the element of the block: the block becomes one, and synth names cdktf's path."""
    from terravixens.rules import StableLogicalIds

    app = build_app(example_site, str(tmp_path))
    stack = platform(app)
    view = StackView(stack)
    vm = next(block for block in view.blocks if block.address == "proxmox_virtual_environment_vm.node_cp-a_vm")
    StableLogicalIds().fail_block(view, vm, "a test error.")
    assert not python_blocks.pending_blocks(stack)
    with pytest.raises(RuntimeError) as stopped:
        app.synth()
    assert f"[platform-prod/cp-a/vm] {StableLogicalIds().message('a test error.')}" in str(stopped.value)


def test_a_conflicting_element_makes_the_blocks_elements(example_site, tmp_path):
    """An element of cdktf at the address of a block written from Python: the blocks become elements (cdktf merges
    the two as it always did) instead of a merge that would depend on the tree."""
    from terravixens._bindings.proxmox.virtual_environment_vm import VirtualEnvironmentVm

    app = build_app(example_site, str(tmp_path / "a"))
    stack = platform(app)
    VirtualEnvironmentVm(stack, "twin", node_name="pve9").override_logical_id("node_wk-a_vm")
    document = python_blocks.document_of(stack)
    assert not python_blocks.pending_blocks(stack)
    assert document["resource"]["proxmox_virtual_environment_vm"]["node_wk-a_vm"]["node_name"] in ("pve1", "pve9")


def test_the_round_trips_of_a_node_in_the_apps_stacks(tmp_path, monkeypatch):
    """One round trip per node (its construct) where its resources are written from Python, build and synth."""
    from tests.scale import round_trips

    small, large = round_trips(4, tmp_path, monkeypatch), round_trips(24, tmp_path, monkeypatch)
    assert (large - small) / 20 <= 1, f"{small} round trips for 4 nodes, {large} for 24"


def test_the_types_a_node_writes_by_name_are_its_bindings_types():
    from terravixens._bindings.proxmox.virtual_environment_vm import VirtualEnvironmentVm
    from terravixens._bindings.talos.machine_configuration_apply import MachineConfigurationApply
    from terravixens.catalogue import NODE_APPLY, NODE_VM
    from terravixens.constructs.build import resource_type

    assert (resource_type(VirtualEnvironmentVm), resource_type(MachineConfigurationApply)) == (NODE_VM, NODE_APPLY)


def test_blocks_from_python_need_plain_data():
    tokens = frozenset({"${TfToken[TOKEN.1]}"})
    assert python_blocks.plain({"a": ["x", 1, True, None, {"b": "${TfToken[TOKEN.1]}"}]}, tokens)
    for value in ("${TfToken[TOKEN.2]}", "text ${var.x}", "#{TfToken[TOKEN.3]}", 1.5, object(), {1: "x"}):
        assert not python_blocks.plain({"a": value}, tokens), value


def test_two_apps_of_one_site_keep_their_own_blocks(example_site, tmp_path):
    first, second = build_app(example_site, str(tmp_path / "1")), build_app(example_site, str(tmp_path / "2"))
    assert platform(first).nodes["wk-a"].vm.friendly_unique_id == "node_wk-a_vm"  # the first app's become elements
    assert not python_blocks.pending_blocks(platform(first))
    assert len(python_blocks.pending_blocks(platform(second))) == 11  # 5 nodes' VM and apply, the member list


def test_the_member_list_is_a_block_until_read(example_site, tmp_path):
    """The control plane's member list (terraform_data) is written from Python with the nodes' blocks: reading
    `membership` makes every block of the stack an element, and the health gate still names it first."""
    from cdktf import DataResource

    app = build_app(example_site, str(tmp_path))
    stack = platform(app)
    plane = stack.control_plane
    assert "terraform_data.cluster_membership" in {block.address for block in python_blocks.pending_blocks(stack)}
    assert plane.membership_reference() == "terraform_data.cluster_membership"
    assert isinstance(plane.membership, DataResource)
    assert not python_blocks.pending_blocks(stack)
    assert plane.membership.friendly_unique_id == "cluster_membership"
    assert plane.membership.node.path == "platform-prod/control_plane/membership"
    health = stack.to_terraform()["data"]["talos_cluster_health"]["cluster_health"]
    assert health["depends_on"][:2] == [
        "talos_cluster_kubeconfig.cluster_kubeconfig",
        "terraform_data.cluster_membership",
    ]


def test_the_apps_synth_runs_no_terraform_cli(tmp_path):
    """cdktf's DataResource asks the Terraform CLI its version at every synth (a process of 50 ms or more): in the
    app's stacks the member list is written from Python, so synth runs no process (a fresh jsii runtime, which
    reads TERRAFORM_BINARY_NAME when it starts; the same app with every block an element does run it)."""
    log = tmp_path / "terraform.log"
    terraform = tmp_path / "terraform"
    terraform.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "Terraform v1.11.4"\n')
    terraform.chmod(0o755)
    program = (
        "import sys\n"
        "from terravixens.config.loader import load_site\n"
        "from terravixens.constructs import python_blocks\n"
        "from terravixens.stacks import build_app\n"
        "app = build_app(load_site(sys.argv[1]), sys.argv[2])\n"
        "if sys.argv[3] == 'materialized':\n"
        "    for stack in app.node.children:\n"
        "        python_blocks.materialize(stack)\n"
        "app.synth()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERRAFORM_BINARY_NAME": str(terraform)}
    for way, calls in (("python", ""), ("materialized", "version\n")):
        subprocess.run(
            [sys.executable, "-c", program, str(ROOT / "sites" / "example.yaml"), str(tmp_path / way), way],
            check=True,
            env=env,
            capture_output=True,
            timeout=600,
        )
        assert (log.read_text() if log.exists() else "") == calls, way
        assert (tmp_path / way / "stacks" / "platform-prod" / "cdk.tf.json").is_file()
