"""The rules' view of a stack (terravixens/rules/view.py): what it reads in bulk must equal what cdktf says one by
one — the path of a construct, the element that wrote a block — or a rule would judge the wrong thing."""

from __future__ import annotations

from typing import Any

import pytest
from cdktf import App

from terravixens.constructs import ClusterConfig, TalosNode
from terravixens.rules.view import StackView
from terravixens.stacks import build_app


@pytest.fixture()
def views(example_site, tmp_path) -> dict[str, StackView]:
    app = build_app(example_site, str(tmp_path))
    stacks = {stack.node.id: stack for stack in app.node.children}
    for stack in stacks.values():
        stack.prepare_stack()
    return {name: StackView(stack) for name, stack in stacks.items()}


def test_every_block_is_read_with_its_construct_path(views):
    platform = views["platform-prod"]
    paths = {block.address: block.path for block in platform.blocks}
    assert paths["proxmox_virtual_environment_vm.node_cp-a_vm"] == "platform-prod/cp-a/vm"
    assert (
        paths["data.talos_machine_configuration.cluster_machine_configuration_worker"]
        == "platform-prod/cluster_config/machine_configuration_worker"
    )
    assert len(platform.blocks) == len(platform.block_elements)


@pytest.mark.parametrize("stack", ["hypervisors", "platform-prod", "gitops-prod"])
def test_the_writer_of_each_block_is_the_construct_at_its_path(views, stack):
    """The guess by order (no round trip) is the construct cdktf finds at the block's path (one per level)."""
    view = views[stack]
    pathless = {block.address for block in view.blocks if block.pathless}
    assert all(address.startswith("data.terraform_remote_state.") for address in pathless), pathless
    for block in view.blocks:
        if block.pathless:
            continue
        element, raw = view.element_of(block)
        assert element is view.construct_at(block.path), block.address
        assert block.logical_id in raw[block.kind][block.type]


def test_recorded_locations_give_cdktfs_paths(views):
    view = views["platform-prod"]
    owners = view.of_class((TalosNode, ClusterConfig))
    assert len(owners) == 6
    for owner in owners:
        assert view.path_of(owner) == owner.node.path
        assert view.path_of(owner) == owner.node.path  # remembered as computed


def test_a_slash_in_an_id_is_written_as_cdktf_writes_it(example_site, tmp_path):
    from terravixens.constructs import ClusterConfigProps
    from terravixens.layers import layer_named
    from terravixens.stacks.platform import PlatformStack

    app = App(outdir=str(tmp_path))
    stack = PlatformStack(app, example_site, layer_named(example_site, "platform-prod"))
    odd = ClusterConfig(
        stack, "odd/config", ClusterConfigProps(cluster_name="prod", cluster=example_site.clusters["prod"])
    )
    assert StackView(stack).path_of(odd) == odd.node.path == "platform-prod/odd--config"


def test_owners_are_the_nearest_enclosing_construct(views):
    view = views["platform-prod"]
    owner = {block.address: view.owner(block, TalosNode) for block in view.blocks}
    assert owner["talos_machine_configuration_apply.node_wk-a_apply"].node_name == "wk-a"
    assert owner["talos_machine_bootstrap.cluster_bootstrap"] is None


def test_a_block_no_construct_wrote_belongs_to_the_stack(example_site, tmp_path):
    """A stack-level override can add a whole block: it has the stack's path, and the other blocks of its type are
    still attributed to the elements that wrote them."""
    app = build_app(example_site, str(tmp_path))
    stack = app.node.find_child("platform-prod")
    stack.add_override("resource.proxmox_virtual_environment_vm.stray", {"node_name": "pve1"})
    stack.prepare_stack()
    view = StackView(stack)
    stray = next(block for block in view.blocks if block.logical_id == "stray")
    assert (stray.pathless, stray.path) == (True, "platform-prod")
    assert view.construct_at(stray.path) is stack
    with pytest.raises(LookupError, match="has no construct path"):
        view.element_of(stray)
    for block in view.blocks_of({"proxmox_virtual_environment_vm"}):
        if not block.pathless:
            element, _ = view.element_of(block)
            assert element is view.construct_at(block.path), block.address


def test_the_element_of_a_block_from_cdktf_leaves_the_blocks_written_from_python_as_they_are(example_site, tmp_path):
    """Reading the writer of a block cdktf wrote makes no element of a block written from Python (every node's VM and
    apply would become elements: the cost ADR 0057 saves); a path whose construct writes no block is refused. The
    element that writes the blocks from Python is no construct of the rules'."""
    from terravixens.constructs import python_blocks
    from terravixens.rules.view import Block

    stack = build_app(example_site, str(tmp_path)).node.find_child("platform-prod")
    stack.prepare_stack()
    view = StackView(stack)
    writers = [construct for construct in stack.node.find_all() if python_blocks.is_writer(construct)]
    assert len(writers) == 1 and not any(construct is writers[0] for construct in view.constructs)  # no rule's
    from_python = [block for block in view.blocks if view.python_block(block) is not None]
    other = next(block for block in view.blocks if not block.pathless and view.python_block(block) is None)
    element, raw = view.element_of(other)
    assert element.node.path == other.path and other.logical_id in raw[other.kind][other.type]
    assert from_python and all(view.python_block(block) is not None for block in from_python)
    nowhere = Block("resource", "proxmox_virtual_environment_vm", "x", {}, "platform-prod/cp-a")
    with pytest.raises(
        LookupError, match=r"^proxmox_virtual_environment_vm\.x: the construct at 'platform-prod/cp-a' "
    ):
        view.element_of(nowhere)


def test_tv007_first_to_read_a_fresh_view_refuses_text_written_from_python_on_the_element_made_for_it(
    example_site, tmp_path
):
    """TV007 alone on a fresh view (no other rule made the elements first): text in a node's apply, a block written
    from Python, is refused on the element the view makes for it, labelled with the block's address."""
    from cdktf import TerraformResource

    from terravixens.rules import NoTemplateSequences

    site = example_site.model_copy(deep=True)
    worker = site.clusters["prod"].workers["wk-a"]
    labels = {"pool": "%{ if true }x%{ endif }"}  # a `${` would make the node write elements (python_blocks.plain)
    site.clusters["prod"].workers["wk-a"] = worker.model_construct(**{**dict(worker), "labels": labels})
    stack = build_app(site, str(tmp_path)).node.find_child("platform-prod")
    stack.prepare_stack()
    view = StackView(stack)
    written = [block for block in view.blocks if block.path == "platform-prod/wk-a/apply"]
    assert [view.python_block(block) is not None for block in written] == [True]  # no element yet
    rule = NoTemplateSequences()
    found: list[tuple[Any, str]] = []
    rule.fail = lambda node, detail: found.append((node, detail))  # type: ignore[method-assign]
    rule.check(view)
    assert [(node.node.path, isinstance(node, TerraformResource), detail.split(": ")[0]) for node, detail in found] == [
        ("platform-prod/wk-a/apply", True, "talos_machine_configuration_apply.node_wk-a_apply config_patches.0")
    ]


def test_a_block_written_from_python_gets_its_element_when_the_view_first_asks_for_its_construct(
    example_site, tmp_path
):
    """construct_at on a fresh view: the element of a VM written from Python is created first (then every such block
    has one), and the view's elements are read again and count it; a path of another stack is refused by name."""
    from cdktf import TerraformResource

    app = build_app(example_site, str(tmp_path))
    stack = app.node.find_child("platform-prod")
    stack.prepare_stack()
    view = StackView(stack)
    path = "platform-prod/cp-a/vm"
    written = [block for block in view.blocks if block.path == path]
    assert [view.python_block(block) is not None for block in written] == [True]  # no element yet
    before = list(view.current_block_elements)
    vm = view.construct_at(path)
    assert isinstance(vm, TerraformResource) and vm.node.path == path and vm not in before
    assert vm in view.current_block_elements and len(view.current_block_elements) > len(before)
    assert view.element_of(written[0])[0] is vm
    # Each construct on the way down is remembered at its path.
    assert (view.path_of(vm), view.path_of(vm.node.scope)) == (path, "platform-prod/cp-a")
    assert view.construct_at("platform-prod/cp-a") is vm.node.scope
    with pytest.raises(LookupError, match=r"^'hypervisors/pve1' is not a construct path of stack 'platform-prod'$"):
        view.construct_at("hypervisors/pve1")
